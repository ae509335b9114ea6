// Seed notebook 001, "A more generalised form of attention": embeddings of a source and a
// target sequence (50 tokens, 10 features), three Linear(10, 10) layers with bias, queries and
// values from the source and keys from the target, unscaled scores, softmax, and alpha v: a
// 50 x 10 result. The notebook's numbers come from PyTorch's random initialisation; this
// example draws its own, prints the result's size and first rows, and checks it against
// Tessera's reference and against the same attention run as a prepared layer.
#include "seed_util.hpp"

namespace {

constexpr int kLen = 50, kVocab = 100, kDim = 10;

// y = x W^T + b for a Linear(kDim, kDim) (W stored out x in, as PyTorch stores it).
struct Linear {
  std::vector<float> w, b;
  explicit Linear(seed::Random& r) {
    for (int i = 0; i < kDim * kDim; ++i) w.push_back(r.uniform(-0.3f, 0.3f));
    for (int i = 0; i < kDim; ++i) b.push_back(r.uniform(-0.3f, 0.3f));
  }
  std::vector<float> operator()(const std::vector<float>& x) const {
    std::vector<float> y(x.size());
    for (int i = 0; i < kLen; ++i)  // the bias as C's initial value, then C += x W^T
      for (int j = 0; j < kDim; ++j) y[size_t(i * kDim + j)] = b[size_t(j)];
    seed::check(tessera_sgemm(TESSERA_NO_TRANS, TESSERA_TRANS, kLen, kDim, kDim, 1.0f, x.data(),
                              kDim, w.data(), kDim, 1.0f, y.data(), kDim),
                "tessera_sgemm");
    return y;
  }
};

}  // namespace

int main() {
  seed::Random r{1};
  std::vector<float> src_embed, tgt_embed;
  for (int i = 0; i < kVocab * kDim; ++i) src_embed.push_back(r.uniform(-1.0f, 1.0f));
  for (int i = 0; i < kVocab * kDim; ++i) tgt_embed.push_back(r.uniform(-1.0f, 1.0f));
  const Linear Q(r), K(r), V(r);
  // src = 0..49, target = 1..50: each token's embedding row.
  std::vector<float> x, y;
  for (int t = 0; t < kLen; ++t)
    for (int j = 0; j < kDim; ++j) {
      x.push_back(src_embed[size_t(t * kDim + j)]);
      y.push_back(tgt_embed[size_t((t + 1) * kDim + j)]);
    }
  const std::vector<float> q = Q(x), k = K(y), v = V(x);  // keys from the target
  tessera_attention_desc d;
  seed::check(tessera_attention_desc_init(&d, 1, 1, 1, kLen, kLen, kDim, kDim), "desc");
  d.scale = 1.0f;  // the notebook's scores are q @ k.T, unscaled
  std::vector<float> a(size_t(kLen * kDim)), ref(a.size());
  seed::check(tessera_attention(&d, q.data(), k.data(), v.data(), a.data()), "tessera_attention");
  std::printf("a.size() = [%d, %d]\n", kLen, kDim);
  seed::print("a[:3]", a.data(), 3, kDim);
  tessera::reference::attention(d, q.data(), k.data(), v.data(), ref.data());
  seed::expect_near("a", a.data(), ref.data(), a.size(), 1e-5);
  std::printf("equals the reference\n");

  // The same attention as one prepared layer: queries and values from the source, keys from the
  // target (x_k != x_v), the Linear weights transposed into the layer's in x out form, W_o = I.
  tessera_mha_desc m;
  seed::check(tessera_mha_desc_init(&m, 1, kLen, kLen, kDim, 1), "mha desc");
  m.scale = 1.0f;
  std::vector<float> wq(kDim * kDim), wk(wq.size()), wv(wq.size()), eye(wq.size(), 0.0f);
  for (int i = 0; i < kDim; ++i) {
    eye[size_t(i * kDim + i)] = 1.0f;
    for (int j = 0; j < kDim; ++j) {
      wq[size_t(i * kDim + j)] = Q.w[size_t(j * kDim + i)];
      wk[size_t(i * kDim + j)] = K.w[size_t(j * kDim + i)];
      wv[size_t(i * kDim + j)] = V.w[size_t(j * kDim + i)];
    }
  }
  m.w_q = wq.data(), m.w_k = wk.data(), m.w_v = wv.data(), m.w_o = eye.data();
  m.b_q = Q.b.data(), m.b_k = K.b.data(), m.b_v = V.b.data();
  tessera_mha_layer* layer = nullptr;
  seed::check(tessera_mha_create(&m, &layer), "tessera_mha_create");
  std::vector<float> from_layer(a.size());
  seed::check(tessera_mha_layer_forward(layer, &m, x.data(), y.data(), x.data(), from_layer.data(),
                                        nullptr, 0),
              "tessera_mha_layer_forward");
  tessera_mha_destroy(layer);
  seed::expect_near("the layer's a", from_layer.data(), a.data(), a.size(), 1e-5);
  std::printf("the prepared layer (keys from the target) gives the same a\n");
  return 0;
}
