// SGEMM micro-kernels, written once over the xsimd arch.
//
// Contract (after BLIS's KernelsHowTo), for ukernel<Arch, R, NV>:
//  - computes the R x NR tile (NR = NV vectors) acc = sum_{p < kc} A(:, p) B(p, :) with one
//    fused multiply-add per accumulator per k step, then writes C = alpha acc + beta C for the
//    top-left mr x nr corner only (mr == R; nr <= NR). beta == 0 never reads C (NaN in C is
//    overwritten); alpha is applied once, after the k loop.
//  - A element (i, p) is a[i * a_rs + p * a_cs]: a packed panel (a_rs = 1, a_cs = MR) or A in
//    place (row-major: a_rs = lda, a_cs = 1; transposed: a_rs = 1, a_cs = lda).
//  - B row p is the NR contiguous floats at b + p * ldb, all readable even when nr < NR (a packed
//    panel is zero-padded; the driver packs a partial panel it would otherwise read in place).
//  - kc may be 0 (then C = beta C; alpha 0 never reads A or B is the driver's job).
//  - stateless, no allocation, reads and writes nothing else.
//
// Register tile (AVX-512, R = 14, NV = 2; zmm0..zmm31):
//    acc[0][0..1]  .. acc[13][0..1]   28 accumulators: C rows 0..13 x columns 0..31
//    b[0..1]                          row p of the B panel (2 x 16 floats)
//    one broadcast of A(i, p), usually folded into the FMA as a {1to16} memory operand
// 28 FMAs per k step against 2 loads + 14 broadcasts keeps the two FMA ports busy without the
// load ports becoming the bottleneck (2-3 loads/cycle on the x86-intel-avx512 class).
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <cstdint>
#include <type_traits>

#include "../kernels.hpp"
#include "fmadd.hpp"
#include "prefetch.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

// Loops that index the accumulator array must be fully unrolled, or the array cannot live in
// registers (it is then kept on the stack and every k step loads and stores it).
#define TESSERA_UNROLL _Pragma("GCC unroll 32")

// Writes the R x (NV * W) accumulator tile to C (partial columns through a stack buffer).
// Always inlined: called out of line, the accumulators would make a round trip through the
// stack, and those stores queue behind the C stores' cache misses.
template <class Arch, int R, int NV>
TESSERA_ALWAYS_INLINE void store_tile(xsimd::batch<float, Arch> (&acc)[R][NV], float* c,
                                      int64_t ldc, int64_t nr, float alpha, float beta) {
  using B = xsimd::batch<float, Arch>;
  constexpr int W = static_cast<int>(B::size);
  const B va(alpha);
  if (nr == NV * W) {
    // C = acc, the common case, stores the accumulators as they are: with the multiplies by
    // alpha interleaved, GCC computed all 28 products first and spilled them (k = 64: the
    // epilogue held ~10% of the kernel's time).
    if (alpha == 1.0f && beta == 0.0f) {
      TESSERA_UNROLL for (int i = 0; i < R; ++i) TESSERA_UNROLL for (int v = 0; v < NV; ++v)
          acc[i][v]
              .store_unaligned(c + i * ldc + v * W);
      return;
    }
    TESSERA_UNROLL for (int i = 0; i < R; ++i) TESSERA_UNROLL for (int v = 0; v < NV; ++v) {
      float* dst = c + i * ldc + v * W;
      B r = acc[i][v] * va;
      if (beta != 0.0f) r = fmadd(B(beta), B::load_unaligned(dst), r);
      r.store_unaligned(dst);
    }
    return;
  }
  alignas(64) float buf[NV * W];
  TESSERA_UNROLL for (int i = 0; i < R; ++i) {
    TESSERA_UNROLL for (int v = 0; v < NV; ++v)(acc[i][v] * va).store_aligned(buf + v * W);
    float* dst = c + i * ldc;
    if (beta != 0.0f) {
      for (int64_t j = 0; j < nr; ++j) dst[j] = beta * dst[j] + buf[j];
    } else {
      for (int64_t j = 0; j < nr; ++j) dst[j] = buf[j];
    }
  }
}

