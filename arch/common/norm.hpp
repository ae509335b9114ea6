// A decoder block's row kernels: RMSNorm and LayerNorm (each optionally after the residual add)
// and the activations of a feed-forward layer, gated (SwiGLU, GeGLU) or not.
//
// Contract (NormActKernels, arch/kernels.hpp):
//  - rms(n, x, r, gain, bias, eps, y): where r is given, x[i] += r[i] first (float32 adds, the
//    sums stored in x); then y[i] = x[i] s gain[i] + bias[i], s = 1 / sqrt(mean(x^2) + eps),
//    gain and bias optional (1 and 0). The sum of squares is float32 over the W lanes of a
//    vector, lane l summing values l, l + W, ... in order, the lanes then added; s is
//    1 / sqrt(ss / n + eps), each step rounded once. Every y within (ceil(n / W) + W + 8) u
//    |x s gain| + 2 u |bias| of the exact normalisation of the stored x (u = 2^-24).
//  - layer(...): the same with x centred: the mean m summed as above, then the centred squares
//    (x - m)^2 in a second pass; y = (x - m) s gain + bias, s = 1 / sqrt(var + eps). Each y
//    within (ceil(n / W) + W + 8) u (|x - m| + |m|) s |gain| + 2 u |bias| (the mean's error
//    scales with |m|).
//  - act[a](n, g, u, y): y = f(g) u, or f(g) where u is null; a = 0 SiLU, f(g) = g / (1 +
//    e^-g); a = 1 GELU in its tanh form, 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3)))
//    (exp.hpp's exp and tanh, within 2 ulp each). SiLU within 8 u |y|; GELU within 8 u |y| +
//    |0.5 g u| (6 u (1 - t^2) |z| + 4 u), z the tanh's argument and t = tanh(z).
//  - y may be x (or g) itself: every value is read before it is written. Stateless, no
//    allocation, nothing read or written past n values.
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <cmath>
#include <cstdint>

#include "../kernels.hpp"
#include "exp.hpp"
#include "fmadd.hpp"
#include "lanes.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

namespace norm_detail {

// The tail of n values (fewer than W) as one vector, the missing lanes `fill`.
template <class Arch>
inline xsimd::batch<float, Arch> tail(const float* x, int64_t n, float fill) {
  using B = xsimd::batch<float, Arch>;
  alignas(64) float buf[B::size];
  for (int64_t i = 0; i < int64_t(B::size); ++i) buf[i] = i < n ? x[i] : fill;
  return B::load_aligned(buf);
}

template <class Arch>
inline void store_tail(xsimd::batch<float, Arch> v, int64_t n, float* y) {
  alignas(64) float buf[xsimd::batch<float, Arch>::size];
  v.store_aligned(buf);
  for (int64_t i = 0; i < n; ++i) y[i] = buf[i];
}

// x += r (where r is given), and the sum over the lanes of (x - centre)^2, or of x where
// Square is false (LayerNorm's mean, in the same pass as its residual add).
template <class Arch, bool Square = true>
inline float add_and_sum(int64_t n, float* x, const float* r, float centre) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  B acc(0.0f);
  const B c(centre);
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    B v = B::load_unaligned(x + i);
    if (r) {
      v = v + B::load_unaligned(r + i);
      v.store_unaligned(x + i);
    }
    if constexpr (Square) {
      const B d = v - c;
      acc = fmadd(d, d, acc);
    } else {
      acc = acc + v;
    }
  }
  if (i < n) {
    // (missing lanes: centre, whose square term is 0; 0 for the plain sum)
    B v = tail<Arch>(x + i, n - i, Square ? centre : 0.0f);
    if (r) {
      v = v + tail<Arch>(r + i, n - i, 0.0f);
      store_tail<Arch>(v, n - i, x + i);
    }
    if constexpr (Square) {
      const B d = v - c;
      acc = fmadd(d, d, acc);
    } else {
      acc = acc + v;
    }
  }
  return lanes::reduce<Arch>(acc, [](auto a, auto b) { return a + b; });
}

// y = (x - centre) s gain + bias.
template <class Arch>
inline void scale_row(int64_t n, const float* x, float centre, float s, const float* gain,
                      const float* bias, float* y) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  const auto one = [&](B v, B g, B b) { return fmadd((v - B(centre)) * B(s), g, b); };
  int64_t i = 0;
  for (; i + W <= n; i += W)
    one(B::load_unaligned(x + i), gain ? B::load_unaligned(gain + i) : B(1.0f),
        bias ? B::load_unaligned(bias + i) : B(0.0f))
        .store_unaligned(y + i);
  if (i < n)
    store_tail<Arch>(
        one(tail<Arch>(x + i, n - i, 0.0f), gain ? tail<Arch>(gain + i, n - i, 1.0f) : B(1.0f),
            bias ? tail<Arch>(bias + i, n - i, 0.0f) : B(0.0f)),
        n - i, y + i);
}

template <class Arch>
inline xsimd::batch<float, Arch> silu(xsimd::batch<float, Arch> g) {
  using B = xsimd::batch<float, Arch>;
  return g / (B(1.0f) + exp_vec<Arch>(-g));
}

template <class Arch>
inline xsimd::batch<float, Arch> gelu_tanh(xsimd::batch<float, Arch> g) {
  using B = xsimd::batch<float, Arch>;
  const B z = B(0.7978845608028654f) * fmadd(B(0.044715f) * g * g, g, g);
  return B(0.5f) * g * (B(1.0f) + tanh_vec<Arch>(z));
}

}  // namespace norm_detail

template <class Arch>
void rms_norm_row(int64_t n, float* x, const float* r, const float* gain, const float* bias,
                  float eps, float* y) {
  const float ss = norm_detail::add_and_sum<Arch>(n, x, r, 0.0f);
  const float s = 1.0f / std::sqrt(ss / float(n) + eps);
  norm_detail::scale_row<Arch>(n, x, 0.0f, s, gain, bias, y);
}

template <class Arch>
void layer_norm_row(int64_t n, float* x, const float* r, const float* gain, const float* bias,
                    float eps, float* y) {
  const float m = norm_detail::add_and_sum<Arch, false>(n, x, r, 0.0f) / float(n);
  const float var = norm_detail::add_and_sum<Arch>(n, x, nullptr, m) / float(n);
  norm_detail::scale_row<Arch>(n, x, m, 1.0f / std::sqrt(var + eps), gain, bias, y);
}

template <class Arch, int A>
void activation_row(int64_t n, const float* g, const float* u, float* y) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  const auto f = [](B v) {
    if constexpr (A == 0) return norm_detail::silu<Arch>(v);
    return norm_detail::gelu_tanh<Arch>(v);
  };
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const B v = f(B::load_unaligned(g + i));
    (u ? v * B::load_unaligned(u + i) : v).store_unaligned(y + i);
  }
  if (i < n) {
    const B v = f(norm_detail::tail<Arch>(g + i, n - i, 0.0f));
    norm_detail::store_tail<Arch>(u ? v * norm_detail::tail<Arch>(u + i, n - i, 0.0f) : v, n - i,
                                  y + i);
  }
}

template <class Arch>
NormActKernels make_norm_act_kernels() {
  NormActKernels k{};
  k.rms = &rms_norm_row<Arch>;
  k.layer = &layer_norm_row<Arch>;
  k.act[0] = &activation_row<Arch, 0>;
  k.act[1] = &activation_row<Arch, 1>;
  return k;
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
