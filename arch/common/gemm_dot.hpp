// SGEMM dot-product kernel for op(B) = B^T with few rows of A (the decode shape q K^T):
// C(i, j) = alpha sum_p A(i, p) B(j, p) + beta C(i, j) for R rows and NJ columns, both A rows
// and B rows contiguous along p, so K is read in place, once, with no packing (a packed path
// would read and write all of K before using it once).
//
// Contract: R <= dot_rows, NJ columns exactly; k >= 0; beta == 0 never reads C. The sum order
// (SIMD lanes, then lane reduction, then the scalar tail) depends on k alone.
// Register tile (AVX-512, 4 x 4): 16 accumulators acc[i][j] (16 lanes of partial dot
// products each), 4 A vectors and 4 B vectors per step: 24 of 32 zmm.
// One row (decode's q K^T) has its own kernel, gemm_dot_nt_row: 1 x W (W = lanes per vector),
// and gemm_dot_nt_row_run: 1 x n, n a multiple of W (the same sums, group by group).
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <cstdint>
#include <type_traits>

#include "../kernels.hpp"
#include "fmadd.hpp"
#include "lanes.hpp"
#include "prefetch.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

inline constexpr int64_t kDotCallsAhead = 4;

// Runs f(std::integral_constant<int, K>{}) when k is one of the head dims attention uses most,
// K = 64 or 128, and K / W <= 8 (the unrolled kernels below hold an A row of K / W vectors in
// registers: AVX-512 at both, AVX2 at 64); returns whether it did.
template <int W, class F>
TESSERA_ALWAYS_INLINE bool with_fixed_k(int64_t k, F&& f) {
  if constexpr (128 / W <= 8)
    if (k == 128) return f(std::integral_constant<int, 128>{}), true;
  if constexpr (64 / W <= 8)
    if (k == 64) return f(std::integral_constant<int, 64>{}), true;
  return false;
}

// C[0, W) = alpha sums + beta C (beta = 0 never reads C).
template <class Arch>
TESSERA_ALWAYS_INLINE void store_sums(xsimd::batch<float, Arch> sums, float* c, float alpha,
                                      float beta) {
  using B = xsimd::batch<float, Arch>;
  B r = sums * B(alpha);
  if (beta != 0.0f) r = fmadd(B(beta), B::load_unaligned(c), r);
  r.store_unaligned(c);
}

// The R x NJ accumulators of a dot tile reduced to sums, each continued by tail(i, j, sum)
// (the scalar k steps past the last whole vector, added in order), stored as C = alpha sum + beta C
// (beta = 0 never reads C). Reduced W at a time by lanes::transpose_sum (about 3 operations per
// sum on x86; a horizontal sum each cost about 8 on AVX-512, as many vector operations as the
// 4 x 4 tile's FMAs at k = 128), padded with zeros to a whole group.
template <class Arch, int R, int NJ, class Tail>
TESSERA_ALWAYS_INLINE void dot_tile_store(const xsimd::batch<float, Arch> (&acc)[R][NJ],
                                          Tail&& tail, float* c, int64_t ldc, float alpha,
                                          float beta) {
  using B = xsimd::batch<float, Arch>;
  constexpr int W = static_cast<int>(B::size);
  constexpr int N = R * NJ, G = (N + W - 1) / W;
  alignas(64) float sums[G * W];
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) {
    B v[W];
#pragma GCC unroll 16
    for (int l = 0; l < W; ++l) {
      const int e = g * W + l;
      v[l] = e < N ? acc[e / NJ][e % NJ] : B(0.0f);
    }
    lanes::transpose_sum<Arch>(v).store_aligned(sums + g * W);
  }
  // Two loops rather than the test per element: GCC kept `beta != 0` inside (a compare, setp and
  // cmov per element of a 4 x 4 tile).
  if (beta == 0.0f) {
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < NJ; ++j) c[i * ldc + j] = alpha * tail(i, j, sums[i * NJ + j]);
    return;
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < NJ; ++j) {
      float& dst = c[i * ldc + j];
      dst = alpha * tail(i, j, sums[i * NJ + j]) + beta * dst;
    }
}

