// The merge primitive of streaming softmax (see tessera/softmax.hpp).
#include <cmath>
#include <limits>

#include "tessera/softmax.hpp"

namespace tessera {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Rescale factor of a part with max ma to the merged max m: 0 for a part with no mass (max
// -inf), 1 for a part at the merged max, which with m = +inf is how +inf parts (their sum
// counts their +inf scores) keep all the mass and finite parts get exp(-inf) = 0.
float factor(float ma, float m) {
  if (ma == kNegInf) return 0.0f;
  return ma == m ? 1.0f : std::exp(ma - m);
}

void factors(float ma, float mb, float m, float& ca, float& cb) {
  ca = factor(ma, m);
  cb = factor(mb, m);
}

}  // namespace

void OnlineSoftmaxState::add(float score) {
  OnlineSoftmaxState one;
  one.max = score;
  one.sum = score == kNegInf ? 0.0f : 1.0f;
  if (std::isnan(score)) one.sum = score;
  merge(one);
}

void OnlineSoftmaxState::merge(const OnlineSoftmaxState& other) {
  if (std::isnan(max) || std::isnan(other.max) || std::isnan(sum) || std::isnan(other.sum)) {
    max = sum = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const float m = max > other.max ? max : other.max;
  if (m == kNegInf) return;  // both empty
  float ca, cb;
  factors(max, other.max, m, ca, cb);
  sum = sum * ca + other.sum * cb;
  max = m;
}

float OnlineSoftmaxState::lse() const {
  if (std::isnan(max) || std::isnan(sum)) return std::numeric_limits<float>::quiet_NaN();
  return sum > 0.0f ? max + std::log(sum) : kNegInf;
}

void merge_partial_output(OnlineSoftmaxState& a, float* o_a, const OnlineSoftmaxState& b,
                          const float* o_b, int64_t dim) {
  const float m = a.max > b.max ? a.max : b.max;
  float ca = 0.0f, cb = 0.0f;
  if (m != kNegInf) factors(a.max, b.max, m, ca, cb);
  for (int64_t c = 0; c < dim; ++c) o_a[c] = o_a[c] * ca + o_b[c] * cb;
  a.merge(b);
}

}  // namespace tessera
