// The kernel registry: every micro-kernel of every table this CPU runs, described once by a
// name that says its whole configuration (f32_gemm_packed_14x32_mr14_avx512), its family (the
// contract it keeps, in arch/common's headers), its tile, its table and the CPU features that
// table needs. The testers iterate it (tests/ukernel_test.cpp): a kernel is tested on the
// whole edge lattice of its family by being in a table. TESSERA_VERBOSE names kernels the same
// way.
#pragma once

#include <string>
#include <vector>

#include "arch/kernels.hpp"

namespace tessera::detail {

enum class KernelFamily : uint8_t {
  gemm_packed,              // GemmPackedFn: A a packed panel (MR floats per k step), B packed
  gemm_packed_narrow,       // GemmPackedFn: one vector of columns out of a full-width packed B
  gemm_rows_bk,             // GemmPackedFn: A rows kAttentionBK floats apart, B packed
  gemm_strided,             // GemmStridedFn: A through strides, B rows ldb apart
  gemm_row_panels,          // GemmRowPanelsFn: one row, several prepacked B panels at once
  gemm_row_panels_b_f16,    // GemmRowPanels16Fn: the same with the panels in f16
  gemm_row_panels_b_bf16,   // GemmRowPanels16Fn: the same with the panels in bf16
  gemm_strided_narrow,      // GemmStridedFn: one vector of columns
  gemm_wide,                // GemmStridedFn: few rows, 1-8 vectors of columns
  gemm_wide_prefetching,    // GemmStridedFn: as gemm_wide, B prefetched ahead
  gemm_dot,                 // GemmDotFn: C = alpha A B^T + beta C, r x cols
  gemm_dot_stream,          // GemmDotFn: as gemm_dot, one row, B rows in order
  gemm_dot_b_f16,           // GemmDot16Fn: as gemm_dot with B in f16, widened in registers
  gemm_dot_b_bf16,          // GemmDot16Fn: as gemm_dot with B in bf16
  gemm_wide_b_f16,          // GemmStrided16Fn: few rows, up to 2 vectors, B in f16 read in place
  gemm_wide_b_bf16,         // GemmStrided16Fn: the same with B in bf16
  gemm_rows_stream,         // GemmStreamFn: few rows, B streamed row by row, n whole vectors
  gemm_rows_stream_b_f16,   // GemmStream16Fn: as gemm_rows_stream with B in f16
  gemm_rows_stream_b_bf16,  // GemmStream16Fn: the same with B in bf16
  hgemm_packed,             // HgemmPackedFn: f16 A, B and C, products summed in fp16
  gemm_bf16_dot_packed,     // Bf16DotPackedFn: bf16 A and B panels of k pairs, float32 C
  gemm_bf16_dot_nt,         // Bf16DotNtFn: few bf16 rows against bf16 B^T in place
  convert_f32_f16,          // ConvertKernels::f32_to_f16 (arch/common/convert.hpp)
  convert_f16_f32,          // ConvertKernels::f16_to_f32
  convert_f32_bf16,         // ConvertKernels::f32_to_bf16
  convert_bf16_f32,         // ConvertKernels::bf16_to_f32
  quant_dot_q8_0,           // QuantDotFn: q8_0 query rows against q8_0 keys (arch/common/quant.hpp)
  quant_dot_q4_0,           // QuantDotFn: q8_0 query rows against q4_0 keys
  quant_pv_q8_0,            // QuantPvFn: O += P V, V q8_0 dequantized in registers
  quant_pv_q4_0,            // QuantPvFn: the same with V q4_0
  quantize_q8_0,            // QuantKernels::quantize[0]: f32 -> q8_0 blocks
  quantize_q4_0,            // QuantKernels::quantize[1]: f32 -> q4_0 blocks
  dequantize_q8_0,          // QuantKernels::dequantize[0]
  dequantize_q4_0,          // QuantKernels::dequantize[1]
  quantize_rows_q8_0,       // QuantKernels::quantize_rows: query rows to int8 and scales
  quant_gemm_q8_0,          // QGemmFn: q8_0 rows against packed q8_0 weights, a tile of C
  quant_gemm_q4_0,          // QGemmFn: the same with q4_0 weights
  quant_gemm_pack_q8_0,     // QGemmPackFn: q8_0 weight rows into the tile's panel
  quant_gemm_pack_q4_0,     // QGemmPackFn: the same for q4_0
  rope_angles_neox,         // RopeKernels::angles[0]: a position's cosines and sines, halves
  rope_angles_gptj,         // RopeKernels::angles[1]: the same, pairs interleaved
  rope_rotate_neox,         // RopeKernels::rotate[0]: a token's heads turned, halves paired
  rope_rotate_gptj,         // RopeKernels::rotate[1]: neighbours paired
  norm_rms,                 // NormActKernels::rms: RMSNorm of a row, after the residual add
  norm_layer,               // NormActKernels::layer: LayerNorm of a row, the same
  act_silu,                 // NormActKernels::act[0]: SiLU, times the up row (SwiGLU)
  act_gelu_tanh,            // NormActKernels::act[1]: GELU's tanh form, times up (GeGLU)
  count
};
const char* family_name(KernelFamily f);

struct KernelRow {
  std::string name;
  const char* table = "";
  std::string features;  // what the CPU must have: the table's, and any the kernel adds
  KernelFamily family{};
  int rows = 0;              // r: rows of C
  int cols = 0;              // columns of C it writes at most (NR, or the dot kernel's exact count)
  int mr = 0;                // packed A: elements per k step of the panel
  int ldb = 0;               // packed B: elements per k step of the panel
  const void* fn = nullptr;  // the entry point, of the family's type
};

// Every kernel of every table this build has and this CPU runs, table by table.
std::vector<KernelRow> kernel_registry();

}  // namespace tessera::detail