// Prefetches the C tile's lines (a row may straddle one more line than NR floats fill) in two
// steps, as BLIS's x86 kernels do: into L2 when the kernel starts, so that the misses of a C too
// large for the caches (attention's score matrix: 64 MB) overlap the k loop, and into L1 for
// writing kCTailSteps k steps before the end. Fetched into L1 at the start, the lines were
// evicted again by the streaming A panel and the 14 rows' conflicts when ldc is a power of two
// before the stores reached them (measured: a stall on the first C load held ~7% of the kernel's
// time at 2048^3).
enum class CacheLevel { l1, l2 };
template <int R, int NV, int W, CacheLevel level>
TESSERA_ALWAYS_INLINE void prefetch_c(float* c, int64_t ldc) {
  // Kept a loop: unrolled (-O3), its 2 R addresses were computed up front and spilled to the
  // stack for the second call, 28 stores and loads per call around a 64-step k loop.
#pragma GCC unroll 1
  for (int i = 0; i < R; ++i) {
    float* row = c + i * ldc;
    // Every line the row's NV W floats touch: one per 16 floats from its start, and the line of
    // its last float (AVX-512's 64-column rows span 4 or 5 lines).
    const auto fetch = [](const float* at) __attribute__((always_inline)) {
      if constexpr (level == CacheLevel::l1)
        __builtin_prefetch(at, 1, 3);
      else
        __builtin_prefetch(at, 0, 2);  // read: a write prefetch goes to L1 whatever the hint
    };
    TESSERA_UNROLL for (int j = 0; j < NV * W; j += kLineFloats) fetch(row + j);
    fetch(row + NV * W - 1);
  }
}
// 32 steps: ~450 cycles of FMAs on AVX-512, well above an L2 hit, well below what evicts.
inline constexpr int64_t kCTailSteps = 32;

// The operands are prefetched into L1 this many k steps ahead. The B micro-panel (KC x NR =
// 64 KB on AVX-512) is larger than L1 and comes from L2 on every pass, from L3 on its first;
// the A panel streams from L2. Left to the hardware, the B loads stalled (perf: the samples
// gather on the FMAs that consume them); 16 steps (~220 cycles on AVX-512) cover an L2 hit
// and most of an L3 one. Measured at 2048^3, 1 thread, interleaved: 4 steps +1%, 8 +2%,
// 16 and 24 +3-4%. Where every operand is already in L1 (64^3 with A and B in place) the
// prefetches cost nothing measurable on x86-intel-avx512 (without them, and without C's, 64^3,
// 128^3 and the 64^3 x 256 batch ran the same); on x86-zen4 the small tiles run faster without
// them (gemm_small_run).
// A is prefetched only where it is read transposed in place (AColumns: each k step a new line
// lda floats on). A packed panel, or rows read in place, is a sequential stream the hardware
// prefetcher follows, and the prefetch per k step (one line per 2.7 steps of a 6-row panel)
// only took issue slots. x86-intel-avx512, alternated medians, GFLOP/s, with -> without it:
// 1 thread 512^3 161.6 -> 164.1, 1024^3 156.1 -> 159.8, 2048^3 157.0 -> 155.6, P V 132.6 ->
// 133.8; 2 threads 1024^3 303.4 -> 320.3, 2048^3 305.0 -> 314.1, 512^3 aligned 311.0 -> 319.9,
// the 512^3 x 8 batch 301.4 -> 311.1; fused attention within 1%. A^T in place kept it: 256^3
// 166.2 -> 159.1 without.
inline constexpr int64_t kPrefetchSteps = 16;

// How the k loop walks A: element (i, p) is at(i) at step p; step() moves to p + 1; prefetch()
// asks for what step p + kPrefetchSteps reads, where that pays (above). Each walker keeps the
// row addresses where the loop needs no register per row.

// Fixed strides (packed panels, fused attention's P tile): the row offsets are displacements.
template <int64_t RS, int64_t CS>
struct AFixed {
  const float* a;
  TESSERA_ALWAYS_INLINE float at(int i) const { return a[i * RS]; }
  TESSERA_ALWAYS_INLINE void prefetch() const {}
  TESSERA_ALWAYS_INLINE void step() { a += CS; }
};

