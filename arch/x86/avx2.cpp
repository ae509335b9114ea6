// The avx2 kernel table: every template kernel instantiated for xsimd::fma3<xsimd::avx2>, and
// the block-type weights' GEMM tile (qgemm_avx2.hpp), q4_0 dot kernel (quant_keys_avx2.hpp) and
// GEMV kernels (quant_gemv_avx2.hpp).
// Compiled with this ISA's flags only (CMakeLists.txt); called only where CPUID allows.
#include "../common/table.hpp"
#include "convert_x86.hpp"
#include "qgemm_avx2.hpp"
#include "quant_gemv_avx2.hpp"
#include "quant_keys_avx2.hpp"
#include "quant_x86.hpp"
#include "widen_x86.hpp"

namespace tessera::arch {

const KernelTable& avx2_table() {
  static const KernelTable table = [] {
    KernelTable t =
        make_table<xsimd::fma3<xsimd::avx2>, kAvx2Gemm, Avx2F16Widen, Avx2Bf16Widen>("avx2");
    t.convert = make_convert_kernels<F16cLanes>();
    t.quant = make_quant_kernels<QuantAvx2>();
#if !defined(TESSERA_NO_QUANTIZED)
    // q4_0 for 2-4 rows: eight keys a step (quant_keys_avx2.hpp)
    t.quant.dot[1][2] = &quant_dot_q4_avx2_keys<2>, t.quant.dot[1][3] = &quant_dot_q4_avx2_keys<3>;
    t.quant.dot[1][4] = &quant_dot_q4_avx2_keys<4>;
    static_assert(kMaxDotRows == 4, "a kernel per row count");
    for (int r = 2; r <= kMaxDotRows; ++r) t.quant.dot_keys[1][r] = avx2_keys::kKeys;
    t.quant.dot_spreads = true;
    // Weight rows as stored, a key at a time (quant_gemv_avx2.hpp): q8_0 for one or two rows,
    // q4_0 for one (two rows go faster eight keys a step, above).
    t.quant.gemv_rows[0] = 2, t.quant.gemv_rows[1] = 1;
    t.quant.gemv_name = "pmaddubsw";
    t.quant.gemv[0][1] = &quant_gemv_avx2<0, 1>, t.quant.gemv[0][2] = &quant_gemv_avx2<0, 2>;
    t.quant.gemv[1][1] = &quant_gemv_avx2<1, 1>;
#endif
    fill_qgemm_avx2(t.quant, std::make_integer_sequence<int, kQGemmAvx2Mr>());
    return t;
  }();
  return table;
}

}  // namespace tessera::arch
