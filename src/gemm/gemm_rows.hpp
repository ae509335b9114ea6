// The few-row executors (src/gemm/gemm_rows.cpp), run by gemm_execute for the dot, wide,
// wide_k_chunks and prepacked_row paths of a plan.
#pragma once

#include "gemm/gemm_driver.hpp"

namespace tessera::detail {

// C = alpha A B^T + beta C, few rows of A: dot products along k, K read in place.
void gemm_dot(const arch::GemmKernels& kt, const GemmProblem& p, bool parallel);
// C = alpha A B + beta C, at most kMaxWideRows rows, by columns; stream: B streamed row by row.
// given: a serial product's scratch of gemm_wide_floats (else reserved here).
Status gemm_wide(const arch::GemmKernels& kt, const GemmProblem& p, bool parallel, bool stream,
                 float* given = nullptr);
size_t gemm_wide_floats(const arch::GemmKernels& kt, const GemmProblem& p, bool parallel,
                        bool stream);
// The same over fixed chunks of k (plan_gemm: kWideKChunk), the partial sums added in chunk
// order; b_streams: the kernels that prefetch B.
// given: a serial product's scratch of gemm_wide_k_chunks_serial_floats.
Status gemm_wide_k_chunks(const arch::GemmKernels& kt, const GemmProblem& p, bool parallel,
                          bool b_streams, float* given = nullptr);
size_t gemm_wide_k_chunks_serial_floats(const arch::GemmKernels& kt, const GemmProblem& p);
// C = alpha A B + beta C for m <= kt.row_panels_rows rows of A and a prepacked B (p.b_packed or
// p.b_packed16, kt's blocking): each thread a contiguous share of the panels over every KC
// block, several panels read at once.
void gemm_prepacked_row(const arch::GemmKernels& kt, const GemmProblem& p, bool parallel);

}  // namespace tessera::detail
