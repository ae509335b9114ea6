// The integer dot kernel of the AArch64 tables, four keys a step (QuantDotFn's contract,
// arch/kernels.hpp), over QuantNeon's or QuantNeonDot's block products (quant_neon.hpp).
//
// A block's int32 lanes must be summed and scaled by dq dk before they meet another block's. The
// generic kernel (common/quant.hpp) scales each key's lanes and sums them horizontally per key;
// here four keys' lanes are first folded into one vector by pairwise adds (exact, int32), so a
// row's conversion and two float operations serve four keys, and the key scales of a block are
// one vector. A step's missing keys repeat its last key (read in bounds, never stored).
// ARMv7 keeps the generic kernel: 16 q registers cannot hold four keys' blocks and the sums.
#pragma once

#include <arm_neon.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../kernels.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

#if defined(__aarch64__)
namespace neon4 {

// The f16 scales at the front of four blocks, widened: one vector.
inline float32x4_t scales(const uint8_t* b0, const uint8_t* b1, const uint8_t* b2,
                          const uint8_t* b3) {
  uint16_t h[4];
  std::memcpy(&h[0], b0, 2), std::memcpy(&h[1], b1, 2);
  std::memcpy(&h[2], b2, 2), std::memcpy(&h[3], b3, 2);
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

// [sum a0, sum a1, sum a2, sum a3]
inline int32x4_t sum4(int32x4_t a0, int32x4_t a1, int32x4_t a2, int32x4_t a3) {
  return vpaddq_s32(vpaddq_s32(a0, a1), vpaddq_s32(a2, a3));
}

}  // namespace neon4

template <class QOps, int T, int R>
void quant_dot_neon4(const QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n, float* s,
                     int64_t lds, float alpha) {
  constexpr int64_t BS = kQBlockBytes[T];
  const int64_t blocks = q.blocks;
  for (int64_t j = 0; j < n; j += 4) {
    const int64_t nk = std::min<int64_t>(4, n - j);
    const uint8_t* kp[4];
    for (int64_t c = 0; c < 4; ++c) kp[c] = k + (j + std::min(c, nk - 1)) * ldk;
    float32x4_t acc[R];
    for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t at = b * BS;
      const auto k0 = QOps::template load_k<T>(kp[0] + at + 2);
      const auto k1 = QOps::template load_k<T>(kp[1] + at + 2);
      const auto k2 = QOps::template load_k<T>(kp[2] + at + 2);
      const auto k3 = QOps::template load_k<T>(kp[3] + at + 2);
      const float32x4_t dk = neon4::scales(kp[0] + at, kp[1] + at, kp[2] + at, kp[3] + at);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const auto qv = QOps::load_q(q.qs + r * q.ld + b * kQBlock);
        const int32x4_t t =
            neon4::sum4(QOps::dot(k0, qv), QOps::dot(k1, qv), QOps::dot(k2, qv), QOps::dot(k3, qv));
        acc[r] = vfmaq_n_f32(acc[r], vmulq_f32(vcvtq_f32_s32(t), dk), q.d[r * blocks + b]);
      }
    }
    for (int r = 0; r < R; ++r) {
      const float32x4_t out = vmulq_n_f32(acc[r], alpha);
      if (nk == 4) {
        vst1q_f32(s + r * lds + j, out);
      } else {
        float lanes[4];
        vst1q_f32(lanes, out);
        std::memcpy(s + r * lds + j, lanes, size_t(nk) * sizeof(float));
      }
    }
  }
}

// The AArch64 tables' dot kernels replaced by the four-key ones.
template <class QOps>
void use_neon4_dots(QuantKernels& k) {
#if !defined(TESSERA_NO_QUANTIZED)
  k.dot[0][1] = &quant_dot_neon4<QOps, 0, 1>, k.dot[0][2] = &quant_dot_neon4<QOps, 0, 2>;
  k.dot[0][3] = &quant_dot_neon4<QOps, 0, 3>, k.dot[0][4] = &quant_dot_neon4<QOps, 0, 4>;
  k.dot[1][1] = &quant_dot_neon4<QOps, 1, 1>, k.dot[1][2] = &quant_dot_neon4<QOps, 1, 2>;
  k.dot[1][3] = &quant_dot_neon4<QOps, 1, 3>, k.dot[1][4] = &quant_dot_neon4<QOps, 1, 4>;
  static_assert(kMaxDotRows == 4, "a kernel per row count");
#else
  (void)k;
#endif
}
#endif

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