// B's elements as stored, loaded as float32 vectors: float32 as they are; 16-bit types through
// a Widen (gemm_dot_b16.hpp).
template <class Arch>
struct F32Elements {
  static xsimd::batch<float, Arch> load(const float* p) {
    return xsimd::batch<float, Arch>::load_unaligned(p);
  }
  static float scalar(float x) { return x; }
};

// The body of gemm_dot_nt (Load: F32Elements, T = float) and gemm_dot_nt_b16 (a Widen, T =
// uint16_t); K > 0: k is K, known at compile time (its steps unrolled, as in
// gemm_dot_nt_row_k: GQA 32/8 decode at d = 128, 4 rows, AVX-512, interleaved medians of two
// sets, 1 thread 62.7 -> 66.0 and 49.6 -> 52.9 GFLOP/s, 2 threads 79.1 -> 83.0).
template <class Arch, class Load, int R, int NJ, int K, class T>
TESSERA_ALWAYS_INLINE void gemm_dot_nt_body(int64_t k, const float* a, int64_t lda, const T* b,
                                            int64_t ldb, float* c, int64_t ldc, float alpha,
                                            float beta, RowsAhead ahead) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  constexpr int64_t kLine = 64 / sizeof(T);  // elements per cache line
  if constexpr (K > 0) k = K;
  // Every loop over the tile unrolled by pragma (here and in dot_tile_store): left to GCC's
  // heuristics, acc stayed an array in memory, which AArch64 stored whole every k step.
  B acc[R][NJ];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NJ; ++j) acc[i][j] = B(0.0f);
  int64_t p = 0;
#pragma GCC unroll 8
  for (; p + W <= k; p += W) {
    // The rows of K kDotCallsAhead calls on, a line at a time: the rows are ldb apart, too many
    // interleaved streams for the hardware prefetcher to follow on its own. One call ahead
    // (2 KB at 4 x 128 floats) was shorter than a trip to DRAM: GQA 32/8 decode (4 rows,
    // kv 4096, d = 128), interleaved medians, 1 call ahead 41.3 GFLOP/s, 4 calls 50.9, 8 calls
    // 48.2 on 1 thread; 73.7, 87.8, 83.9 on 2.
    if (p % kLine == 0) {
      if (ahead.at)
        for (int j = 0; j < NJ; ++j)
          __builtin_prefetch(ahead.at + j * ahead.ld + p * int64_t(sizeof(T)), 0, 3);
      else
        for (int j = 0; j < NJ; ++j)
          __builtin_prefetch(b + (j + kDotCallsAhead * NJ) * ldb + p, 0, 3);
    }
    B av[R], bv[NJ];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) av[i] = B::load_unaligned(a + i * lda + p);
#pragma GCC unroll 16
    for (int j = 0; j < NJ; ++j) bv[j] = Load::load(b + j * ldb + p);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < NJ; ++j) acc[i][j] = fmadd(av[i], bv[j], acc[i][j]);
  }
  dot_tile_store<Arch, R, NJ>(
      acc,
      [&](int i, int j, float t) {
        for (int64_t q = p; q < k; ++q) t += a[i * lda + q] * Load::scalar(b[j * ldb + q]);
        return t;
      },
      c, ldc, alpha, beta);
}

template <class Arch, class Load, int R, int NJ, int K, class T>
__attribute__((noinline)) void gemm_dot_nt_k(const float* a, int64_t lda, const T* b, int64_t ldb,
                                             float* c, int64_t ldc, float alpha, float beta,
                                             RowsAhead ahead) {
  gemm_dot_nt_body<Arch, Load, R, NJ, K>(K, a, lda, b, ldb, c, ldc, alpha, beta, ahead);
}

