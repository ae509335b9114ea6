// Seed notebook 002, "Attention Mechanism": a sentence of 5 random binary word vectors (7
// features), binary W_Q, W_K, W_V (7 x 3), Att(X) = softmax(Q K^T / sqrt(d_K)) V, and, as the
// notebook suggests, heads chained with a different d_K each: the first head's 5 x 3 output is
// the second head's input (d_K = 4), giving a 5 x 4 encoding. Prints the notebook's shape
// checks and the encodings, checked against Tessera's reference.
#include "seed_util.hpp"

namespace {

// One head: X (s x w) -> softmax(X W_Q (X W_K)^T / sqrt(d)) X W_V (s x d), W binary.
std::vector<float> head(const std::vector<float>& x, int s, int w, int d, seed::Random& r) {
  std::vector<float> wq, wk, wv;
  for (auto* m : {&wq, &wk, &wv})
    for (int i = 0; i < w * d; ++i) m->push_back(float(r.below(2)));
  std::vector<float> q(size_t(s * d)), k(q.size()), v(q.size()), att(q.size()), ref(q.size());
  seed::matmul(s, d, w, x.data(), wq.data(), false, q.data());
  seed::matmul(s, d, w, x.data(), wk.data(), false, k.data());
  seed::matmul(s, d, w, x.data(), wv.data(), false, v.data());
  std::printf("%s\n", q.size() == size_t(s * d) ? "True" : "False");  // Q.shape == (s, d)
  tessera_attention_desc desc;  // scale 0: 1/sqrt(d), the notebook's attention_size**0.5
  seed::check(tessera_attention_desc_init(&desc, 1, 1, 1, s, s, d, d), "desc");
  seed::check(tessera_attention(&desc, q.data(), k.data(), v.data(), att.data()),
              "tessera_attention");
  tessera::reference::attention(desc, q.data(), k.data(), v.data(), ref.data());
  seed::expect_near("head", att.data(), ref.data(), att.size(), 1e-5);
  return att;
}

}  // namespace

int main() {
  const int sentence_length = 5, word_embedding_size = 7;
  seed::Random r{3};
  std::vector<float> sentence;
  for (int i = 0; i < sentence_length * word_embedding_size; ++i)
    sentence.push_back(float(r.below(2)));
  const std::vector<float> first = head(sentence, sentence_length, word_embedding_size, 3, r);
  seed::print("attention (d_K = 3)", first.data(), sentence_length, 3);
  const std::vector<float> second = head(first, sentence_length, 3, 4, r);
  seed::print("chained (d_K = 4)", second.data(), sentence_length, 4);
  std::printf("equals the reference\n");
  return 0;
}
