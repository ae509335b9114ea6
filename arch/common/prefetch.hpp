// Software prefetch helpers.
//
// Everything that only prefetches must be always inlined: GCC 12's pure/const analysis counts
// __builtin_prefetch as no side effect, so it marks an out-of-line function whose only effect is
// prefetching "looping const" and then deletes every call to it (the result is unused). That
// happened to softmax's next-row prefetch (prefetch_next) before it was inlined into its loop:
// the prefetches had never been emitted. Inlined early, the builtins land in a loop that also
// stores, and survive.
#pragma once

#include "kernel_ns.hpp"

#include <cstdint>

#define TESSERA_ALWAYS_INLINE inline __attribute__((always_inline))

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

// One prefetch per 64-byte line of p[0, kFloats).
template <int64_t kFloats, int kRw, int kLocality>
TESSERA_ALWAYS_INLINE void prefetch_lines(const float* p) {
  for (int64_t j = 0; j < kFloats; j += 16) __builtin_prefetch(p + j, kRw, kLocality);
}

// One prefetch per kStep floats from p, and one for the last float, whatever p's alignment: a
// read prefetch at kLocality of the lines p[0, n) touches. kStep = 16 names every 64-byte line;
// kStep = 32 one line of every aligned 128-byte pair (consecutive addresses 128 bytes apart hit
// each pair once), for prefetches into L2, whose spatial prefetcher fetches the other line.
template <int kLocality, int64_t kStep = 16>
TESSERA_ALWAYS_INLINE void prefetch_span(const float* p, int64_t n) {
  if (n <= 0) return;
  for (int64_t j = 0; j < n; j += kStep) __builtin_prefetch(p + j, 0, kLocality);
  __builtin_prefetch(p + n - 1, 0, kLocality);
}

// Bytes [0, len) of `rows` rows ld bytes apart from row `first` of base, at kLocality (3: into
// L1, 2: L2): rows a kernel reads after its call (its caller's next call). A prefetch never
// faults, so the rows may lie past the caller's array; the addresses are formed as integers, not
// as pointers past it.
template <int kLocality>
TESSERA_ALWAYS_INLINE void prefetch_rows_ahead(const void* base, int64_t first, int64_t rows,
                                               int64_t ld, int64_t len) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(base) + uintptr_t(first * ld);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t x = 0; x < len + 63; x += 64) {
      const uintptr_t a = p + uintptr_t(r * ld + (x < len ? x : len - 1));
      // NOLINTNEXTLINE(performance-no-int-to-ptr): the address may lie past the caller's array
      __builtin_prefetch(reinterpret_cast<const void*>(a), 0, kLocality);
    }
}

// Bytes [0, len) of rows [first, first + rows) of a call's n rows, ld bytes apart: those under n
// from base, those from n on from `next` (next_rows of them, none past that): past a call's last
// row may lie another page, whose rows its caller names.
template <int kLocality>
TESSERA_ALWAYS_INLINE void prefetch_call_rows(const void* base, int64_t first, int64_t rows,
                                              int64_t n, const void* next, int64_t next_rows,
                                              int64_t ld, int64_t len) {
  const int64_t in = first < n ? (rows < n - first ? rows : n - first) : 0;
  prefetch_rows_ahead<kLocality>(base, first, in, ld, len);
  const int64_t from = first + in - n, left = rows - in;
  if (left > 0 && from < next_rows)
    prefetch_rows_ahead<kLocality>(next, from, left < next_rows - from ? left : next_rows - from,
                                   ld, len);
}

// Share `step` of `steps` of rows [0, rows) from base, ld bytes apart, len bytes each (NextRows'
// spread rows), into L1 where l1, else L2. Rows back to back are one span, its lines shared out
// (row by row, a 136-byte q8_0 row takes four prefetches for about two lines of its own).
TESSERA_ALWAYS_INLINE void prefetch_share(const void* base, int64_t rows, int64_t ld, int64_t len,
                                          int64_t step, int64_t steps, bool l1) {
  const bool span = ld == len;
  const uintptr_t from = reinterpret_cast<uintptr_t>(base), line0 = from & ~uintptr_t(63);
  const int64_t units = span ? int64_t((from + uintptr_t(rows * len) - 1 - line0) / 64) + 1 : rows;
  const int64_t share = (units + steps - 1) / steps, first = step * share;
  const int64_t count = units - first < share ? units - first : share;
  if (count <= 0) return;
  if (span) {  // the span's 64-byte lines [first, first + count)
    for (int64_t i = first; i < first + count; ++i) {
      // NOLINTNEXTLINE(performance-no-int-to-ptr): the rows may lie past the caller's array
      const void* a = reinterpret_cast<const void*>(line0 + uintptr_t(64 * i));
      if (l1)
        __builtin_prefetch(a, 0, 3);
      else
        __builtin_prefetch(a, 0, 2);
    }
  } else if (l1) {
    prefetch_rows_ahead<3>(base, first, count, ld, len);
  } else {
    prefetch_rows_ahead<2>(base, first, count, ld, len);
  }
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