// A transposed in place: a row of the tile is a contiguous run (displacements), the k step a
// runtime stride.
struct AColumns {
  const float* a;
  int64_t cs;
  TESSERA_ALWAYS_INLINE float at(int i) const { return a[i]; }
  TESSERA_ALWAYS_INLINE void prefetch() const { __builtin_prefetch(a + kPrefetchSteps * cs, 0, 3); }
  TESSERA_ALWAYS_INLINE void step() { a += cs; }
};

// A row-major in place (lda a runtime value). Held as 14 row pointers (or 14 offsets) the rows
// did not fit the general registers beside the loop's own, and every k step reloaded 8 of them
// from the stack (64^3 with A in place: 8 stack loads per k step). Here two base pointers, rows
// 0 and 7, step along k, and every row is one of them plus 0..6 lda: GCC keeps the six
// multiples of lda in registers and folds each row address into its broadcast, 8 registers
// whatever R.
template <int R>
struct ARows {
  static_assert(R <= 14, "rows 0..13: bases 0 and 7, offsets up to 6 rows");
  const float* p0;
  const float* p7;  // row 7 (row 0 for shorter tiles: no pointer past A)
  int64_t lda;
  ARows(const float* a, int64_t lda_) : p0(a), p7(R > 7 ? a + 7 * lda_ : a), lda(lda_) {}
  // i is a constant once the row loop is unrolled.
  TESSERA_ALWAYS_INLINE float at(int i) const { return i < 7 ? p0[i * lda] : p7[(i - 7) * lda]; }
  TESSERA_ALWAYS_INLINE void prefetch() const {}
  TESSERA_ALWAYS_INLINE void step() {
    ++p0;
    ++p7;
  }
};

// ARows that also brings the next tile's rows (next: its row 0, the same k range) into L2, one
// line per k step (one row after another, a line of each in turn), so that the next tile does
// not start R cold streams. For A read once from memory (TileRun::a_next), where each tile's rows
// are R new 4 KB pages of a matrix past L3 and the hardware prefetcher, which stops at a page,
// relearned every stream at every tile. The R kc / 16 lines are fetched within the first
// R / 16 of the tile's steps.
template <int R>
struct ARowsFetchingNext : ARows<R> {
  const float* next;
  int64_t kc, row = 0, offset = 0;
  ARowsFetchingNext(const float* a, int64_t lda_, const float* next_, int64_t kc_)
      : ARows<R>(a, lda_), next(next_), kc(kc_) {}
  TESSERA_ALWAYS_INLINE void prefetch() {
    if (offset < kc) {
      __builtin_prefetch(next + row * this->lda + offset, 0, 2);
      if (++row == R) row = 0, offset += kLineFloats;
    }
  }
};

// The one k loop behind every entry point below, over any A walker; B row p at b + p ldb.
// kPrefetch = false leaves out every software prefetch (C's, B's, A's and l2_next's).
// kBAhead: how many k steps ahead B's lines are prefetched into L1 (0: not at all; the default
// is kPrefetchSteps for tiles of more than two rows, none for one or two: kWideBAheadRows).
// Always inlined, so the packed entry point gets its strides as constants and a loop with
// nothing but two pointer bumps beyond the loads and FMAs.
// l2_next, l2_lines: lines to prefetch into L2 during the k loop, one per step (TileRun): the
// B micro-panel a run of tiles down a column reads next (src/gemm/gemm_driver.cpp). A tile that met
// a 256 KB panel fresh from L3 took ~4x the others' time (the kernel's own prefetches, 16
// steps ahead, cover L3's latency but not its bandwidth for 256 B per step); fetched a line per
// step over the previous column's tiles it arrives at ~5 B per cycle beside the panel in use.
// x86-intel-avx512, alternated medians, % of the FMA peak taken beside each row, before ->
// after: 1 thread 1024^3 86.7 -> 90.5, 2048^3 87.0 -> 90.4; 2 threads 1024^3 86.5 -> 91.4,
// 2048^3 88.3 -> 90.6. Issued in a burst before each tile instead, the prefetches held the
// line fill buffers and slowed every tile by 6%.
template <class Arch, int R, int NV, bool kPrefetch = true,
          int kBAhead = (R > 2 ? int(kPrefetchSteps) : 0), class AWalk>
