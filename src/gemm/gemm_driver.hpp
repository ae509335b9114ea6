// The SGEMM driver: BLIS's five loops around the micro-kernel (NC, KC, MC, NR, MR), with oneTBB
// scheduling the (MC block x NR panel) grid, plus the packing-free paths for small and skinny
// shapes. K is never split across threads, so every element of C is summed in the same order
// whatever the thread count.
#pragma once

#include "arch/kernels.hpp"
#include "tessera/common.hpp"

namespace tessera::detail {

struct GemmProblem {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;  // unused when b_packed is set
  int64_t ldb = 0;
  float beta = 0.0f;
  float* c = nullptr;
  int64_t ldc = 0;
  const float* b_packed = nullptr;  // B packed by gemm_pack_b_full for the same table, k and n
  // Or B packed in 16 bits in the same layout (gemm_pack_b16_full): b16 = 0 for f16, 1 for
  // bf16, and b16_widen the table's conversion of them to float32, for the blocked path.
  const uint16_t* b_packed16 = nullptr;
  int b16 = 0;
  void (*b16_widen)(int64_t n, const uint16_t* x, float* y) = nullptr;
  // A column slice of a prepacked B (gemm_column_split): its columns are columns packed_j0 on
  // (a multiple of NR) of panels packed for packed_n columns (0: n, the whole B).
  int64_t packed_j0 = 0, packed_n = 0;
  bool prepacked() const { return b_packed != nullptr || b_packed16 != nullptr; }
};

// Runs one problem with TBB in the caller's arena (or serially, for callers that already
// parallelise over a batch).
Status gemm_run(const arch::GemmKernels& kt, const GemmProblem& p, bool parallel = true);

// The kernels of a blocked product k deep and n wide: the table's deep tile where it has one,
// k > 128 (below, rows go outside the panels: see gemm_blocked) and n spans at least 4 of its
// panels; the table's own tile otherwise (blocking.hpp: kAvx512DeepGemm has the measurements).
// A function of k and n alone, so that a prepacked B is laid out for the tile that reads it.
const arch::GemmKernels& blocked_kernels(const arch::GemmKernels& kt, int64_t k, int64_t n);

// The prepacked-B layout: for each KC block of k, the NR panels of all n columns.
size_t gemm_packed_b_floats(const arch::GemmKernels& kt, int64_t k, int64_t n);
void gemm_pack_b_full(const arch::GemmKernels& kt, bool tb, int64_t k, int64_t n, const float* b,
                      int64_t ldb, float* out);
// The same layout with 16-bit elements copied as they are (zero padding is +0 in f16 and bf16).
void gemm_pack_b16_full(const arch::GemmKernels& kt, bool tb, int64_t k, int64_t n,
                        const uint16_t* b, int64_t ldb, uint16_t* out);

}  // namespace tessera::detail
