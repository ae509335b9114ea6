// The kernel-table interface: the only header arch/ and src/ share. One table per ISA, each
// defined in that ISA's translation unit (arch/x86/avx512.cpp, ..., arch/arm/neon32.cpp) and
// compiled with that ISA's flags; src/ reaches kernels only through these pointers.
// Kernel contracts are at the top of the headers in arch/common/.
#pragma once

#include <cstdint>

namespace tessera::arch {

constexpr int kMaxMR = 16;
constexpr int kMaxDotRows = 4;
// Rows of the wide few-row kernels (GemmKernels::wide). From 4 rows on, NR columns already give
// 4 NV independent FMA chains.
constexpr int kMaxWideRows = 4;
constexpr int kWideWidths = 4;  // their widths: 1, 2, 4 or 8 vectors

// Fused attention's key tile: BK keys per step of the key loop. The score/probability tile is
// stored with rows BK floats apart, so the P V micro-kernel that reads it in place gets that
// stride as a constant (gemm_ukernel_rows_bk). BK = 256: the S tile of ~512 stacked rows
// (512 KB), a K and a V tile (128 KB each at d = 128) and the O accumulator share a 2 MB L2.
inline constexpr int kAttentionBK = 256;

// Rows the short softmax kernels (attention_rows among them) take together: a caller that
// splits rows into calls keeps whole groups per call by cutting at multiples of this.
inline constexpr int kSoftmaxRowGroup = 4;

// gemm_ukernel.hpp: C[0:r, 0:nr] = alpha A B + beta C for r rows (the index in the table).
using GemmPackedFn = void (*)(int64_t kc, const float* a_panel, const float* b_panel, float* c,
                              int64_t ldc, int64_t nr, float alpha, float beta);
using GemmStridedFn = void (*)(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
                               const float* b, int64_t ldb, float* c, int64_t ldc, int64_t nr,
                               float alpha, float beta);
// r rows of A (A(i, p) at a[i * a_rs + p * a_cs]) against `panels` consecutive panels of a
// prepacked B's KC block, C's first `cols` columns, rows ldc apart
// (arch/common/gemm_row_panels.hpp).
using GemmRowPanelsFn = void (*)(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
                                 const float* b, int64_t panels, float* c, int64_t ldc,
                                 int64_t cols, float alpha, float beta);
// The same with the panels stored in 16 bits (f16 or bf16), widened as loaded.
using GemmRowPanels16Fn = void (*)(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
                                   const uint16_t* b, int64_t panels, float* c, int64_t ldc,
                                   int64_t cols, float alpha, float beta);
// The panels read at once with `acc` accumulators per panel (rows x vectors): 8 accumulators,
// at least one panel.
constexpr int row_panels_at_once(int acc) { return acc >= 8 ? 1 : 8 / acc; }
// Rows of A the row-panel kernels take at most.
constexpr int kMaxRowPanelRows = 4;
// Floats per 64-byte cache line: the unit of every prefetch and of TileRun::l2_lines.
inline constexpr int kLineFloats = 16;

// A run of whole MR x NR tiles in one call: tile t (t < count) reads A at a + t a_step and B at
// b + t b_step, and writes C at c + t c_step, each as one call of the r = MR kernel would.
// l2_next: what the caller reads after the run (the next B micro-panel), to be brought into
// L2 while the run computes: tile t prefetches the l2_lines lines from l2_next + t l2_lines
// kLineFloats, one per k step. A hint: a kernel may ignore it, and it is never read.
struct TileRun {
  int64_t count, a_step, b_step, c_step;
  const float* l2_next = nullptr;
  int64_t l2_lines = 0;
  // A read in place, rows a_rs apart (the strided run): each tile brings the next tile's rows
  // into L2 (gemm_ukernel.hpp: ARowsFetchingNext).
  bool a_next = false;
};
using GemmPackedRunFn = void (*)(const TileRun& run, int64_t kc, const float* a_panel,
                                 const float* b_panel, float* c, int64_t ldc, int64_t nr,
                                 float alpha, float beta);
using GemmStridedRunFn = void (*)(const TileRun& run, int64_t kc, const float* a, int64_t a_rs,
                                  int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc,
                                  int64_t nr, float alpha, float beta);
// gemm_rows_stream.hpp: C[0:r, 0:n] = alpha A B + beta C, B streamed row by row, acc r x n
// floats of scratch.
using GemmStreamFn = void (*)(int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                              int64_t ldb, float* acc, float* c, int64_t ldc, int64_t n,
                              float alpha, float beta);
// gemm_rows_stream.hpp: as GemmStreamFn with B in 16 bits (f16 or bf16), widened as loaded.
using GemmStream16Fn = void (*)(int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                                const uint16_t* b, int64_t ldb, float* acc, float* c, int64_t ldc,
                                int64_t n, float alpha, float beta);
// gemm_dot.hpp: C = alpha A B^T + beta C for r rows and a fixed number of columns.
using GemmDotFn = void (*)(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                           float* c, int64_t ldc, float alpha, float beta);
// gemm_dot.hpp: C[0, 0:n] = alpha a B^T + beta C for one row, n a multiple of the vector width.
using GemmDotRunFn = void (*)(int64_t k, const float* a, const float* b, int64_t ldb, float* c,
                              int64_t n, float alpha, float beta);
// The rows another call reads next, one for each row of B a call reads (row i's at at + i ld,
// the same elements): the call prefetches each into L1 as it reads its own row, spread over its
// loop (a burst of a block's lines before the call stalled its loads behind them). at = null:
// the kernel prefetches B's rows past its own by address, as a plain GEMM over B wants.
struct RowsAhead {
  const uint8_t* at = nullptr;
  int64_t ld = 0;
};
// gemm_dot_b16.hpp: as GemmDotFn with B stored in 16 bits (f16 or bf16), widened as loaded; B's
// next rows as `ahead` says.
using GemmDot16Fn = void (*)(int64_t k, const float* a, int64_t lda, const uint16_t* b, int64_t ldb,
                             float* c, int64_t ldc, float alpha, float beta, RowsAhead ahead);
// A 16-bit B's rows in up to kMaxB16Runs runs, rows ld elements apart within a run (a paged V:
// the rows of each page a block of keys lies on): B's rows [0, end[0]) are run 0's from at[0],
// [end[0], end[1]) run 1's from at[1], and so on; ahead[g] the rows run g's reads prefetch.
constexpr int kMaxB16Runs = 4;
struct B16Rows {
  const uint16_t* at[kMaxB16Runs];
  int64_t end[kMaxB16Runs];
  RowsAhead ahead[kMaxB16Runs];
  int count = 0;
  int64_t ld = 0;
  // B as one run of rows (a matrix).
  static B16Rows matrix(const uint16_t* b, int64_t k, int64_t ld) {
    B16Rows r;
    r.at[0] = b, r.end[0] = k, r.count = 1, r.ld = ld;
    return r;
  }
  // The next columns, n on: each run's rows and those it prefetches.
  void next_columns(int64_t n) {
    for (int g = 0; g < count; ++g) {
      at[g] += n;
      if (ahead[g].at) ahead[g].at += 2 * n;
    }
  }
};
// gemm_dot_b16.hpp: as GemmStridedFn (few rows, nr <= 2 vectors) with B's k rows in 16 bits, in
// runs.
using GemmStrided16Fn = void (*)(int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                                 const B16Rows& b, float* c, int64_t ldc, int64_t nr, float alpha,
                                 float beta);
// gemm_pack.hpp
using GemmPackFn = void (*)(bool trans, int64_t rows_or_k, int64_t k_or_cols, const float* src,
                            int64_t ld, float* out);

struct GemmKernels {
  int mr, nr, kc, mc, nc;  // blocking (arch/common/blocking.hpp)
  int simd_floats;         // floats per vector: the wide kernels' unit of columns
  int dot_rows;
  int dot_cols[kMaxDotRows + 1];      // [r]: the columns of dot[r]
  GemmPackedFn packed[kMaxMR + 1];    // [r]: r = 1..mr rows of a packed A panel
  GemmStridedFn strided[kMaxMR + 1];  // [r]: A read in place through strides
  // packed[mr] and strided[mr] over a run of whole tiles (TileRun): one call per row or column
  // of tiles rather than per tile, so the k loops of successive tiles follow each other without
  // a call, a prologue and the table's indirect branch between them. At k = 64 a tile is ~900
  // cycles of FMAs, and the calls cost 3-4% (the kernel alone on cached panels: 258 GFLOP/s per
  // tile, 267 in a run). AVX-512, 1 thread, alternated medians: 64^3 254 -> 265 GFLOP/s, 128^3
  // 247 -> 258, 4096 x 4096 x 64 (Q K^T) 237 -> 246, and 472 -> 498 on 2 threads.
  GemmPackedRunFn packed_run;
  GemmStridedRunFn strided_run;
  // [r]: r rows against a prepacked B (a prepared layer's decode step), several panels of NR
  // columns read at once (row_panels_at_once(r nv)); r = 1..row_panels_rows, null past it.
  // [t][r]: the same with the panels in 16 bits, t = 0 for f16, 1 for bf16 (weights packed in
  // 16 bits: half the bytes per decode step).
  int row_panels_rows;
  GemmRowPanelsFn row_panels[kMaxRowPanelRows + 1];
  GemmRowPanels16Fn row_panels16[2][kMaxRowPanelRows + 1];
  // A run of small_rows x small_cols tiles (blocking.hpp: small_rows), or null; B^T packed into
  // small_cols-wide panels for them (pack_b's layout at that width).
  int small_rows, small_cols;
  GemmStridedRunFn small_run;
  GemmPackFn pack_b_small;
  // Narrow forms, one vector of columns (nr <= simd floats) out of B panels ldb apart: fused
  // attention's S product on a K panel whose visible keys end within its first vector.
  GemmStridedFn strided_narrow[kMaxMR + 1];  // [r]: as strided
  GemmPackedFn packed_narrow[kMaxMR + 1];    // [r]: as packed, B a full-width packed panel
  // [r]: A read in place, rows kAttentionBK floats apart (attention's P), B a packed panel
  GemmPackedFn rows_bk[kMaxMR + 1];
  // [r][j]: as strided, r rows x (1 << j) vectors of columns; for few rows of A against a B
  // read in place (decode's P V), where NR columns would give too few independent FMA chains
  // (one row: NV). Null past the ISA's wide_acc and wide_nv (blocking.hpp); j = 0 is always there.
  GemmStridedFn wide[kMaxWideRows + 1][kWideWidths];
  // As wide, with one or two rows prefetching B's lines kWideBAheadRows k steps ahead
  // (gemm_ukernel.hpp; more rows: wide's own kernels), for a B streamed from L3 or memory. The
  // planner takes them where the tuning row's prefetch_streamed_b is set (cores with the load
  // slots for them) and a thread's share of B is past L2 (src/gemm/gemm_plan.cpp).
  GemmStridedFn wide_prefetching[kMaxWideRows + 1][kWideWidths];
  // [r]: r <= kMaxWideRows rows of A against a B beyond L2, n whole vectors.
  GemmStreamFn rows_stream[kMaxWideRows + 1];
  GemmDotFn dot[kMaxDotRows + 1];   // [r]: r x dot_cols[r]
  GemmDotFn dot1[kMaxDotRows + 1];  // [r]: r x 1
  GemmDotFn dot_stream;      // as dot[1], B rows visited in order: a B streamed once from memory
  GemmDotRunFn dot_row_run;  // as dot[1] over n columns, n a multiple of dot_cols[1]
  // [t][r]: as dot[r] and dot1[r] with B in 16 bits, t = 0 for f16, 1 for bf16: r = 1..dot16_rows,
  // r x dot16_cols[r].
  int dot16_rows;
  int dot16_cols[kMaxDotRows + 1];
  GemmDot16Fn dot16[2][kMaxDotRows + 1];
  GemmDot16Fn dot16_1[2][kMaxDotRows + 1];
  // [t][r]: r <= kMaxWideRows rows of A against a 16-bit B read in place, up to wide16_cols
  // columns (fused attention's few-row P V on a 16-bit V).
  int wide16_cols;
  GemmStrided16Fn wide16[2][kMaxWideRows + 1];
  // [t][r]: as rows_stream[r] with B in 16 bits (a few tokens through weights kept in 16 bits).
  GemmStream16Fn rows_stream16[2][kMaxWideRows + 1];
  GemmPackFn pack_a;  // (trans, mc, kc, a, lda, out)
  GemmPackFn pack_b;  // (trans, kc, nc, b, ldb, out)
  // Another MR x NR tile, with its own blocking, packers and tile kernels (the fields above
  // through nc, packed, strided, the runs and the packers), for blocked products with a deep k
  // and small products on one thread (blocking.hpp: kAvx512DeepGemm); null where the table's
  // own tile serves them.
  const GemmKernels* deep;
};

// The panels row_panels[r] (and row_panels16[t][r]) read at once: r rows x NV vectors each.
inline int row_panels_group(const GemmKernels& g, int r) {
  return row_panels_at_once(g.nr / g.simd_floats * r);
}

// The widest wide[r][j] (index j) of at most `vectors` vectors: callers cover a run of whole
// vectors with the widest kernels first.
inline int wide_index(const GemmKernels& g, int r, int64_t vectors) {
  int j = kWideWidths - 1;
  while (j > 0 && (g.wide[r][j] == nullptr || (int64_t(1) << j) > vectors)) --j;
  return j;
}

// C[0:r, 0:n] = alpha A B + beta C for r <= kMaxWideRows rows of A (element (i, p) at
// a[i a_rs + p a_cs]) and B read in place (rows ldb apart): the table's wide kernels over B's
// whole vectors, widest first; the columns past the last whole vector packed into `panel` (k x
// nr floats; unused, and may be null, when n is whole vectors) for the one-vector kernel. Every
// C element is one accumulator lane summing k in order, whatever the widths.
// b_streams: B comes from L3 or memory: the wide_prefetching kernels.
inline void wide_rows(const GemmKernels& g, int64_t r, int64_t k, const float* a, int64_t a_rs,
                      int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t n,
                      float alpha, float beta, float* panel, bool b_streams = false) {
  const int64_t W = g.simd_floats, whole = n / W * W;
  const auto& wide = b_streams ? g.wide_prefetching : g.wide;
  for (int64_t j0 = 0; j0 < whole;) {
    const int j = wide_index(g, int(r), (whole - j0) / W);
    const int64_t nr = (int64_t(1) << j) * W;
    wide[r][j](k, a, a_rs, a_cs, b + j0, ldb, c + j0, ldc, nr, alpha, beta);
    j0 += nr;
  }
  if (whole == n) return;
  g.pack_b(false, k, n - whole, b + whole, ldb, panel);
  g.wide[r][0](k, a, a_rs, a_cs, panel, g.nr, c + whole, ldc, n - whole, alpha, beta);
}

// arch/arm/hgemm_neon64_fp16.hpp: C (float32, r x nr) = alpha A B + beta C, A and B packed f16
// panels, the products summed in fp16 over chunks of k (tessera_hgemm on fp16 arithmetic).
using HgemmPackedFn = void (*)(int64_t k, const uint16_t* a_panel, const uint16_t* b_panel,
                               float* c, int64_t ldc, int64_t nr, float alpha, float beta);
struct HalfGemmKernels {
  int mr = 0, nr = 0;  // A panel: mr halves per k step; B panel: nr
  int chunk = 0;       // k steps summed in fp16 before their sum is added in float32
  HgemmPackedFn packed[kMaxMR + 1] = {};  // [r]: r = 1..mr rows; all null: no fp16 arithmetic
};

// arch/x86/gemm_bf16_dot_avx512.hpp: C (float32, r x nr) = alpha A B + beta C, A and B bf16
// panels of k pairs, each pair step one bf16 dot-product instruction (bf16 x bf16 -> float32).
using Bf16DotPackedFn = void (*)(int64_t pairs, const uint16_t* a_panel, const uint16_t* b_panel,
                                 float* c, int64_t ldc, int64_t nr, float alpha, float beta);
// As GemmDotFn with A and B both bf16 (few rows against B^T read in place).
using Bf16DotNtFn = void (*)(int64_t k, const uint16_t* a, int64_t lda, const uint16_t* b,
                             int64_t ldb, float* c, int64_t ldc, float alpha, float beta);
// One panel of k pairs, `width` lanes wide, `lanes` of them from src (contract there).
using Bf16PairPackFn = void (*)(bool k_rows, int64_t lanes, int64_t k, const uint16_t* src,
                                int64_t ld, int64_t width, uint16_t* out);
// Kernels that need one CPU feature beyond their table's (XNNPACK picks micro-kernels per
// feature the same way): the dispatcher adds them to the table where the CPU has `feature`.
struct Bf16DotKernels {
  const char* feature = "";  // as hardware.hpp names it: "avx512_bf16"
  int mr = 0, nr = 0;        // A panel: mr pairs per pair step; B panel: nr
  int kc = 0, mc = 0;        // blocking: k elements (even), rows
  // k blocks this short walk C a strip of MR rows at a time across all columns (each tile's
  // A panel stays in L1, C is written in order); longer ones a B micro-panel at a time.
  int rows_outer_k = 0;
  Bf16DotPackedFn packed[kMaxMR + 1] = {};  // [r]: r = 1..mr rows; all null: none here
  Bf16PairPackFn pack = nullptr;
  // [r]: r x dot_cols[r] and r x 1 dot kernels, r = 1..dot_rows (0: none; the packed tile then
  // serves few rows too).
  int dot_rows = 0;
  int dot_cols[kMaxDotRows + 1] = {};
  Bf16DotNtFn dot[kMaxDotRows + 1] = {};
  Bf16DotNtFn dot1[kMaxDotRows + 1] = {};
  float (*peak)(int64_t iters) = nullptr;  // the dot-product ceiling, as KernelTable::peak_fma
  int peak_flops_per_iter = 0;
};

// softmax.hpp / exp.hpp: row kernels (contracts there).
struct SoftmaxKernels {
  void (*exp)(int64_t n, const float* x, float* y);
  void (*exp_nonpositive)(int64_t n, const float* x, float* y);  // x <= 0 (softmax's x - max)
  // exp(scale x - shift): the form the softmax kernels and fused attention run (ShiftedExp).
  void (*exp_shifted)(int64_t n, const float* x, float scale, float shift, float* y);
  void (*tanh)(int64_t n, const float* x, float* y);
  void (*stats_stream)(int64_t n, const float* x, float scale, float* max, float* sum);
  void (*stats_rows)(int64_t rows, int64_t n, const float* x, int64_t ldx, float scale, float* max,
                     float* sum);
  void (*softmax_rows_cached)(int64_t rows, int64_t n, const float* x, int64_t ldx, float scale,
                              float* y, int64_t ldy, float* max, float* sum, float* stream);
  void (*attention_rows)(int64_t rows, int64_t n, float* s, int64_t lds, const float* m, float* max,
                         float* sum);
  float (*max)(int64_t n, const float* x);
  float (*exp_sum)(int64_t n, const float* x, float scale, float shift, float* y_or_null);
  void (*affine)(int64_t n, const float* x, float mul, float add, float* y);
};

// quant.hpp: the block types q8_0 and q4_0 (contract there). Index t: 0 q8_0, 1 q4_0.
inline constexpr int kQBlock = 32;  // values per block
inline constexpr int kQBlockBytes[2] = {34, 18};
// The rows after a call's n rows, for its prefetches only: row n + i at at + i ld, i < rows (the
// next page's first rows, or the next tile's); rows = 0: none (the sequence ends there).
// spread: rows its caller reads later (a short call's: another head's run of the page), row i at
// spread + i ld, i < spread_rows, which a kernel that takes them prefetches a share per step of
// its loop, into L1 where spread_l1 (issued at once before the call, they held the core's miss
// buffers while the call's own loads waited).
struct NextRows {
  const uint8_t* at = nullptr;
  int64_t rows = 0;
  const uint8_t* spread = nullptr;
  int64_t spread_rows = 0;
  bool spread_l1 = false;
};
// Query rows rounded to q8_0 for the integer dot kernels: row r, block b has its 32 int8 at
// qs[r ld + 32 b] and its scale (the f16-rounded one, widened) at d[r blocks + b].
struct QuantRows {
  const int8_t* qs;
  const float* d;
  int64_t ld, blocks;
  // K comes from memory (decode past the last-level cache): a kernel that prefetches its rows
  // ahead fetches them into L2 rather than L1. A hint: the results do not depend on it.
  bool streamed = false;
  NextRows next{};  // K's rows after the call's (prefetched only)
  // The sum of each block's int8 at sums[r blocks + b] (as d), for the kernels that take their
  // keys unsigned and subtract the offset's share; null: each call sums them again (a cost as
  // large as the products' when a call holds 16 keys: a paged cache's small pages).
  const int32_t* sums = nullptr;
};
// S[r][j] = alpha sum_b dq[r][b] dk[j][b] sum_i q[r][32 b + i] k[j][32 b + i] for r < R rows
// (the table's index) and j < n keys, K's rows of `blocks` blocks ldk bytes apart.
using QuantDotFn = void (*)(const QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n, float* s,
                            int64_t lds, float alpha);
// O[r][0:32 blocks] += sum_j<n p[r][j] V[j] for r < R rows, V's rows of `blocks` blocks ldv
// bytes apart dequantized in registers (p rows ldp apart, O rows ldo apart); next: V's rows after
// the call's (prefetched only).
using QuantPvFn = void (*)(int64_t n, const float* p, int64_t ldp, const uint8_t* v, int64_t ldv,
                           int64_t blocks, float* o, int64_t ldo, NextRows next);
// qgemm_vnni512.hpp, qgemm_avx2.hpp, qgemm_sdot.hpp, qgemm_smmla.hpp: block-type weights packed for
// an integer GEMM tile (the table's QuantKernels::gemm_pack), against rows of A rounded to q8_0.
// Row r's block b: 32 int8 at qs[r ld + 32 b], its scale d[r blocks + b] and start[r blocks + b] =
// bias - off sum_i qs (off: the weights' offset in the panels, QuantKernels::gemm_offset; bias:
// QuantKernels::gemm_start_bias, both per type). Where the table sets QuantKernels::gemm_a_words,
// the R rows of a call are interleaved by words of G = gemm_group bytes instead (ld unused): word w
// (values G w..G w + G - 1) of row r's block b at qs[32 R b + G (w R + r)], d and start at [R b +
// r]. For R = 1 both layouts are the same.
struct QGemmRows {
  const int8_t* qs;
  int64_t ld;
  const float* d;
  const int32_t* start;
  int64_t blocks;
};
// C[r][0:cols] = alpha sum_b (dq dk) isum_b (+ beta C) for r < R rows (the table's index) and one
// packed panel of gemm_nr columns (cols <= gemm_nr written); beta = 0 never reads C.
using QGemmFn = void (*)(const QGemmRows& a, const uint8_t* panel, float* c, int64_t ldc,
                         int64_t cols, float alpha, float beta);
// cols <= gemm_nr weight rows of `blocks` blocks (ldb bytes apart, ldb gemm_nr < 2^31) into
// one panel of gemm_block_bytes[t] bytes per block (the missing columns' scales zero).
using QGemmPackFn = void (*)(int64_t cols, int64_t blocks, const uint8_t* b, int64_t ldb,
                             uint8_t* panel);
struct QuantKernels {
  // n values (a multiple of kQBlock) to and from blocks (tessera_convert's rounding).
  void (*quantize[2])(int64_t n, const float* x, uint8_t* y);
  void (*dequantize[2])(int64_t n, const uint8_t* x, float* y);
  // Rows of d floats (d a multiple of kQBlock, rows ldx apart) rounded to q8_0 into QuantRows'
  // layout (qs ld = d, scales widened): the queries of the integer dot kernels.
  void (*quantize_rows)(int64_t rows, int64_t d, const float* x, int64_t ldx, int8_t* qs,
                        float* scales);
  int dot_rows;  // R = 1..dot_rows
  // dot[][] prefetch QuantRows::next's spread rows over their loop (pv[][] always do); else
  // their caller issues those rows before the call.
  bool dot_spreads = false;
  int dot_keys[2][kMaxDotRows + 1] = {{2, 2, 2, 2, 2}, {2, 2, 2, 2, 2}};  // of dot[t][R], a step
  QuantDotFn dot[2][kMaxDotRows + 1];
  QuantPvFn pv[2][kMaxDotRows + 1];
  // The same contract for weight rows as stored, thousands of values long (a GEMV): a key at a
  // time through all its blocks, one sequential stream; for R = 1..gemv_rows[t] (0: none, the
  // dot kernels serve).
  int gemv_rows[2] = {};
  const char* gemv_name = "";  // their instruction
  QuantDotFn gemv[2][kMaxDotRows + 1] = {};
  // The packed GEMM tile: gemm[t][r] for r = 1..gemm_mr rows by gemm_nr columns, panels of
  // gemm_block_bytes[t] bytes per block packed by gemm_pack[t]; gemm_mr 0: none (the dot kernels
  // serve every shape).
  int gemm_mr = 0, gemm_nr = 0;
  int64_t gemm_block_bytes[2] = {};
  // The weights' offset in the panels (QGemmRows::start = -offset sum q) and the instruction.
  int32_t gemm_offset[2] = {};
  // Bytes of k a column holds in turn within a group of its panel: 4 (vpdpbusd, sdot, the
  // vpmaddubsw tile: column c in lane c) or 8 (smmla: columns in pairs, 8 values each).
  int gemm_group = 4;
  // A's rows interleaved by words (QGemmRows): a tile that broadcasts A's words then reads every
  // row's from one pointer at fixed offsets, where row pointers took more registers than x86 has;
  // smmla's row pairs are then one load each instead of two loads and two zips.
  bool gemm_a_words = false;
  // Added to every start (QGemmRows): 0x4B400000, the bits of 1.5 2^23, lets a tile read its
  // int32 sums (|sum| < 2^22) as floats by one subtraction where a conversion costs two.
  int32_t gemm_start_bias[2] = {};
  const char* gemm_name = "";
  QGemmFn gemm[2][kMaxMR + 1] = {};
  // Where set, gemm_wide[t][r] takes two adjacent panels of one packing at once (the second
  // `blocks` blocks after the first, gemm_nr < cols <= 2 gemm_nr): a broadcast of A shared by
  // twice the columns, where the loads bound the one-panel tile. From how many rows the executor
  // takes it is a tuning row's (Tuning::quant_gemm_pair_rows).
  QGemmFn gemm_wide[2][kMaxMR + 1] = {};
  QGemmPackFn gemm_pack[2] = {};
  // The integer dot-product ceiling (benchmarks' "int8_peak%"), as KernelTable::peak_fma: iters
  // x peak_ops_per_iter operations (a multiply and an add per product); null where none.
  float (*peak)(int64_t iters) = nullptr;
  int peak_ops_per_iter = 0;
  const char* dot_name;      // the instruction the dot kernels are built on ("vpdpbusd", "sdot")
  const char* feature = "";  // a CPU feature the kernels need beyond their table's, if any
};

// convert.hpp: float32 <-> f16 / bf16 arrays (contract there).
struct ConvertKernels {
  void (*f32_to_f16)(int64_t n, const float* x, uint16_t* y);
  void (*f16_to_f32)(int64_t n, const uint16_t* x, float* y);
  void (*f32_to_bf16)(int64_t n, const float* x, uint16_t* y);
  void (*bf16_to_f32)(int64_t n, const uint16_t* x, float* y);
};

// rope.hpp: the rotary embedding's table of one position and its rotation of a token's heads
// (contract there); [0] NEOX pairs, [1] GPTJ pairs.
struct RopeKernels {
  void (*angles[2])(int64_t half, const double* freq, double pos, float* cs);
  void (*rotate[2])(int64_t heads, int64_t ld, int64_t half, const float* cs, float* x);
};

// norm.hpp: a decoder block's row kernels (contract there).
using NormRowFn = void (*)(int64_t n, float* x, const float* r, const float* gain,
                           const float* bias, float eps, float* y);
using ActivationRowFn = void (*)(int64_t n, const float* g, const float* u, float* y);
struct NormActKernels {
  NormRowFn rms, layer;
  ActivationRowFn act[2];  // [0] SiLU, [1] GELU (tanh form); times u where u is given
};

struct KernelTable {
  const char* name;  // "avx512", "avx2", "sse2", "neon64_v82", "neon64", "neon32"
  int simd_floats;   // floats per vector register

