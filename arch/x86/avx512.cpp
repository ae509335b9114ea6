// The avx512 kernel table: every template kernel instantiated for xsimd::avx512f (its tiles here,
// its deep tile and the rest in avx512_rest.cpp and its block-type kernels in avx512_quant.cpp,
// compiled in parallel).
// Compiled with this ISA's flags only (CMakeLists.txt); called only where CPUID allows.
#include "../common/table.hpp"
#include "widen_x86.hpp"

namespace tessera::arch {

const KernelTable& avx512_table() {
  static const KernelTable table = [] {
    KernelTable t =
        make_table_tiles<xsimd::avx512f, kAvx512Gemm, Avx512F16Widen, Avx512Bf16Widen>("avx512");
    avx512_fill_table_rest(t);
    t.gemm.deep = &avx512_deep_gemm_kernels();
    t.quant = avx512_quant_kernels();  // VNNI: avx512_vnni.cpp
    return t;
  }();
  return table;
}

}  // namespace tessera::arch
