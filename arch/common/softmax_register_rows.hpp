// Softmax of short rows held in registers: each vector of x is loaded once and each vector of
// y stored once.
//
// Contract (as softmax_rows_cached, softmax.hpp): rows of n contiguous floats, ldx / ldy apart,
// y may equal x, scale > 0. Per row, out_max = max_j scale x_j and out_sum = sum_j exp(scale x_j
// - max). A row whose max is not finite gets sum NaN and nothing written; a row whose sum is not
// a positive finite number is written unnormalised (its exps), for the driver to rewrite.
// Handles n up to kRegisterRowVectors vectors, the last one partial.
//
// Why: the two-pass exp-store form (short_rows) stores the exps, then reloads, scales and stores
// them again: two stores per vector, and every line of y written twice. With the row in
// registers the normalising pass is a multiply, and the only memory traffic is x in and y out.
// 128 columns, 64-byte aligned buffers, interleaved best-of-100 runs against the exp-store
// groups, GB/s: 16384 rows (16 MB, in L3) 24.0 -> 26.5 on 1 thread, 46.7 -> 51.3 on 2; 262144
// rows (256 MB, streaming stores) 12.1 -> 17.2 and 24.3 -> 37.5. In L1 (8 x 128) 3% slower
// (29.3 -> 28.5: two rows interleaved instead of four, and the prefetches). The 16-register
// ISAs on this machine, 8 MB of x, 1 thread, medians of 100: AVX2 16 columns 7.8 -> 8.9 GB/s,
// 32 columns 10.7 -> 11.4; SSE2 16 columns 4.5 -> 5.2. (ARM: tested under qemu, not timed.)
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "exp.hpp"
#include "prefetch.hpp"
#include "softmax_base.hpp"
#include "stream.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

namespace softmax_detail {

// The vector registers of the ISA: 32 on AVX-512 (zmm0-31) and AArch64 (v0-31), 16 on AVX2, SSE2
// and ARMv7 NEON.
template <class Arch>
constexpr int kVectorRegisters =
#if defined(__aarch64__)
    32;
#elif defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
    std::is_base_of_v<xsimd::avx512f, Arch> ? 32 : 16;
#else
    16;
#endif

// Rows taken two at a time (kRegisterGroup), each of up to kRegisterRowVectors vectors: on
// AVX-512 2 x 8 zmm of row data beside the exp's 7 constants and its temporaries (no spills in
// the object code); a quarter of the registers per row elsewhere. Two rows give two
// independent reduction chains (max, then sum, each a tree and a butterfly) to interleave:
// one row at a time ran 10% slower in L2.
constexpr int kRegisterGroup = 2;
template <class Arch>
constexpr int kRegisterRowVectors = kVectorRegisters<Arch> / 4;

// How far ahead the rows are prefetched (x to L1, y for writing), in bytes: 3 rows of 128
// columns. 16384 x 128, 1 thread: 24.0 GB/s without prefetch, 25.2 at 2 rows, 25.7 at 3, 25.1
// at 4, 23.6 at 8. In L2 (1024 x 128) the prefetches cost 10% (31 -> 28 GB/s); rows from
// L3 are the common case.
constexpr int64_t kRegisterRowsAhead = 1536;

template <int... I, class F>
TESSERA_ALWAYS_INLINE void unrolled(std::integer_sequence<int, I...>, F f) {
  (f(std::integral_constant<int, I>{}), ...);
}

// op over v[0, N) as a balanced tree (depth log2 N rather than a chain of N - 1).
template <int N, class B, class Op>
TESSERA_ALWAYS_INLINE B tree(const B* v, Op op) {
  if constexpr (N == 1)
    return v[0];
  else
    return op(tree<N / 2>(v, op), tree<N - N / 2>(v + N / 2, op));
}

// G rows of NV vectors (tail = floats in the last one, 1..W). Every row goes through the same
// operations whatever G is, so a row's result does not depend on its group. Returns false,
// having written only out_max (and, for G = 1, sum NaN), if a row's max is not finite: the
// caller redoes the group a row at a time.
template <class Arch, int NV, int G, bool kStream>
TESSERA_ALWAYS_INLINE bool register_group(int64_t tail, const float* x, int64_t ldx, float scale,
                                          float* y, int64_t ldy, float* out_max, float* out_sum) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  constexpr auto kV = std::make_integer_sequence<int, NV>();
  constexpr auto kG = std::make_integer_sequence<int, G>();
  constexpr float kInf = -kNegInf;
  const bool whole = tail == W;
  B v[G][NV];
  unrolled(kG, [&](auto g) {
    unrolled(kV, [&](auto j) {
      const float* p = x + g * ldx + j * W;
      v[g][j] = j + 1 < NV || whole ? B::load_unaligned(p) : load_tail<Arch>(p, tail);
    });
  });
  float m[G];
  bool finite = true;
  unrolled(kG, [&](auto g) {
    m[g] = max_across<Arch>(tree<NV>(v[g], [](B a, B b) { return xsimd::max(a, b); })) * scale;
    out_max[g] = m[g];
    finite &= m[g] > kNegInf && m[g] < kInf;
  });
  if (!finite) {
    if constexpr (G == 1) out_sum[0] = std::numeric_limits<float>::quiet_NaN();
    return false;
  }
  const ShiftedExp<Arch, 6, true> ex(scale);
  unrolled(kG, [&](auto g) {
    const B off = ex.offset(B(m[g]));
    unrolled(kV, [&](auto j) { v[g][j] = ex(v[g][j], off); });
  });
  unrolled(kG, [&](auto g) {
    const float sum = sum_across<Arch>(tree<NV>(v[g], [](B a, B b) { return a + b; }));
    out_sum[g] = sum;
    const B mul(sum > 0.0f && sum < kInf ? 1.0f / sum : 1.0f);
    unrolled(kV, [&](auto j) {
      float* p = y + g * ldy + j * W;
      if (j + 1 < NV || whole) {
        if constexpr (kStream)
          store_stream<Arch>(v[g][j] * mul, p);
        else
          (v[g][j] * mul).store_unaligned(p);
      } else
        store_tail<Arch>(v[g][j] * mul, p, tail);
    });
  });
  return true;
}

