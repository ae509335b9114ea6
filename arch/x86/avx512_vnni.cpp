// The avx512 table's integer dot kernels of the quantized types (vpdpbusd), compiled with
// AVX512-VNNI on top of the avx512 flags (CMakeLists.txt) and added to the table by
// src/runtime/dispatch.cpp where CPUID has that feature; apart, so that nothing else in the
// table is compiled for it. The dot kernels are quant_vnni512.hpp's (two blocks a zmm, no sign
// work); the quantizers and P V are the avx512 ones. The packed GEMM tile of block-type weights,
// 16 columns, and 32 over two panels for 3-6 rows, is qgemm_vnni512.hpp's.
#include "../common/quant.hpp"
#include "qgemm_vnni512.hpp"
#include "quant_gemv_vnni512.hpp"
#include "quant_vnni512.hpp"
#include "quant_x86.hpp"
#include "quantize_rows_avx512.hpp"

namespace tessera::arch {

namespace {

// 6 rows: the wide tile's register budget (qgemm_vnni512.hpp); the 16-column tile takes the same
// row tiles, A's words being interleaved per tile.
constexpr int kQGemmMr = 6;

template <int... R>
void fill_qgemm(QuantKernels& k, std::integer_sequence<int, R...>) {
  k.gemm_mr = kQGemmMr, k.gemm_nr = kQGemmNr, k.gemm_a_words = true;
  for (int t = 0; t < 2; ++t) k.gemm_block_bytes[t] = kQGemmBlockBytes[t];
  k.gemm_offset[0] = 128, k.gemm_offset[1] = 8;  // unsigned weights: q + 128, n = q + 8
  k.gemm_name = "vpdpbusd";
  ((k.gemm[0][R + 1] = &qgemm_vnni512<0, R + 1>), ...);
  ((k.gemm[1][R + 1] = &qgemm_vnni512<1, R + 1>), ...);
  ((k.gemm_wide[0][R + 1] = &qgemm_vnni512_wide<0, R + 1>), ...);
  ((k.gemm_wide[1][R + 1] = &qgemm_vnni512_wide<1, R + 1>), ...);
  k.gemm_pack[0] = &qgemm_pack_vnni512<0>;
  k.gemm_pack[1] = &qgemm_pack_vnni512<1>;
  k.peak = &int8_dot_peak_loop;
  k.peak_ops_per_iter = kInt8PeakOpsPerIter;
}

}  // namespace

const QuantKernels& avx512_vnni_quant_kernels() {
  static const QuantKernels kernels = [] {
    QuantKernels k = make_quant_kernels<QuantAvx512Vnni>();
#if !defined(TESSERA_NO_QUANTIZED)
    // One row a key at a time, more rows sixteen keys at a time (quant_vnni512.hpp).
    k.dot[0][1] = &quant_dot_vnni512_key_rows<0, 1>, k.dot[0][2] = &quant_dot_vnni512<0, 2>;
    k.dot[0][3] = &quant_dot_vnni512<0, 3>, k.dot[0][4] = &quant_dot_vnni512<0, 4>;
    k.dot[1][1] = &quant_dot_vnni512_key_rows<1, 1>, k.dot[1][2] = &quant_dot_vnni512<1, 2>;
    k.dot[1][3] = &quant_dot_vnni512<1, 3>, k.dot[1][4] = &quant_dot_vnni512<1, 4>;
    static_assert(kMaxDotRows == 4, "a kernel per row count");
    for (int r = 2; r <= kMaxDotRows; ++r) k.dot_keys[0][r] = k.dot_keys[1][r] = vnni512::kKeys;
    k.dot_spreads = true;
    // Weight rows as stored, a key at a time (quant_gemv_vnni512.hpp), for one or two rows: from
    // three the sixteen-key kernels' sharing of each key across rows wins.
    k.gemv_rows[0] = k.gemv_rows[1] = 2;
    k.gemv_name = "vpdpbusd";
    k.gemv[0][1] = &quant_gemv_vnni512<0, 1>, k.gemv[0][2] = &quant_gemv_vnni512<0, 2>;
    k.gemv[1][1] = &quant_gemv_vnni512<1, 1>, k.gemv[1][2] = &quant_gemv_vnni512<1, 2>;
    fill_qgemm(k, std::make_integer_sequence<int, kQGemmMr>());
    k.quantize_rows = &quantize_q8_rows_avx512;
#endif
    k.feature = "avx512_vnni";
    return k;
  }();
  return kernels;
}

}  // namespace tessera::arch
