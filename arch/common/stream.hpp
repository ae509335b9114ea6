// Non-temporal (streaming) stores: write a full line to memory without first reading it into
// the cache (no read-for-ownership), for outputs too large to be read back from cache. xsimd 8.1
// has none, so each ISA provides its own (arch/x86/stream_x86.hpp); elsewhere, a plain store.
// `p` must be aligned to the vector size.
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include "../x86/stream_x86.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {
using x86::store_stream;
using x86::stream_fence;  // orders the streaming stores before what the caller publishes next
}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch

#else

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {
template <class Arch>
inline void store_stream(xsimd::batch<float, Arch> v, float* p) {
  v.store_aligned(p);
}
inline void stream_fence() {}  // plain stores need no ordering
}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch

#endif
