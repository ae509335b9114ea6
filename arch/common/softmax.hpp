// Softmax row kernels, written once over the xsimd arch.
//
// Contract: n >= 0 contiguous floats; scale > 0 (finite). Special values are not decided here:
// the kernels return per-row (max, sum) and the driver (src/softmax.cpp) classifies the row
// (NaN anywhere -> the sum is NaN; max = +inf -> mass on the +inf entries; max = -inf -> empty).
// Every sum is reduced in an order fixed by n alone.
//
// Two ways to get (m, s) = (max_j scale x_j, sum_j exp(scale x_j - m)):
//  - online (Milakov & Gimelshein 2018): one read. Each lane keeps a running max and a sum
//    rescaled to it; blocks of kBlock vectors share one rescale, so the cost is 1 + 1/kBlock
//    exps per vector. For rows that must come from memory.
//  - two-pass: a max pass, then a sum-of-exp pass (1 exp per vector) that may also store the
//    exps (softmax's exp-store variant, normalised by a third, multiply-only pass). For rows
//    that stay in L1/L2 between passes, where re-reading costs less than the extra exps.
#pragma once

#include <xsimd/xsimd.hpp>

#include <cstdint>
#include <limits>

#include "exp.hpp"

namespace tessera::arch {

namespace softmax_detail {

constexpr int kBlock = 4;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// a - b where b = -inf would give NaN for a = -inf: an all -inf lane has no mass, so subtract 0.
template <class B>
inline B minus_max(B a, B m) {
  return a - xsimd::select(m == B(kNegInf), B(0.0f), m);
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
  *out_sum = xsimd::hadd(s * exp_vec_nonpositive<Arch>(minus_max(m, B(mx))));
}

// Loads x[i, i + W) scaled, or the tail padded with -inf (no mass).
template <class Arch>
inline xsimd::batch<float, Arch> load_scaled(const float* x, int64_t i, int64_t n, float scale) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  if (i + W <= n) return B::load_unaligned(x + i) * B(scale);
  alignas(64) float buf[W];
  for (int64_t j = 0; j < W; ++j) buf[j] = i + j < n ? x[i + j] * scale : kNegInf;
  return B::load_aligned(buf);
}

}  // namespace softmax_detail

template <class Arch>
void softmax_stats_online(int64_t n, const float* x, float scale, float* out_max, float* out_sum) {
  using namespace softmax_detail;
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  B m(kNegInf), s(0.0f);
  int64_t i = 0;
  for (; i + kBlock * W <= n; i += kBlock * W) {
    B v[kBlock];
    for (int u = 0; u < kBlock; ++u) v[u] = B::load_unaligned(x + i + u * W) * B(scale);
    B bmax = xsimd::max(xsimd::max(v[0], v[1]), xsimd::max(v[2], v[3]));
    const B m_new = xsimd::max(m, bmax);
    B e = exp_vec_nonpositive<Arch>(minus_max(v[0], m_new)) +
          exp_vec_nonpositive<Arch>(minus_max(v[1], m_new));
    e += exp_vec_nonpositive<Arch>(minus_max(v[2], m_new)) +
         exp_vec_nonpositive<Arch>(minus_max(v[3], m_new));
    s = xsimd::fma(s, exp_vec_nonpositive<Arch>(minus_max(m, m_new)), e);
    m = m_new;
  }
  for (; i < n; i += W) {
    const B v = load_scaled<Arch>(x, i, n, scale);
    const B m_new = xsimd::max(m, v);
    s = xsimd::fma(s, exp_vec_nonpositive<Arch>(minus_max(m, m_new)),
                   exp_vec_nonpositive<Arch>(minus_max(v, m_new)));
    m = m_new;
  }
  reduce_lanes<Arch>(m, s, out_max, out_sum);
}

// max_j x_j (unscaled; NaN may or may not win, the sums catch it).
template <class Arch>
float row_max(int64_t n, const float* x) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  B m0(softmax_detail::kNegInf), m1(softmax_detail::kNegInf);
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    m0 = xsimd::max(m0, B::load_unaligned(x + i));
    m1 = xsimd::max(m1, B::load_unaligned(x + i + W));
  }
  alignas(64) float lanes[W];
  xsimd::max(m0, m1).store_aligned(lanes);
  float m = softmax_detail::kNegInf;
  for (int64_t l = 0; l < W; ++l) m = lanes[l] > m ? lanes[l] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// sum_j exp(scale x_j - shift), storing the terms in y when y is not null (y may equal x).
