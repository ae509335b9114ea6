// Software prefetch helpers.
//
// Everything that only prefetches must be always inlined: GCC 12's pure/const analysis counts
// __builtin_prefetch as no side effect, so it marks an out-of-line function whose only effect is
// prefetching "looping const" and then deletes every call to it (the result is unused). That
// happened to softmax's next-row prefetch (prefetch_next) before it was inlined into its loop:
// the prefetches had never been emitted. Inlined early, the builtins land in a loop that also
// stores, and survive.
#pragma once

#include <cstdint>

#define TESSERA_ALWAYS_INLINE inline __attribute__((always_inline))

namespace tessera::arch {

// One prefetch per 64-byte line of p[0, kFloats).
template <int64_t kFloats, int kRw, int kLocality>
TESSERA_ALWAYS_INLINE void prefetch_lines(const float* p) {
  for (int64_t j = 0; j < kFloats; j += 16) __builtin_prefetch(p + j, kRw, kLocality);
}

// One prefetch per 64-byte line that p[0, n) touches (n known at run time): every 16 floats
// from p, and the last float, whatever p's alignment. A read prefetch at kLocality.
template <int kLocality>
TESSERA_ALWAYS_INLINE void prefetch_span(const float* p, int64_t n) {
  if (n <= 0) return;
  for (int64_t j = 0; j < n; j += 16) __builtin_prefetch(p + j, 0, kLocality);
  __builtin_prefetch(p + n - 1, 0, kLocality);
}

}  // namespace tessera::arch
