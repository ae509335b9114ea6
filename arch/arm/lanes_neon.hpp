// lanes::transpose_sum on NEON: four vectors to one whose lane j is the sum of v[j]'s lanes. The
// portable tree (two selects, a table lookup and an add per fold, three folds) becomes two
// adds of the vectors' halves and one pairwise add (two on ARMv7, which pairs 64-bit halves):
// lanes l and l ^ 2 first, then l and l ^ 1, as the portable tree, so the sums are the same.
#pragma once

#include "../common/kernel_ns.hpp"

#include <arm_neon.h>

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {
namespace lanes {

inline __attribute__((always_inline)) float32x4_t transpose_sum_isa(const float32x4_t* v) {
  float32x4_t w[2];  // w[i] = [a0 + a2, a1 + a3, b0 + b2, b1 + b3] of a = v[2i], b = v[2i + 1]
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    const float32x4_t a = v[2 * i], b = v[2 * i + 1];
#if defined(__aarch64__)
    const float64x2_t a2 = vreinterpretq_f64_f32(a), b2 = vreinterpretq_f64_f32(b);
    w[i] = vaddq_f32(vreinterpretq_f32_f64(vzip1q_f64(a2, b2)),
                     vreinterpretq_f32_f64(vzip2q_f64(a2, b2)));
#else
    w[i] = vaddq_f32(vcombine_f32(vget_low_f32(a), vget_low_f32(b)),
                     vcombine_f32(vget_high_f32(a), vget_high_f32(b)));
#endif
  }
#if defined(__aarch64__)
  return vpaddq_f32(w[0], w[1]);
#else
  return vcombine_f32(vpadd_f32(vget_low_f32(w[0]), vget_high_f32(w[0])),
                      vpadd_f32(vget_low_f32(w[1]), vget_high_f32(w[1])));
#endif
}

}  // namespace lanes
}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