// shift is the row's max, so every argument is <= 0 (up to one rounding): exp_vec_nonpositive.
template <class Arch>
float exp_sum(int64_t n, const float* x, float scale, float shift, float* y) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  B s0(0.0f), s1(0.0f);
  const B vs(scale), vm(-shift);
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    const B e0 = exp_vec_nonpositive<Arch>(xsimd::fma(B::load_unaligned(x + i), vs, vm));
    const B e1 = exp_vec_nonpositive<Arch>(xsimd::fma(B::load_unaligned(x + i + W), vs, vm));
    if (y) {
      e0.store_unaligned(y + i);
      e1.store_unaligned(y + i + W);
    }
    s0 += e0;
    s1 += e1;
  }
  for (; i < n; i += W) {
    alignas(64) float buf[W];
    const int64_t len = n - i < W ? n - i : W;
    for (int64_t j = 0; j < W; ++j)
      buf[j] = j < len ? x[i + j] * scale - shift : softmax_detail::kNegInf;
    const B e = exp_vec_nonpositive<Arch>(B::load_aligned(buf));
    e.store_aligned(buf);
    if (y)
      for (int64_t j = 0; j < len; ++j) y[i + j] = buf[j];
    s0 += e;
  }
  return xsimd::hadd(s0 + s1);
}

// y = exp(scale x - shift) * mul.
template <class Arch>
void exp_scale(int64_t n, const float* x, float scale, float shift, float mul, float* y) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  const B vs(scale), vm(-shift), vmul(mul);
  int64_t i = 0;
  for (; i + W <= n; i += W)
    (exp_vec_nonpositive<Arch>(xsimd::fma(B::load_unaligned(x + i), vs, vm)) * vmul)
        .store_unaligned(y + i);
  for (; i < n; ++i) {
    alignas(64) float buf[W] = {};
    buf[0] = x[i] * scale - shift;
    y[i] = (exp_vec_nonpositive<Arch>(B::load_aligned(buf)) * vmul).get(0);
  }
}

// y = x * mul + add (the normalising pass of the exp-store variant, and log-softmax's
// scale x - lse).
template <class Arch>
void affine(int64_t n, const float* x, float mul, float add, float* y) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  const B vmul(mul), vadd(add);
  int64_t i = 0;
  for (; i + W <= n; i += W)
    xsimd::fma(B::load_unaligned(x + i), vmul, vadd).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = x[i] * mul + add;
}

// A whole row that stays in cache, in one call: max; exps stored in y and summed; y *= 1/sum.
// Stops after the first pass whose result is not finite (the driver then rewrites the row as a
// special row) and reports (max, sum) through out. y may equal x.
template <class Arch>
void softmax_row_cached(int64_t n, const float* x, float scale, float* y, float* out_max,
                        float* out_sum) {
  const float m = row_max<Arch>(n, x) * scale;
  *out_max = m;
  *out_sum = std::numeric_limits<float>::quiet_NaN();
  if (!(m > softmax_detail::kNegInf) || !(m < -softmax_detail::kNegInf)) return;
  const float s = exp_sum<Arch>(n, x, scale, m, y);
  *out_sum = s;
  if (!(s > 0.0f) || !(s < -softmax_detail::kNegInf)) return;
  affine<Arch>(n, y, 1.0f / s, 0.0f, y);
}

// (max, sum) of a cached row in two passes: max, then the sum of exps (one exp per element).
template <class Arch>
void softmax_stats_cached(int64_t n, const float* x, float scale, float* out_max, float* out_sum) {
  const float m = row_max<Arch>(n, x) * scale;
  *out_max = m;
  const bool finite = m > softmax_detail::kNegInf && m < -softmax_detail::kNegInf;
  *out_sum =
      finite ? exp_sum<Arch>(n, x, scale, m, nullptr) : std::numeric_limits<float>::quiet_NaN();
}

}  // namespace tessera::arch