// gemm_dot_nt over B's elements as stored (T through Load), the head dims 64 and 128 unrolled.
template <class Arch, class Load, int R, int NJ, class T>
TESSERA_ALWAYS_INLINE void gemm_dot_nt_of(int64_t k, const float* a, int64_t lda, const T* b,
                                          int64_t ldb, float* c, int64_t ldc, float alpha,
                                          float beta, RowsAhead ahead = {}) {
  constexpr int W = static_cast<int>(xsimd::batch<float, Arch>::size);
  if (with_fixed_k<W>(k, [&](auto K) {
        gemm_dot_nt_k<Arch, Load, R, NJ, K()>(a, lda, b, ldb, c, ldc, alpha, beta, ahead);
      }))
    return;
  gemm_dot_nt_body<Arch, Load, R, NJ, 0>(k, a, lda, b, ldb, c, ldc, alpha, beta, ahead);
}

template <class Arch, int R, int NJ>
void gemm_dot_nt(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                 int64_t ldc, float alpha, float beta) {
  gemm_dot_nt_of<Arch, F32Elements<Arch>, R, NJ>(k, a, lda, b, ldb, c, ldc, alpha, beta);
}

// gemm_dot_nt_row for a k known at compile time (K = 64 or 128, the head dims attention uses
// most): every k step unrolled, so that the loads are straight-line code the core runs ahead
// on, the A row loaded once, and the accumulators kept in registers (the general kernel's
// reduction takes them by address, so they live in memory). The default order takes the rows
// in groups of 4, a vector of each at a time (4 FMA chains, 2 KB of contiguous rows); kInOrder
// takes them row after row, as the general kernel does. The sums are the general kernel's (each
// lane of acc[j] adds k in order). AVX-512, 1 thread, medians, GFLOP/s general -> this form:
// sgemm 1 x 4096 x 128 (B hot in L3) 40.5 -> 46.3 (oneDNN 36.9 in the same runs; 2 threads
// 48.9 -> 79.8); fused attention's decode (kInOrder) kv 512 37.0 -> 39.1, kv 4096 16.1 -> 16.4,
// kv 32768 17.0 -> 17.8. The groups of 4 for the stream too: kv 512 40.8 but kv 4096 12.7 (K from
// DRAM as 4 interleaved streams); row after row for sgemm: 45.4 against 46.2.
// The W rows of B at b against the A row held in av (K / W vectors): gemm_dot_nt_row_k's body.
template <class Arch, int K, bool kInOrder>
TESSERA_ALWAYS_INLINE void dot_row_group(
    const xsimd::batch<float, Arch> (&av)[K / xsimd::batch<float, Arch>::size], const float* b,
    int64_t ldb, float* c, float alpha, float beta) {
  using B = xsimd::batch<float, Arch>;
  constexpr int W = static_cast<int>(B::size);
  static_assert(W % 4 == 0 && K % W == 0, "groups of 4 rows, whole vectors of k");
  B acc[W];
  if constexpr (kInOrder) {
#pragma GCC unroll 16
    for (int j = 0; j < W; ++j) {
      const float* row = b + j * ldb;
      // This row's lines in the next call (W rows on), into L1.
#pragma GCC unroll 32
      for (int q = 0; q < K; q += 16) __builtin_prefetch(row + W * ldb + q, 0, 3);
      B sj(0.0f);
#pragma GCC unroll 32
      for (int p = 0; p < K / W; ++p) sj = fmadd(av[p], B::load_unaligned(row + p * W), sj);
      acc[j] = sj;
    }
  } else {
#pragma GCC unroll 16
    for (int g = 0; g < W; g += 4) {
      const float* r0 = b + g * ldb;
      const float *r1 = r0 + ldb, *r2 = r1 + ldb, *r3 = r2 + ldb;
      B s0(0.0f), s1(0.0f), s2(0.0f), s3(0.0f);
#pragma GCC unroll 32
      for (int p = 0; p < K / W; ++p) {
        // The same lines of the next call's rows (W rows on), into L1: with B 16 bytes off a
        // line every vector straddles two, and without them 4 rows ran ~10% slower.
        __builtin_prefetch(r0 + W * ldb + p * W, 0, 3);
        __builtin_prefetch(r1 + W * ldb + p * W, 0, 3);
        __builtin_prefetch(r2 + W * ldb + p * W, 0, 3);
        __builtin_prefetch(r3 + W * ldb + p * W, 0, 3);
        s0 = fmadd(av[p], B::load_unaligned(r0 + p * W), s0);
        s1 = fmadd(av[p], B::load_unaligned(r1 + p * W), s1);
        s2 = fmadd(av[p], B::load_unaligned(r2 + p * W), s2);
        s3 = fmadd(av[p], B::load_unaligned(r3 + p * W), s3);
      }
      acc[g] = s0, acc[g + 1] = s1, acc[g + 2] = s2, acc[g + 3] = s3;
    }
  }
  store_sums<Arch>(lanes::transpose_sum<Arch>(acc), c, alpha, beta);
}