TESSERA_ALWAYS_INLINE void ukernel_body(int64_t kc, AWalk a, const float* b, int64_t ldb, float* c,
                                        int64_t ldc, int64_t nr, float alpha, float beta,
                                        const float* l2_next = nullptr, int64_t l2_lines = 0) {
  using B = xsimd::batch<float, Arch>;
  constexpr int W = static_cast<int>(B::size);
  constexpr int kBLines = (NV * W + kLineFloats - 1) / kLineFloats;
  if constexpr (kPrefetch) prefetch_c<R, NV, W, CacheLevel::l2>(c, ldc);
  B acc[R][NV];
  TESSERA_UNROLL for (int i = 0; i < R; ++i) TESSERA_UNROLL for (int v = 0; v < NV; ++v) acc[i][v] =
      B(0.0f);
  // fetch_next: the steps that also bring one line of l2_next into L2.
  const auto steps = [&](int64_t count, auto fetch_next) __attribute__((always_inline)) {
    for (int64_t p = 0; p < count; ++p, a.step(), b += ldb) {
      if constexpr (decltype(fetch_next)::value) {
        __builtin_prefetch(l2_next, 0, 2);
        l2_next += kLineFloats;
      }
      B bv[NV];
      // Unaligned loads cost nothing extra on aligned panels and keep a prepacked B that the
      // caller moved to a less aligned address correct.
      TESSERA_UNROLL for (int v = 0; v < NV; ++v) bv[v] = B::load_unaligned(b + v * W);
      if constexpr (kPrefetch && kBAhead > 0)
        TESSERA_UNROLL for (int line = 0; line < kBLines; ++line)
            __builtin_prefetch(b + kBAhead * ldb + line * kLineFloats, 0, 3);
      if constexpr (kPrefetch) a.prefetch();
      TESSERA_UNROLL for (int i = 0; i < R; ++i) {
        const B ai(a.at(i));
        TESSERA_UNROLL for (int v = 0; v < NV; ++v) acc[i][v] = fmadd(ai, bv[v], acc[i][v]);
      }
    }
  };
  if constexpr (kPrefetch) {
    const int64_t head = kc > kCTailSteps ? kc - kCTailSteps : 0;
    const int64_t fetching = l2_lines < head ? l2_lines : head;
    steps(fetching, std::true_type{});
    steps(head - fetching, std::false_type{});
    prefetch_c<R, NV, W, CacheLevel::l1>(c, ldc);
    steps(kc - head, std::false_type{});
  } else {
    steps(kc, std::false_type{});
  }
  store_tile<Arch, R, NV>(acc, c, ldc, nr, alpha, beta);
}

// One or two rows (the wide kernels of decode's P V, B read once as one sequential stream)
// prefetch B this many k steps ahead in the table's wide_prefetching kernels (taken where the
// tuning row says so: src/runtime/tuning.cpp), none in its wide ones. x86-zen4 lost with them: its
// load slots were the bound, and eight prefetches per k step beside eight B loads took half of them
// (1 x 128 x 4096, 1 thread, GFLOP/s with 16 steps -> without: 34.4 -> 45.2; 2 x 128 x 4096 59.2
// -> 61.3). x86-zen5 gains: the hardware prefetcher alone fed ~110 GB/s of the ~130 that L3 gives
// one core (a plain load loop over 2 MB: 122 GB/s, 132 with prefetches 1-4 KB ahead). A standalone
// 1 x 128 x 4096 loop, B 16 bytes off a line: none 55.5 GFLOP/s; 1, 2, 4, 8 steps ahead 64.5-65.1;
// 16 steps 63.1; 32 steps 58.9.
inline constexpr int kWideBAheadRows = 4;

// A read in place through strides: row-major (a_cs = 1, a_rs = lda) or transposed (a_rs = 1,
// a_cs = lda). kBAhead as ukernel_body's.
template <class Arch, int R, int NV, int kBAhead = (R > 2 ? int(kPrefetchSteps) : 0)>
void gemm_ukernel(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                  int64_t ldb, float* c, int64_t ldc, int64_t nr, float alpha, float beta) {
  if (a_cs == 1)
    ukernel_body<Arch, R, NV, true, kBAhead>(kc, ARows<R>(a, a_rs), b, ldb, c, ldc, nr, alpha,
                                             beta);
  else
    ukernel_body<Arch, R, NV, true, kBAhead>(kc, AColumns{a, a_cs}, b, ldb, c, ldc, nr, alpha,
                                             beta);
}

