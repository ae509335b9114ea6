// x86 streaming stores (movntps) per xsimd arch. Each overload is only instantiated in the
// translation unit compiled for its ISA (arch/x86/<isa>.cpp).
#pragma once

#include "../common/kernel_ns.hpp"

#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include <type_traits>

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {
namespace x86 {

template <class Arch>
inline void store_stream(xsimd::batch<float, Arch> v, float* p) {
  if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>)
    _mm512_stream_ps(p, v);
  else if constexpr (std::is_base_of_v<xsimd::avx, Arch>)
    _mm256_stream_ps(p, v);
  else if constexpr (std::is_base_of_v<xsimd::sse2, Arch>)
    _mm_stream_ps(p, v);
  else
    v.store_aligned(p);
}

inline void stream_fence() { _mm_sfence(); }

}  // namespace x86
}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