template <class Arch, int K, bool kInOrder>
__attribute__((noinline)) void gemm_dot_nt_row_k(const float* a, const float* b, int64_t ldb,
                                                 float* c, float alpha, float beta) {
  using B = xsimd::batch<float, Arch>;
  constexpr int W = static_cast<int>(B::size);
  B av[K / W];  // the row of A, loaded once (K = 128: 8 zmm)
#pragma GCC unroll 32
  for (int p = 0; p < K / W; ++p) av[p] = B::load_unaligned(a + p * W);
  dot_row_group<Arch, K, kInOrder>(av, b, ldb, c, alpha, beta);
}

// One row of A against W rows of B (W = floats per vector), for the m = 1 decode product.
// With 1 x 4 the four accumulators' FMA chains (8 deep at k = 128) left the FMA ports idle and
// each output paid a whole horizontal sum; W accumulators keep the ports busy and are reduced
// together by a transposing reduction (lanes::transpose_sum: lane j of its result is the sum
// of accumulator j) costing about four operations per output, then C is stored as one vector.
// Register tile (AVX-512): 16 accumulators, the A vector, one B vector: 18 zmm. Same contract as
// gemm_dot_nt (lda and ldc are unused: one row).
//
// kInOrder visits B row after row (each row's k loop whole, then the next), so that a B read
// once from memory is one sequential stream; the default visits the W rows a vector at a time,
// interleaving their FMA chains, which is faster while B is in cache. AVX-512, 1 thread,
// interleaved medians, GFLOP/s default -> in order: the GEMM 1 x 4096 x 128 with its 2 MB B hot
// in L3 40.3 -> 36.8 (so sgemm keeps the default); fused attention's decode (32 heads, d = 128,
// K and V from DRAM) kv 4096 14.8 -> 16.5 (2 threads 18.3 -> 19.4), kv 32768 14.1 -> 15.2
// (17.8 -> 19.6); kv 512, whose 16 MB stay in L3 across the benchmark's calls, 36.2 -> 34.6.
// The sums are the same either way (each lane of acc[j] adds k in order).
template <class Arch, bool kInOrder = false>
void gemm_dot_nt_row(int64_t k, const float* a, int64_t /*lda*/, const float* b, int64_t ldb,
                     float* c, int64_t /*ldc*/, float alpha, float beta) {
  using B = xsimd::batch<float, Arch>;
  constexpr int W = static_cast<int>(B::size);
  if (with_fixed_k<W>(
          k, [&](auto K) { gemm_dot_nt_row_k<Arch, K(), kInOrder>(a, b, ldb, c, alpha, beta); }))
    return;
  B acc[W];
#pragma GCC unroll 16
  for (int j = 0; j < W; ++j) acc[j] = B(0.0f);
  int64_t p = 0;
  if constexpr (kInOrder) {
    // Each row's lines, then the next call's same row (W rows on), into L1.
    p = k / W * W;
#pragma GCC unroll 16
    for (int j = 0; j < W; ++j) {
      const float* row = b + j * ldb;
      for (int64_t q = 0; q < p; q += 16) __builtin_prefetch(row + W * ldb + q, 0, 3);
      for (int64_t q = 0; q < p; q += W)
        acc[j] = fmadd(B::load_unaligned(a + q), B::load_unaligned(row + q), acc[j]);
    }
  }
  for (; p + W <= k; p += W) {
    const B av = B::load_unaligned(a + p);
    // The same line of the next W rows (the next call's), into L1: W rows ldb apart are W
    // streams of k / W lines each, too short for the hardware prefetcher to pick up before they
    // end (1 x 4096 x 128, B hot in L2/L3, 10 interleaved runs: 1 thread 20.9 -> 25.2 GFLOP/s,
    // 2 threads 49.8 -> 55.6; two calls ahead no better).
#pragma GCC unroll 16
    for (int j = 0; j < W; ++j) {
      __builtin_prefetch(b + (j + W) * ldb + p, 0, 3);
      acc[j] = fmadd(av, B::load_unaligned(b + j * ldb + p), acc[j]);
    }
  }
  B sum = lanes::transpose_sum<Arch>(acc);
  if (p < k) {
    alignas(64) float t[W];
    sum.store_aligned(t);
    for (int j = 0; j < W; ++j)
      for (int64_t q = p; q < k; ++q) t[j] += a[q] * b[j * ldb + q];
    sum = B::load_aligned(t);
  }
  store_sums<Arch>(sum, c, alpha, beta);
}

