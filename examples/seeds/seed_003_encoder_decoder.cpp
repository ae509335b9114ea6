// Seed notebook 003, "Basic Attention" and "Dot-Product Attention": softmax of a vector and
// along the columns of a matrix, Bahdanau's alignment, weights and context vector for one
// decoder state over five encoder states, then scaled dot-product attention with an additive
// mask, with a causal mask, and the logsumexp of each row. Prints the notebook's softmax and
// context vector (its inputs are in tests/data/seed_examples.inc); the notebook's last two
// cells return scaled_qk @ value rather than the attention, so their printed numbers are not
// the mechanism's, and this example checks its own against the reference instead.
#include "seed_examples.inc"
#include "seed_util.hpp"

namespace {

void softmaxes() {
  const float scores[3] = {3.0f, 1.0f, 0.2f};
  float weights[3];
  seed::check(tessera_softmax(1, 3, scores, 3, weights, 3, 1.0f), "tessera_softmax");
  seed::print("softmax(scores)", weights, 1, 3);
  const float want[3] = {0.8360188f, 0.11314284f, 0.05083836f};
  seed::expect_near("softmax(scores)", weights, want, 3, 1e-6);
  // softmax(scores2D) with axis = 0: each column sums to 1. Tessera's rows are the columns of
  // the transpose.
  const float scores2d[12] = {1, 2, 3, 6, 2, 4, 5, 6, 3, 8, 7, 6};
  float t[12], w[12], out[12];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) t[j * 3 + i] = scores2d[i * 4 + j];
  seed::check(tessera_softmax(4, 3, t, 3, w, 3, 1.0f), "tessera_softmax");
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) out[i * 4 + j] = w[j * 3 + i];
  seed::print("softmax(scores2D, axis=0)", out, 3, 4);
  const float want2d[12] = {0.09003057f, 0.00242826f, 0.01587624f, 0.33333333f,
                            0.24472847f, 0.01794253f, 0.11731043f, 0.33333333f,
                            0.66524096f, 0.97962921f, 0.86681333f, 0.33333333f};
  seed::expect_near("softmax(scores2D)", out, want2d, 12, 1e-6);
}

void bahdanau() {
  using namespace seed_data;
  // e_j = layer_2 . tanh([h_j, s] layer_1): the first 16 rows of layer_1 multiply the encoder
  // state h_j, the last 16 the decoder state s.
  float context[16], weights[5];
  seed::check(tessera_additive_attention(5, 16, 16, 10, kEnc, kDec, kLayer1, kLayer1 + 16 * 10,
                                         kLayer2, context, weights),
              "tessera_additive_attention");
  seed::print("weights", weights, 1, 5);
  seed::print("context_vector", context, 1, 16);
  const float want[16] = {-0.63514569f, 0.04917298f,  -0.43930867f, -0.9268003f,
                          1.01903919f,  -0.43181409f, 0.13365099f,  -0.84746874f,
                          -0.37572203f, 0.18279832f,  -0.90452701f, 0.17872958f,
                          -0.58015282f, -0.58294027f, -0.75457577f, 1.32985756f};
  seed::expect_near("context_vector", context, want, 16, 1e-5);
}

// softmax(q k^T / sqrt(d) + m) v with the notebook's q, k, v and mask, then with a causal mask.
void dot_product() {
  const float q[6] = {1, 0, 0, 0, 1, 0}, k[6] = {1, 2, 3, 4, 5, 6}, v[6] = {0, 1, 0, 1, 0, 1};
  const float m[4] = {0.0f, -1e9f, 0.0f, 0.0f};
  for (const bool causal : {false, true}) {
    tessera_attention_desc d;
    seed::check(tessera_attention_desc_init(&d, 1, 1, 1, 2, 2, 3, 3), "desc");
    float out[6], lse[2], ref[6], ref_lse[2];
    if (causal) {
      d.causal = 1;
    } else {
      d.bias = m;  // one (query, key) matrix: the batch and head strides broadcast it
      d.bias_stride[2] = 2, d.bias_stride[3] = 1;
    }
    d.lse = lse;
    seed::check(tessera_attention(&d, q, k, v, out), "tessera_attention");
    seed::print(causal ? "causal attention" : "masked attention", out, 2, 3);
    seed::print("logsumexp", lse, 1, 2);
    d.lse = ref_lse;
    tessera::reference::attention(d, q, k, v, ref);
    seed::expect_near("attention", out, ref, 6, 1e-6);
    seed::expect_near("logsumexp", lse, ref_lse, 2, 1e-6);
  }
}

}  // namespace

int main() {
  softmaxes();
  bahdanau();
  dot_product();
  std::printf("matches the notebook\n");
  return 0;
}