template <class Arch, int NV, bool kStream>
void register_rows(int64_t rows, int64_t n, const float* x, int64_t ldx, float scale, float* y,
                   int64_t ldy, float* out_max, float* out_sum) {
  constexpr int64_t W = xsimd::batch<float, Arch>::size;
  constexpr int G = kRegisterGroup;
  constexpr int64_t kAhead = kRegisterRowsAhead / (NV * W * 4) > G
                                 ? kRegisterRowsAhead / (NV * W * 4)
                                 : G;  // whole rows, past the group in flight
  const int64_t tail = n - (NV - 1) * W;
  int64_t r = 0;
  for (; r + G <= rows; r += G) {
    // (A plain loop: a prefetch-only lambda is outlined and deleted, see prefetch.hpp.)
    if (r + kAhead + G <= rows)
      for (int g = 0; g < G; ++g)
        for (int64_t j = 0; j < NV * W; j += 16) {
          __builtin_prefetch(x + (r + kAhead + g) * ldx + j, 0, 3);
          if (!kStream) __builtin_prefetch(y + (r + kAhead + g) * ldy + j, 1, 3);
        }
    if (!register_group<Arch, NV, G, kStream>(tail, x + r * ldx, ldx, scale, y + r * ldy, ldy,
                                              out_max + r, out_sum + r))
      for (int g = 0; g < G; ++g)
        register_group<Arch, NV, 1, kStream>(tail, x + (r + g) * ldx, ldx, scale, y + (r + g) * ldy,
                                             ldy, out_max + r + g, out_sum + r + g);
  }
  for (; r < rows; ++r)
    register_group<Arch, NV, 1, kStream>(tail, x + r * ldx, ldx, scale, y + r * ldy, ldy,
                                         out_max + r, out_sum + r);
}

template <class Arch, bool kStream, int... I>
bool register_rows_nv(std::integer_sequence<int, I...>, int64_t nv, int64_t rows, int64_t n,
                      const float* x, int64_t ldx, float scale, float* y, int64_t ldy,
                      float* out_max, float* out_sum) {
  return ((nv == I + 1 &&
           (register_rows<Arch, I + 1, kStream>(rows, n, x, ldx, scale, y, ldy, out_max, out_sum),
            true)) ||
          ...);
}

}  // namespace softmax_detail

// The rows in registers if n fits (returns true), else nothing done (false). With `stream`
// (outputs bound for memory) y is written with streaming stores where its rows are aligned to
// the vector, then fenced: no line of y is read before it is written.
template <class Arch>
bool softmax_register_rows(int64_t rows, int64_t n, const float* x, int64_t ldx, float scale,
                           float* y, int64_t ldy, float* out_max, float* out_sum, bool stream) {
  using namespace softmax_detail;
  constexpr int64_t W = xsimd::batch<float, Arch>::size;
  constexpr int kMax = kRegisterRowVectors<Arch>;
  if (n < 1 || n > kMax * W) return false;
  constexpr auto kNv = std::make_integer_sequence<int, kMax>();
  const int64_t nv = (n + W - 1) / W;
  if (stream && reinterpret_cast<uintptr_t>(y) % (W * 4) == 0 && ldy % W == 0) {
    register_rows_nv<Arch, true>(kNv, nv, rows, n, x, ldx, scale, y, ldy, out_max, out_sum);
    stream_fence();
  } else {
    register_rows_nv<Arch, false>(kNv, nv, rows, n, x, ldx, scale, y, ldy, out_max, out_sum);
  }
  return true;
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
