// Few rows of A against a B too large for L2, B streamed row by row (written once over the
// xsimd arch).
//
// Contract, for gemm_rows_stream<Arch, R>:
//  - computes C[0:R, 0:n] = alpha A B + beta C with A element (i, p) at a[i * a_rs + p * a_cs]
//    and B row p the n contiguous floats at b + p * ldb; n is a whole number of vectors.
//  - acc is R x n floats of scratch (row i at acc + i n) holding the running sums between
//    blocks of k; C is written once, after the last block. beta == 0 never reads C.
//  - every C element is one accumulator summing k in order from zero, then alpha (and beta C)
//    applied as store_tile does: the same result, bit for bit, as the wide kernels
//    (gemm_ukernel<Arch, R, NV>) on the same columns.
//  - k >= 1; stateless, no allocation, reads and writes nothing else.
//  - Load reads a vector of B: float32 (LoadF32), or 16-bit elements widened in registers (a
//    Widen of gemm_dot_b16.hpp), whose products and sums are then those of the float32 kernel
//    on the widened B (a Linear layer's weights kept in f16 or bf16, x W, for a few tokens).
//
// Why: the wide kernels walk B in strips of NV vectors down all k rows, reading 64-256 bytes of
// every B row per strip. When B comes from L3 or memory (a few tokens through a d_model 1024
// projection: 4 MB) each strip's lines are a short run in every 4 KB page, which the L2
// streamer does not follow; the product then ran at ~12 GB/s of B. Here a block of KB rows of
// B is read end to end across all n columns: KB sequential streams, one per row, each a whole
// page run the prefetchers follow, with the sums of all n columns (R x n floats: 16 KB for 4 x
// 1024) staying in L1 between blocks. Standalone, 4 x 1024 x 1024 from a 4 MB B on one
// x86-intel-avx512 core: strips 23.6 GFLOP/s (oneDNN 43), rows of 4/8 at a time 57 / 57,
// with a prefetch 4 lines ahead in each row 63 / 67.
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstdint>

#include "fmadd.hpp"
#include "gemm_ukernel.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

// Bytes ahead of the load, along its own row, that each B stream prefetches (4 lines: past
// the next-line prefetcher's reach, within the row's page).
inline constexpr int64_t kStreamPrefetchBytes = 256;

template <class Arch>
struct LoadF32 {
  static xsimd::batch<float, Arch> load(const float* p) {
    return xsimd::batch<float, Arch>::load_unaligned(p);
  }
};

// KB rows of B (p0 .. p0 + KB - 1) against all n columns. The R x KB broadcasts of A are held
// in registers across the columns; per vector of columns, R sums come from acc (or start at
// zero on the first block) and go back to acc (or, on the last block, to C).
template <class Arch, int R, int KB, class Load, class T>
TESSERA_ALWAYS_INLINE void stream_block(const float* a, int64_t a_rs, int64_t a_cs, const T* b,
                                        int64_t ldb, float* acc, float* c, int64_t ldc, int64_t n,
                                        bool first, bool last, float alpha, float beta) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  B av[R][KB];
  TESSERA_UNROLL for (int i = 0; i < R; ++i) TESSERA_UNROLL for (int q = 0; q < KB; ++q) av[i][q] =
      B(a[i * a_rs + q * a_cs]);
  const B va(alpha), vb(beta);
  const bool plain = alpha == 1.0f && beta == 0.0f;
  for (int64_t j = 0; j < n; j += W) {
    B s[R];
    TESSERA_UNROLL for (int i = 0; i < R; ++i) s[i] =
        first ? B(0.0f) : B::load_unaligned(acc + i * n + j);
    TESSERA_UNROLL for (int q = 0; q < KB; ++q) {
      const T* row = b + q * ldb + j;
      __builtin_prefetch(row + kStreamPrefetchBytes / int64_t(sizeof(T)), 0, 3);
      const B bv = Load::load(row);
      TESSERA_UNROLL for (int i = 0; i < R; ++i) s[i] = fmadd(av[i][q], bv, s[i]);
    }
    if (!last) {
      TESSERA_UNROLL for (int i = 0; i < R; ++i) s[i].store_unaligned(acc + i * n + j);
    } else if (plain) {
      TESSERA_UNROLL for (int i = 0; i < R; ++i) s[i].store_unaligned(c + i * ldc + j);
    } else {
      TESSERA_UNROLL for (int i = 0; i < R; ++i) {
        float* dst = c + i * ldc + j;
        B r = s[i] * va;
        if (beta != 0.0f) r = fmadd(vb, B::load_unaligned(dst), r);
        r.store_unaligned(dst);
      }
    }
  }
}

// KB: rows of B per block, Broadcasts / R of them (blocking.hpp: stream_bcast), at most 8
// streams. AVX-512, 4 x 1024 x 1024, alternated medians, KB 6 -> 8: 54.8 -> 56.2 GFLOP/s on 1
// thread, 77.8 -> 88.1 on 2. The prefetch distance mattered less: 32, 64 and 128 floats within
// 1% on 1 thread.
template <class Arch, int R, int Broadcasts, class Load = LoadF32<Arch>, class T = float>
void gemm_rows_stream(int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const T* b,
                      int64_t ldb, float* acc, float* c, int64_t ldc, int64_t n, float alpha,
                      float beta) {
  constexpr int KB = std::clamp(Broadcasts / R, 1, 8);
  const int64_t whole = k / KB * KB;
  for (int64_t p = 0; p < whole; p += KB)
    stream_block<Arch, R, KB, Load>(a + p * a_cs, a_rs, a_cs, b + p * ldb, ldb, acc, c, ldc, n,
                                    p == 0, p + KB == k, alpha, beta);
  // The rows past the last whole block, one at a time, still in order.
  for (int64_t p = whole; p < k; ++p)
    stream_block<Arch, R, 1, Load>(a + p * a_cs, a_rs, a_cs, b + p * ldb, ldb, acc, c, ldc, n,
                                   p == 0, p + 1 == k, alpha, beta);
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
