// Lane helpers shared by the softmax row kernels: reductions across a vector, the padded tail
// of a row, and the merge of per-lane online-softmax states.
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>

#include "exp.hpp"
#include "lanes.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {
namespace softmax_detail {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// a - b where b = -inf would give NaN for a = -inf: an all -inf lane has no mass, so subtract 0.
template <class B>
inline B minus_max(B a, B m) {
  return a - xsimd::select(m == B(kNegInf), B(0.0f), m);
}

template <class Arch>
inline float max_across(xsimd::batch<float, Arch> v) {
  return lanes::reduce<Arch>(v, [](auto a, auto b) { return xsimd::max(a, b); });
}

template <class Arch>
inline float sum_across(xsimd::batch<float, Arch> v) {
  return lanes::reduce<Arch>(v, [](auto a, auto b) { return a + b; });
}

// Lane states (m_l, s_l) -> (m, s), combined in lane order.
template <class Arch>
inline void reduce_lanes(xsimd::batch<float, Arch> m, xsimd::batch<float, Arch> s, float* out_max,
                         float* out_sum) {
  using B = xsimd::batch<float, Arch>;
  alignas(64) float lanes[B::size];
  m.store_aligned(lanes);
  float mx = lanes[0];
  bool nan = false;
  for (size_t l = 0; l < B::size; ++l) {
    nan |= lanes[l] != lanes[l];
    mx = lanes[l] > mx ? lanes[l] : mx;
  }
  if (nan) mx = std::numeric_limits<float>::quiet_NaN();
  *out_max = mx;
  *out_sum = sum_across<Arch>(s * exp_vec_nonpositive<Arch>(minus_max(m, B(mx))));
}

// x[i, i + len) (len <= W) padded with -inf (no mass).
template <class Arch>
inline xsimd::batch<float, Arch> load_tail(const float* x, int64_t len) {
  using B = xsimd::batch<float, Arch>;
  alignas(64) float buf[B::size];
  for (int64_t j = 0; j < int64_t(B::size); ++j) buf[j] = j < len ? x[j] : kNegInf;
  return B::load_aligned(buf);
}

template <class Arch>
inline void store_tail(xsimd::batch<float, Arch> v, float* y, int64_t len) {
  alignas(64) float buf[xsimd::batch<float, Arch>::size];
  v.store_aligned(buf);
  for (int64_t j = 0; j < len; ++j) y[j] = buf[j];
}

}  // namespace softmax_detail
}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
