// The rotary position embedding's kernels (tessera_rope; the layer's `rope` option).
//
// Contract:
//  - angles[style](half, freq, pos, cs): one position's table, for every head of a token:
//    t_m = pos freq[m] (double), c_m, s_m its cosine and sine each rounded to float, m < half.
//    NEOX: cs[m] = c_m, cs[half + m] = s_m. GPTJ (pairs interleaved): cs[2m] = cs[2m + 1] = c_m,
//    cs[2 half + 2m] = -s_m, cs[2 half + 2m + 1] = s_m. The cosine and sine are double-precision
//    (within a few double ulps, for |t| below 2^40), so each float is the correctly rounded one
//    but where the double lies within that of a tie.
//  - rotate[style](heads, ld, half, cs, x): heads rows of ld floats, their pairs (NEOX: values
//    m and m + half; GPTJ: 2m and 2m + 1) turned by cs: a' = a c - b s, b' = a s + b c, in
//    float32 (each product rounded or fused; at most 3 roundings an output). Values past 2 half
//    are not touched.
//  - Stateless, no allocation, nothing read or written past the rows' 2 half values.
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "../kernels.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

namespace rope_detail {

// xsimd 8.1 has no double lanes on ARMv7 NEON: its angles are computed one at a time.
template <class Arch>
constexpr bool kDoubleLanes = !std::is_same_v<Arch, xsimd::neon>;

template <class Arch, bool kGptj>
void store(int64_t half, int64_t m, float c, float s, float* cs) {
  if constexpr (kGptj) {
    cs[2 * m] = cs[2 * m + 1] = c;
    cs[2 * half + 2 * m] = -s, cs[2 * half + 2 * m + 1] = s;
  } else {
    cs[m] = c, cs[half + m] = s;
  }
}

struct SwapPairs {
  static constexpr unsigned get(unsigned i, unsigned) { return i ^ 1u; }
};

}  // namespace rope_detail

template <class Arch, bool kGptj>
void rope_angles(int64_t half, const double* freq, double pos, float* cs) {
  int64_t m = 0;
  if constexpr (rope_detail::kDoubleLanes<Arch>) {
    using D = xsimd::batch<double, Arch>;
    constexpr int64_t N = int64_t(D::size);
    for (; m + N <= half; m += N) {
      const auto sc = xsimd::sincos(D::load_unaligned(freq + m) * D(pos));
      alignas(64) double s[N], c[N];
      sc.first.store_aligned(s), sc.second.store_aligned(c);
      for (int64_t i = 0; i < N; ++i)
        rope_detail::store<Arch, kGptj>(half, m + i, float(c[i]), float(s[i]), cs);
    }
  }
  for (; m < half; ++m) {
    const double t = pos * freq[m];
    rope_detail::store<Arch, kGptj>(half, m, float(std::cos(t)), float(std::sin(t)), cs);
  }
}

template <class Arch>
void rope_rotate_neox(int64_t heads, int64_t ld, int64_t half, const float* cs, float* x) {
  using F = xsimd::batch<float, Arch>;
  constexpr int64_t W = int64_t(F::size);
  for (int64_t h = 0; h < heads; ++h) {
    float* a = x + h * ld;
    float* b = a + half;
    int64_t m = 0;
    for (; m + W <= half; m += W) {
      const F va = F::load_unaligned(a + m), vb = F::load_unaligned(b + m);
      const F c = F::load_unaligned(cs + m), s = F::load_unaligned(cs + half + m);
      xsimd::fms(va, c, vb * s).store_unaligned(a + m);
      xsimd::fma(va, s, vb * c).store_unaligned(b + m);
    }
    for (; m < half; ++m) {
      const float va = a[m], vb = b[m], c = cs[m], s = cs[half + m];
      a[m] = va * c - vb * s, b[m] = va * s + vb * c;
    }
  }
}

// x c2 + swap(x) s2 with c2 = [c c ..], s2 = [-s s ..] (angles' GPTJ table): the pairs turned
// without a deinterleave.
template <class Arch>
void rope_rotate_gptj(int64_t heads, int64_t ld, int64_t half, const float* cs, float* x) {
  using F = xsimd::batch<float, Arch>;
  using U = xsimd::batch<uint32_t, Arch>;
  constexpr int64_t W = int64_t(F::size);
  constexpr auto swap = xsimd::make_batch_constant<U, rope_detail::SwapPairs>();
  const int64_t n = 2 * half;
  for (int64_t h = 0; h < heads; ++h) {
    float* r = x + h * ld;
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      const F v = F::load_unaligned(r + i);
      const F c = F::load_unaligned(cs + i), s = F::load_unaligned(cs + n + i);
      xsimd::fma(v, c, xsimd::swizzle(v, swap) * s).store_unaligned(r + i);
    }
    for (; i < n; i += 2) {
      const float va = r[i], vb = r[i + 1], c = cs[i], s = cs[n + i + 1];
      r[i] = va * c - vb * s, r[i + 1] = va * s + vb * c;
    }
  }
}

template <class Arch>
RopeKernels make_rope_kernels() {
  RopeKernels k{};
  k.angles[0] = &rope_angles<Arch, false>, k.angles[1] = &rope_angles<Arch, true>;
  k.rotate[0] = &rope_rotate_neox<Arch>, k.rotate[1] = &rope_rotate_gptj<Arch>;
  return k;
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