// gemm_ukernel<Arch, R, NV> over a run of tiles (TileRun), the walker chosen once.
template <class Arch, int R, int NV>
void gemm_ukernel_run(const TileRun& run, int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
                      const float* b, int64_t ldb, float* c, int64_t ldc, int64_t nr, float alpha,
                      float beta) {
  if (a_cs == 1) {
    const float* next = run.l2_next;
    for (int64_t t = 0; t < run.count; ++t, a += run.a_step, b += run.b_step, c += run.c_step) {
      if (run.a_next && t + 1 < run.count)
        ukernel_body<Arch, R, NV>(kc, ARowsFetchingNext<R>(a, a_rs, a + run.a_step, kc), b, ldb, c,
                                  ldc, nr, alpha, beta, next, next ? run.l2_lines : 0);
      else
        ukernel_body<Arch, R, NV>(kc, ARows<R>(a, a_rs), b, ldb, c, ldc, nr, alpha, beta, next,
                                  next ? run.l2_lines : 0);
      if (next) next += run.l2_lines * kLineFloats;
    }
  } else {
    for (int64_t t = 0; t < run.count; ++t, a += run.a_step, b += run.b_step, c += run.c_step)
      ukernel_body<Arch, R, NV>(kc, AColumns{a, a_cs}, b, ldb, c, ldc, nr, alpha, beta);
  }
}

// A read in place with rows LDA floats apart (a constant: fused attention's P tile), B a packed
// panel. With the row stride a runtime value the 14 row addresses did not fit the general
// registers next to the loop's own (the compiler reloaded offsets from the stack every k step,
// and P V ran ~30% slower than Q K^T); as a constant they are displacements.
template <class Arch, int LDA, int R, int NV>
void gemm_ukernel_rows_lda(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                           int64_t nr, float alpha, float beta) {
  constexpr int64_t NR = NV * static_cast<int64_t>(xsimd::batch<float, Arch>::size);
  ukernel_body<Arch, R, NV>(kc, AFixed<LDA, 1>{a}, b, NR, c, ldc, nr, alpha, beta);
}

// Packed panels: a_rs = 1, a_cs = MR, ldb = NR, known at compile time. NV vectors of columns
// out of panels NVB vectors wide: NVB > NV is the narrow kernel of fused attention's S product
// (the first vector of a K panel whose visible keys end within it).
template <class Arch, int MR, int R, int NV, int NVB = NV>
void gemm_ukernel_packed(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                         int64_t nr, float alpha, float beta) {
  constexpr int64_t NRB = NVB * static_cast<int64_t>(xsimd::batch<float, Arch>::size);
  ukernel_body<Arch, R, NV>(kc, AFixed<1, MR>{a}, b, NRB, c, ldc, nr, alpha, beta);
}

// The small tiles' run (GemmKernels::small_run): products of at most 128^3 multiply-adds, whose
// operands sit in L1 or L2, where a tile's k loop is short (64 steps at 64^3, ~1000 cycles of
// FMAs) and what surrounds it weighs (perf: 8% of the run's time outside its k loops at 64^3).
//  - No software prefetch. B and C are already near, and on a B whose rows map to few L1 sets
//    (64 x 256 x 64: rows 1 KB apart) the B prefetches evicted lines still in use.
//  - Each tile is a call of its own. Inlined into the run, the run's state crowded the general
//    registers, and the epilogue moved addresses through vector registers.
//  - C = A B (alpha 1, beta 0, whole tiles: the BLAS's common case), decided once per run,
//    stores the accumulators as they are.
// x86-zen4, 1 thread unless noted, alternated medians, GFLOP/s, the MR x NR kernels' run -> this:
// 64^3 110.4 -> 112.2 and 108.9 -> 109.7; 64^3 with B^T 100.2 -> 101.8; 128^3 111.5 -> 112.9;
// 64 x 256 x 64 99.0 -> 111.4; 128^3 on 2 threads 186.7 -> 198.8. The 64^3 x 256 batch with B^T,
// whose A and C come from L3, lost ~1% (88.3 -> 87.1 on 1 thread, 186.9 -> 183.0 on 2).
template <class Arch, int R, int NV, bool kOverwrite, bool kRows>
__attribute__((noinline)) void small_tile(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
                                          const float* b, int64_t ldb, float* c, int64_t ldc,
                                          int64_t nr, float alpha, float beta) {
  constexpr int64_t NR = NV * static_cast<int64_t>(xsimd::batch<float, Arch>::size);
  if constexpr (kOverwrite) nr = NR, alpha = 1.0f, beta = 0.0f;
  if constexpr (kRows)
    ukernel_body<Arch, R, NV, false>(kc, ARows<R>(a, a_rs), b, ldb, c, ldc, nr, alpha, beta);
  else
    ukernel_body<Arch, R, NV, false>(kc, AColumns{a, a_cs}, b, ldb, c, ldc, nr, alpha, beta);
}