  // The FMA ceiling: runs iters x peak_flops_per_iter floating-point operations.
  float (*peak_fma)(int64_t iters);
  int peak_flops_per_iter;

  GemmKernels gemm;
  HalfGemmKernels hgemm;
  Bf16DotKernels bf16dot;
  SoftmaxKernels softmax;
  ConvertKernels convert;
  QuantKernels quant;
  RopeKernels rope;
  NormActKernels norm_act;
};

// Defined only where the build compiles the ISA; src/runtime/dispatch.cpp decides which exist.
const KernelTable& avx512_table();
const KernelTable& avx2_table();
const KernelTable& sse2_table();
const KernelTable& neon64_v82_table();
const KernelTable& neon64_table();
const KernelTable& neon32_table();
// Parts of the avx512 table instantiated in files of their own (compiled in parallel).
const GemmKernels& avx512_deep_gemm_kernels();
void avx512_fill_table_rest(KernelTable& t);
const QuantKernels& avx512_quant_kernels();
// The bf16 dot-product kernels the dispatcher adds to a table where the CPU has their feature:
// the avx512 table's (AVX512_BF16) and the neon64_v82 table's (FEAT_BF16).
const Bf16DotKernels& avx512_bf16_dot_kernels();
const Bf16DotKernels& neon64_bf16_dot_kernels();
// The integer dot kernels of the quantized types on AVX512-VNNI (vpdpbusd), added to the avx512
// table where the CPU has the feature.
const QuantKernels& avx512_vnni_quant_kernels();
// The quantized types with FEAT_I8MM's smmla dot kernels, put in the neon64_v82 table where the
// CPU has the feature.
const QuantKernels& neon64_i8mm_quant_kernels();

}  // namespace tessera::arch
