// The neon64_v82 table's quantized types with FEAT_I8MM's smmla dot kernels (quant_smmla.hpp)
// and GEMM tile (qgemm_smmla.hpp),
// compiled with +i8mm on top of that table's flags (CMakeLists.txt) and put in the table by
// src/runtime/dispatch.cpp where HWCAP2 has i8mm (Neoverse V1 / N2, Cortex-A510 / A710 and
// later); apart, so that nothing else in the table is compiled for it. The quantizers and P V
// are the v8.2 ones, rebuilt here.
#include "../common/quant.hpp"
#include "qgemm_smmla.hpp"
#include "quant_gemv_sdot.hpp"
#include "quant_neon.hpp"
#include "quant_smmla.hpp"

namespace tessera::arch {

const QuantKernels& neon64_i8mm_quant_kernels() {
  static const QuantKernels kernels = [] {
    QuantKernels k = make_quant_kernels<QuantNeonDot>();
#if !defined(TESSERA_NO_QUANTIZED)
    k.dot[0][1] = &quant_dot_smmla<0, 1>, k.dot[0][2] = &quant_dot_smmla<0, 2>;
    k.dot[0][3] = &quant_dot_smmla<0, 3>, k.dot[0][4] = &quant_dot_smmla<0, 4>;
    k.dot[1][1] = &quant_dot_smmla<1, 1>, k.dot[1][2] = &quant_dot_smmla<1, 2>;
    k.dot[1][3] = &quant_dot_smmla<1, 3>, k.dot[1][4] = &quant_dot_smmla<1, 4>;
    static_assert(kMaxDotRows == 4, "a kernel per row count");
    k.dot_name = "smmla";
#endif
    fill_gemv_sdot(k);  // (the weight rows' stream, not the products, bounds a GEMV)
    fill_qgemm_smmla(k, std::make_integer_sequence<int, kQGemmSmmlaMr>());
    k.feature = "i8mm";
    return k;
  }();
  return kernels;
}

}  // namespace tessera::arch