// gemm_dot_nt_row over n columns (n a multiple of W) in one call, for sgemm's m = 1 product.
// Rows of B ldb = K apart (a K cache of one head: contiguous) take one loop over the n / W
// groups with the A row loaded once, every address a displacement off b. Other strides call
// gemm_dot_nt_row_k per group: with ldb at run time inside this loop, GCC spent the general
// registers on the 4 rows' and their prefetches' addresses and moved them through vector
// registers (~400 moves per 16 rows). AVX-512, 1 x 4096 x 128, B 16 bytes off a line, hot in
// L3, alternated medians, GFLOP/s: a call per group 56.2 -> 61.1 (a plain load loop over the
// same 2 MB: 68.9).
template <class Arch, int K>
__attribute__((noinline)) void gemm_dot_nt_row_run_k(const float* a, const float* b, int64_t ldb,
                                                     float* c, int64_t n, float alpha, float beta) {
  using B = xsimd::batch<float, Arch>;
  constexpr int W = static_cast<int>(B::size);
  if (ldb != K) {
    for (int64_t j = 0; j < n; j += W)
      gemm_dot_nt_row_k<Arch, K, false>(a, b + j * ldb, ldb, c + j, alpha, beta);
    return;
  }
  B av[K / W];
#pragma GCC unroll 32
  for (int p = 0; p < K / W; ++p) av[p] = B::load_unaligned(a + p * W);
  for (int64_t j = 0; j < n; j += W)
    dot_row_group<Arch, K, false>(av, b + j * K, K, c + j, alpha, beta);
}

template <class Arch>
void gemm_dot_nt_row_run(int64_t k, const float* a, const float* b, int64_t ldb, float* c,
                         int64_t n, float alpha, float beta) {
  constexpr int W = static_cast<int>(xsimd::batch<float, Arch>::size);
  if (with_fixed_k<W>(
          k, [&](auto K) { gemm_dot_nt_row_run_k<Arch, K()>(a, b, ldb, c, n, alpha, beta); }))
    return;
  for (int64_t j = 0; j < n; j += W)
    gemm_dot_nt_row<Arch>(k, a, 0, b + j * ldb, ldb, c + j, 0, alpha, beta);
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
