// GEMM against weights stored in a block type (q8_0 or q4_0): C = alpha op(A) B^T + beta C with
// A float32 (m x k), B n x k stored in blocks of 32 along k (a Linear layer's [out][in] weight
// rows, ggml's layout), C float32. Each row of A is rounded to q8_0 once per call (the table's
// quantize_rows, as fused attention rounds its queries) and multiplied by the table's integer dot
// kernels (arch/common/quant.hpp: QuantKernels::dot, the same kernels as the quantized K of fused
// attention): per block an exact int32 dot product, times the two scales in float32.
#pragma once

#include <cstdint>

#include "runtime/check.hpp"
#include "runtime/tuning.hpp"

namespace tessera::detail {

struct QuantGemm {
  bool ta;  // A stored k x m
  int64_t m, n, k;
  float alpha, beta;
  const float* a;
  int64_t lda;
  DType b_type;  // q8_0 or q4_0
  const uint8_t* b;
  int64_t ldb;  // values between rows of B (a multiple of 32)
  float* c;
  int64_t ldc;
  // B already in the table's tile panels (sgemm_pack_bq; b and ldb unused), or null.
  const uint8_t* panels = nullptr;
};

// The planner's split, from the shape and the tuning row alone: tasks of `rows` rows of C by
// `cols` columns (a task's weight rows stay in L2 while its rows go by in groups of the dot
// kernels' R). few_rows: one row block (decode), the tasks over columns only.
// packed: from quant_gemm_pack_rows rows on a table with a packed GEMM tile (QuantKernels::gemm): B
// packed once per call into its panels, then the tile over row groups and panels; otherwise the dot
// kernels read B as stored.
// gemv: the table's GEMV kernels (QuantKernels::gemv) instead of its dot kernels, for up to
// gemv_rows rows of A against weight rows of at least quant_gemv_min_blocks blocks.
struct QuantGemmPlan {
  bool few_rows, packed, gemv, parallel;
  int64_t rows, cols;
  int64_t pair_rows;  // tiles of this many rows or more take panel pairs (0: never)
};
QuantGemmPlan plan_quant_gemm(const arch::KernelTable& kt, const Tuning& tn, const QuantGemm& q);

Status gemm_quant(const arch::KernelTable& kt, const QuantGemm& q);

// Up to kMaxSharedProducts products of one A (the same m, k, a, lda and ta) against prepacked
// panels of one block type (the projections of one input): A rounded once and every product's tasks
// in one parallel region; each C bitwise the one gemm_quant writes. Products that do not share so
// run one by one.
inline constexpr int kMaxSharedProducts = 3;
Status gemm_quant_shared_a(const arch::KernelTable& kt, const QuantGemm* qs, int count);

// B (n rows of k values, ldb apart) packed for sgemm_packed: into the table's tile panels where
// it has a tile (and ldb fits its packer), otherwise its rows as stored, ldb = k. panel_nr: the
// layout's panel width, 0 for rows as stored. Bytes: quant_packed_bytes.
int quant_panel_nr(const arch::KernelTable& kt, DType t, int64_t ldb);
int64_t quant_packed_bytes(const arch::KernelTable& kt, DType t, int64_t n, int64_t k, int nr);
void pack_quant_b(const arch::KernelTable& kt, DType t, int64_t n, int64_t k, const uint8_t* b,
                  int64_t ldb, int nr, uint8_t* out);

}  // namespace tessera::detail