template <class Arch, int R, int NV, bool kOverwrite, bool kRows>
void small_tiles(const TileRun& run, int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
                 const float* b, int64_t ldb, float* c, int64_t ldc, int64_t nr, float alpha,
                 float beta) {
  for (int64_t t = 0; t < run.count; ++t, a += run.a_step, b += run.b_step, c += run.c_step)
    small_tile<Arch, R, NV, kOverwrite, kRows>(kc, a, a_rs, a_cs, b, ldb, c, ldc, nr, alpha, beta);
}

template <class Arch, int R, int NV>
void gemm_small_run(const TileRun& run, int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
                    const float* b, int64_t ldb, float* c, int64_t ldc, int64_t nr, float alpha,
                    float beta) {
  constexpr int64_t NR = NV * static_cast<int64_t>(xsimd::batch<float, Arch>::size);
  const bool overwrite = nr == NR && alpha == 1.0f && beta == 0.0f;
  const bool rows = a_cs == 1;
  const auto tiles =
      overwrite
          ? (rows ? small_tiles<Arch, R, NV, true, true> : small_tiles<Arch, R, NV, true, false>)
          : (rows ? small_tiles<Arch, R, NV, false, true> : small_tiles<Arch, R, NV, false, false>);
  tiles(run, kc, a, a_rs, a_cs, b, ldb, c, ldc, nr, alpha, beta);
}

// A strided kernel over a run of tiles, one call per tile: for ISAs whose general registers
// cannot hold the run's state beside the k loop's (ARMv7: with gemm_ukernel_run's loop around
// it, the 4 x 8 k loop reloaded its pointers from the stack, 21 loads per 8 FMAs against 10;
// AArch64's A^T walker spilled a vector register).
template <GemmStridedFn Tile>
void strided_run_of(const TileRun& run, int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
                    const float* b, int64_t ldb, float* c, int64_t ldc, int64_t nr, float alpha,
                    float beta) {
  for (int64_t t = 0; t < run.count; ++t, a += run.a_step, b += run.b_step, c += run.c_step)
    Tile(kc, a, a_rs, a_cs, b, ldb, c, ldc, nr, alpha, beta);
}

// An ISA's own packed kernel for whole tiles over a run of tiles (TileRun).
template <GemmPackedFn Tile>
void packed_run_of(const TileRun& run, int64_t kc, const float* a, const float* b, float* c,
                   int64_t ldc, int64_t nr, float alpha, float beta) {
  for (int64_t t = 0; t < run.count; ++t, a += run.a_step, b += run.b_step, c += run.c_step)
    Tile(kc, a, b, c, ldc, nr, alpha, beta);
}

// gemm_ukernel_packed<Arch, MR, MR, NV> over a run of tiles (TileRun).
template <class Arch, int MR, int NV>
void gemm_ukernel_packed_run(const TileRun& run, int64_t kc, const float* a, const float* b,
                             float* c, int64_t ldc, int64_t nr, float alpha, float beta) {
  constexpr int64_t NR = NV * static_cast<int64_t>(xsimd::batch<float, Arch>::size);
  const float* next = run.l2_next;
  for (int64_t t = 0; t < run.count; ++t, a += run.a_step, b += run.b_step, c += run.c_step) {
    ukernel_body<Arch, MR, NV>(kc, AFixed<1, MR>{a}, b, NR, c, ldc, nr, alpha, beta, next,
                               next ? run.l2_lines : 0);
    if (next) next += run.l2_lines * kLineFloats;
  }
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
