// Seed notebook 000, "Attention": attention as a database of key-value pairs. A class holds
// Glorot-initialised W_Q, W_K (d_L x d_K) and W_V (d_L x d_V); calc_attention projects queries,
// keys and values into their latent spaces (x W^T), scores every query against every key,
// scales by 1/sqrt(d_L), and returns the softmax-weighted sum of the values. The notebook
// prints no numbers (its weights are random): this example queries a store of 6 pairs with 2
// queries and checks the result against Tessera's reference.
#include <cmath>

#include "seed_util.hpp"

namespace {

class Attention {
 public:
  Attention(int d_k, int d_v, int d_l) : d_k_(d_k), d_v_(d_v), d_l_(d_l) {
    seed::Random r{42};
    const float limit = std::sqrt(6.0f / float(d_k + d_l));  // Glorot's uniform limit
    for (auto* w : {&w_q_, &w_k_})
      for (int i = 0; i < d_l * d_k; ++i) w->push_back(r.uniform(-limit, limit));
    for (int i = 0; i < d_l * d_v; ++i) w_v_.push_back(r.uniform(-limit, limit));
  }

  // n_q queries (d_K wide) against n keys (d_K) and n values (d_V): n_q x d_L.
  std::vector<float> calc_attention(int n_q, int n, const float* q, const float* k,
                                    const float* v) const {
    std::vector<float> lq(size_t(n_q * d_l_)), lk(size_t(n * d_l_)), lv(size_t(n * d_l_));
    seed::matmul(n_q, d_l_, d_k_, q, w_q_.data(), true, lq.data());  // Q W_Q^T
    seed::matmul(n, d_l_, d_k_, k, w_k_.data(), true, lk.data());
    seed::matmul(n, d_l_, d_v_, v, w_v_.data(), true, lv.data());
    tessera_attention_desc d;  // scale 0: 1/sqrt(d_L), the notebook's
    seed::check(tessera_attention_desc_init(&d, 1, 1, 1, n_q, n, d_l_, d_l_), "desc");
    std::vector<float> out(size_t(n_q * d_l_)), ref(out.size());
    seed::check(tessera_attention(&d, lq.data(), lk.data(), lv.data(), out.data()),
                "tessera_attention");
    tessera::reference::attention(d, lq.data(), lk.data(), lv.data(), ref.data());
    seed::expect_near("calc_attention", out.data(), ref.data(), out.size(), 1e-6);
    return out;
  }

 private:
  int d_k_, d_v_, d_l_;
  std::vector<float> w_q_, w_k_, w_v_;
};

}  // namespace

int main() {
  const int d_k = 4, d_v = 5, d_l = 3, pairs = 6, queries = 2;
  seed::Random r{7};
  std::vector<float> keys, values, q;
  for (int i = 0; i < pairs * d_k; ++i) keys.push_back(r.uniform(-1.0f, 1.0f));
  for (int i = 0; i < pairs * d_v; ++i) values.push_back(r.uniform(-1.0f, 1.0f));
  for (int i = 0; i < queries * d_k; ++i) q.push_back(r.uniform(-1.0f, 1.0f));
  const Attention att(d_k, d_v, d_l);
  const std::vector<float> out =
      att.calc_attention(queries, pairs, q.data(), keys.data(), values.data());
  seed::print("attention", out.data(), queries, d_l);
  std::printf("equals the reference\n");
  return 0;
}
