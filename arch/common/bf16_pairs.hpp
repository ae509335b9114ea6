// The bf16 pair panels of the bf16 dot-product tiles (Bf16DotKernels), packed element by element:
// the portable packer, for ISAs without a faster one (arch/x86/gemm_bf16_dot_avx512.hpp has the
// AVX-512 one). Layout (the tiles' contract): pair step p of a panel `width` lanes wide holds,
// for each lane l, elements 2p and 2p + 1 of that lane side by side, at out[p 2 width + 2 l];
// an odd k's last pair ends in a zero, and lanes from `lanes` to `width` are zero. Element
// (lane l, k index p) of the source is src[p ld + l] when k_rows, else src[l ld + p].
#pragma once

#include "kernel_ns.hpp"

#include <cstdint>

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

inline void pack_bf16_pairs_portable(bool k_rows, int64_t lanes, int64_t k, const uint16_t* src,
                                     int64_t ld, int64_t width, uint16_t* out) {
  const int64_t pairs = (k + 1) / 2;
  for (int64_t p2 = 0; p2 < pairs; ++p2, out += 2 * width)
    for (int64_t l = 0; l < width; ++l)
      for (int64_t h = 0; h < 2; ++h) {
        const int64_t p = 2 * p2 + h;
        out[2 * l + h] = l < lanes && p < k ? src[k_rows ? p * ld + l : l * ld + p] : uint16_t(0);
      }
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
