// Seed notebook 004, "The General Attention Mechanism with NumPy and SciPy": four words, three
// random 3 x 3 projections, and the attention of every word over all four. Prints the
// notebook's matrix (its inputs are in tests/data/seed_examples.inc).
#include "seed_examples.inc"
#include "seed_util.hpp"

int main() {
  using namespace seed_data;
  float q[12], k[12], v[12], attention[12];
  // Q = words W_Q, K = words W_K, V = words W_V.
  seed::matmul(4, 3, 3, kWords, kWq, false, q);
  seed::matmul(4, 3, 3, kWords, kWk, false, k);
  seed::matmul(4, 3, 3, kWords, kWv, false, v);
  // weights = softmax(Q K^T / sqrt(3)), attention = weights V: the default scale.
  tessera_attention_desc d;
  seed::check(tessera_attention_desc_init(&d, 1, 1, 1, 4, 4, 3, 3), "desc");
  seed::check(tessera_attention(&d, q, k, v, attention), "tessera_attention");
  seed::print("attention", attention, 4, 3);
  // The notebook's output.
  const float want[12] = {0.98522025f, 1.74174051f, 0.75652026f, 0.90965265f,
                          1.40965265f, 0.5f,        0.99851226f, 1.75849334f,
                          0.75998108f, 0.99560386f, 1.90407309f, 0.90846923f};
  seed::expect_near("attention", attention, want, 12, 1e-6);
  std::printf("matches the notebook\n");
  return 0;
}
