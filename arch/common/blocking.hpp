// Every SGEMM block size of every ISA, in one place, with the cache arithmetic (BLIS's
// bli_cntx_init_* habit). MR x NR is the register tile; KC the k depth of a packed micro-panel;
// MC the rows of a packed A block; NC the columns of a packed B block.
//
// The rules: the B micro-panel (KC x NR floats) stays in L1 while the A micro-panels stream past
// it, so KC NR 4 B <= L1 / 2; the packed A block (MC x KC) stays in L2 while every B
// micro-panel of the block visits it, so MC KC 4 B <= L2 / 2; the packed B block (KC x NC)
// lives in L3 (or DRAM on the small ARM parts, where it is still read once per MC rows).
#pragma once

#include "kernel_ns.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

struct GemmBlocking {
  int mr, nv;  // register tile: mr rows x nv vectors of columns (NR = nv * floats per vector)
  int kc, mc, nc;
  int dot_rows, dot_cols;  // the dot-product kernel's tile (few rows of A, B transposed)
  // The wide few-row kernels (GemmKernels::wide): r rows x nv vectors with r nv <= wide_acc
  // accumulators and nv <= wide_nv, leaving registers for the broadcast and the B vectors (x86
  // folds B into the FMA as a memory operand; NEON holds each in a register). Checked in the
  // disassembly of the k loops (no stack accesses): 24 accumulators spilled 3 q registers per
  // k step on AArch64 (3 x 8), and 1 x 8 spilled on ARMv7.
  int wide_acc, wide_nv;
  // Small products with B^T (B^T packed a panel small_nv vectors wide at a time, the panels
  // shared among the threads): tiles of small_rows x small_nv vectors down each panel, as one
  // run; 0 where the MR x NR tile serves them.
  int small_rows = 0, small_nv = 0;
  // The few-row kernels that stream B row by row (gemm_rows_stream.hpp): A broadcasts held
  // across a block of B rows, R x KB with KB = stream_bcast / R (at most 8 rows). Twice wide_acc
  // on x86, whose FMAs take a broadcast the registers do not hold as a memory operand; wide_acc
  // on NEON, where it would be a spill.
  int stream_bcast = 0;
  // The dot kernels with B in 16 bits (gemm_dot_b16.hpp), where they differ from dot_rows x
  // dot_cols (0: the same): every B vector is widened once per call, so more rows per call widen
  // each B element fewer times.
  int dot16_rows = 0, dot16_cols = 0;
  // The streaming kernels with B in 16 bits (rows_stream16), where they differ from stream_bcast
  // (0: the same): widening a B row takes registers of its own.
  int stream16_bcast = 0;
  // Vectors of columns of the few-row kernels on a 16-bit B read in place (wide16): 2, or 4 where
  // 4 rows x 4 vectors of accumulators fit beside the widened B (32 registers: AVX-512's zmm,
  // 16 + 4 + 1; AArch64's q, where llvm-mca puts the 4-row loop ahead of 2 vectors).
  int wide16_nv = 2;
};

constexpr int dot16_rows_of(const GemmBlocking& g) {
  return g.dot16_rows ? g.dot16_rows : g.dot_rows;
}
constexpr int dot16_cols_of(const GemmBlocking& g) {
  return g.dot16_cols ? g.dot16_cols : g.dot_cols;
}

// AVX-512 (32 zmm; L1d 32-48 KB, L2 1-2 MB per core on the parts that have it).
//   14 x 32: 28 accumulators + 2 B vectors + 1 broadcast = 31 zmm.
//   KC 512: the B micro-panel, 512 x 32 x 4 B = 64 KB, is larger than L1 and streams from L2
//   (64 B/cycle, against the 128 B of B a k step needs every 14 cycles; the hardware
//   prefetcher keeps ahead of a sequential panel). What KC buys is fewer passes over C: each
//   pass reads and writes all of C, 32 MB at 2048^2, once per KC block of k; the micro-kernel
//   alone on an L2 block is flat from KC 192 to 512.
//   MC 336 (24 panels): A block 336 x 512 x 4 B = 672 KB, a third of a 2 MB L2 (two thirds of a
//   1 MB one, with a KC 256 B micro-panel then 32 KB: neither change gained, docs/design.md §12).
//   NC 4096: B block 512 x 4096 x 4 B = 8 MB, in L3.
//   Small products with B^T (one thread): 4 x 64 tiles, 16 accumulators, 4 broadcasts and 4 B
//   loads per 16 FMAs; a 64^3 product is 16 of them, all whole, where 14 x 32 leaves an 8-row
//   tail (the choice: gemm_small_tiles in src/gemm/gemm_driver.cpp).
//   Small products with B in whole 64-column panels read B in place with the same tiles only
//   where a load that straddles two lines costs one (Tuning::small_b_in_place, the CPU class
//   row's flag): their 4 B loads per 16 FMAs each straddle two lines when B starts 16 bytes
//   past one. A partial panel (n = 96 or 100) gains nothing from 4 x 64 and n = 32 loses half
//   (a padded panel doubles the work), so partial panels keep the MR x NR tiles. A B whose k
//   rows span past L1 is packed a panel at a time instead (small_tiles_form in
//   src/gemm/gemm_driver.cpp). Past the small products, k <= 128 with A within 2 MB takes the
//   same packed panels (attention's 4096 x 4096 x 64 scores among them).
inline constexpr GemmBlocking kAvx512Gemm{14, 2, 512, 336, 4096, 4, 4, 24, 8, 4, 4, 48, 0, 0, 0, 4};

