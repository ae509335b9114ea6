// Non-temporal (streaming) stores: write a full line to memory without first reading it into
// the cache (no read-for-ownership), for outputs too large to be read back from cache. xsimd 8.1
// has none, so each ISA provides its own (arch/x86/stream_x86.hpp); elsewhere, a plain store.
// `p` must be aligned to the vector size.
#pragma once

#include <xsimd/xsimd.hpp>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include "../x86/stream_x86.hpp"
#endif

namespace tessera::arch {

template <class Arch>
inline void store_stream(xsimd::batch<float, Arch> v, float* p) {
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
  x86::store_stream(v, p);
#else
  v.store_aligned(p);
#endif
}

// Orders the streaming stores before whatever the caller publishes next (x86 sfence); a no-op
// where store_stream is a plain store.
inline void stream_fence() {
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
  x86::stream_fence();
#endif
}

}  // namespace tessera::arch
