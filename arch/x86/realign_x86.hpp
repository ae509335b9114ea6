// Sequential vector reads from a misaligned pointer, by aligned loads and a two-source permute
// (AVX-512's vpermt2ps), per xsimd arch; other x86 archs load unaligned.
//
// A 64-byte load from an address that is not a multiple of 64 spans two cache lines: it costs
// two L1 accesses, and two fill requests when the lines come from L2. Rows of a std::vector sit
// 16 bytes off a line, so every softmax load did. Each aligned block inside the row is loaded
// once and every vector but the first and last is cut from two neighbours; lane j of each vector
// is the same element as with the unaligned load, so results do not change.
#pragma once

#include "../common/kernel_ns.hpp"

#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include <cstdint>
#include <type_traits>

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {
namespace x86 {

template <class Arch>
class SequentialReader {
  using B = xsimd::batch<float, Arch>;
  static constexpr int64_t W = B::size;
  static constexpr bool kPermute = std::is_base_of_v<xsimd::avx512f, Arch>;

 public:
  // Reads p[0, W), p[W, 2W), ... (count vectors). Only blocks inside [p, p + count W) are read:
  // the first and the last vector load unaligned, since their outer blocks reach past the row
  // (no fault, as a block never crosses a page, but outside the buffer; ASan reports it).
  SequentialReader(const float* p, int64_t count) : p_(p), count_(count) {
    if constexpr (kPermute) {
      shift_ = int(reinterpret_cast<uintptr_t>(p) / sizeof(float) % W);
      idx_ =
          _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                           _mm512_set1_epi32(shift_));
    }
  }

  B next() {
    const int64_t j = j_++;
    const float* at = p_ + j * W;
    if constexpr (kPermute) {
      if (shift_ == 0) return B::load_aligned(at);
      // Vector j is cut from the blocks that start at at - shift_ (held in prev_) and at
      // at - shift_ + W.
      if (j == 0 || j + 1 == count_) {
        if (j == 0 && count_ > 1) prev_ = B::load_aligned(at + W - shift_);
        return B::load_unaligned(at);
      }
      const B block = B::load_aligned(at + W - shift_);
      const B v = _mm512_permutex2var_ps(prev_, idx_, block);
      prev_ = block;
      return v;
    }
    return B::load_unaligned(at);
  }

 private:
  const float* p_ = nullptr;
  int64_t count_ = 0, j_ = 0;
  int shift_ = 0;
  B prev_{};
  xsimd::batch<int32_t, Arch> idx_{};
};

}  // namespace x86
}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