// AVX-512, the deep tile (GemmKernels::deep): blocked products with k > 128 and n >= 4 NR,
// and small products on one thread with B past L1 (the choice: blocked_kernels and gemm_run in
// src/gemm/gemm_driver.cpp).
//   6 x 64: 24 accumulators + 4 B vectors + 1 broadcast = 29 zmm; per k step 4 loads and 6
//   broadcasts feed 24 FMAs (0.42 loads per FMA, against 0.57 for 14 x 32), and a tile's C
//   rows are 6 x 256 contiguous bytes.
//   KC 1024: half the passes over C of KC 512. The B micro-panel (1024 x 64 x 4 B = 256 KB) and
//   the A micro-panel (6 x 1024 x 4 B = 24 KB) both stream from L2, 280 B per k step of 12
//   cycles, within the 64 B per cycle L2 delivers (the kernel prefetches both 16 steps ahead;
//   a column's run of tiles brings the next B micro-panel from L3 into L2, TileRun::l2_next).
//   MC 168 (28 panels): A block 168 x 1024 x 4 B = 672 KB, which with one B micro-panel
//   (928 KB) fills a 1 MB L2.
//   NC 4096: B block 1024 x 4096 x 4 B = 16 MB, in L3.
//   14 x 32 stays where k <= 128 with rows outer (the score products) and on the in-place
//   mid-size path: there the 14-row tile reads fewer B bytes per FMA than 6 x 64 reads of A.
//   Narrow products of whole 64-column panels (P V, n = 64 or 128) take 6 x 64: the 14 rows
//   of an A read in place with lda a multiple of 1024 floats fall in one set of an 8-way L1,
//   6 rows do not. The measurements behind each choice: docs/design.md §12.
inline constexpr GemmBlocking kAvx512DeepGemm{6, 4, 1024, 168, 4096, 4, 4, 24, 8};

// AVX2 + FMA (16 ymm, L1d 32 KB, L2 256 KB-1 MB).
//   6 x 16: 12 accumulators + 2 B vectors + 1 broadcast = 15 ymm.
//   KC 512: B micro-panel 512 x 16 x 4 B = 32 KB, L1 on most of these cores (streaming from L2
//   where it is not); as on AVX-512, fewer passes over C than KC 256 (docs/design.md §12).
//   MC 144 (24 panels): 144 x 512 x 4 B = 288 KB, within a 1 MB L2 (just over a 256 KB one).
//   16-bit dot tile 4 x 2: 8 accumulators + 4 A + 2 widened B = 14 ymm. The float32 2 x 4 tile
//   would widen each B vector twice for decode's 4 query rows per K/V head (vcvtph2ps is two
//   uops on Zen and Intel); 4 x 2 widens it once.
inline constexpr GemmBlocking kAvx2Gemm{6, 2, 512, 144, 4096, 2, 4, 12, 8, 0, 0, 24, 4, 2};

// SSE2 (no FMA: multiply then add, one temporary): 16 xmm.
//   4 x 8: 8 accumulators + 2 B + 1 broadcast + 1 product = 12 xmm.
//   KC 256: 256 x 8 x 4 B = 8 KB; MC 128: 128 KB.
inline constexpr GemmBlocking kSse2Gemm{4, 2, 256, 128, 4096, 2, 4, 12, 8, 0, 0, 24};

// AArch64 NEON (32 q registers, L1d 32-64 KB, L2 128 KB-1 MB on the cores it serves).
//   8 x 12: 24 accumulators + 3 B vectors + 2 A vectors (lane-indexed FMA) = 29 q.
//   KC 256: 256 x 12 x 4 B = 12 KB; MC 128 (16 panels): 128 KB, half of a 256 KB L2.
//   NC 3072 (= 256 NR): 3 MB B block.
//   The 8 x 12 kernels that read A in place (strided, and fused attention's P rows) take 8 A
//   elements per k step into 8 registers instead of 2: with 24 accumulators and 3 B vectors that
//   is 35, and GCC keeps one accumulator on the stack (an ldr q and a str q per k step, which
//   scripts/check_neon_loops.sh reports). The spill rides the load/store pipes beside an
//   FMA-bound loop; gathering the 8 elements into 2 q registers with lane loads (ld1 {v.s}[i])
//   frees the registers but chains each load on the last write of its register, which is
//   slower (llvm-mca's cycles for both: docs/design.md §12). The spill stays.
inline constexpr GemmBlocking kNeon64Gemm{8, 3, 256, 128, 3072, 4, 4, 16, 8, 0, 0, 16, 0, 0, 0, 4};

// ARMv7 NEON with VFPv4 (16 q registers, L1d 32 KB, L2 256-512 KB).
//   4 x 8: 8 accumulators + 2 B + 1 broadcast = 11 q (no lane-indexed vfma on ARMv7).
//   KC 256: 8 KB; MC 64: 64 KB.
//   16-bit rows streamed (rows_stream16) with 4 broadcasts, not 8: at 4 rows x 2 broadcasts, 4 sums
//   and the widened row, the k loop spilled 2 q registers (scripts/check_neon_loops.sh).
inline constexpr GemmBlocking kNeon32Gemm{4, 2, 256, 64, 2048, 2, 4, 8, 4, 0, 0, 8, 0, 0, 4};

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
