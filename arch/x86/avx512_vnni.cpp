// The avx512 table's integer dot kernels of the quantized types (vpdpbusd), compiled with
// AVX512-VNNI on top of the avx512 flags (CMakeLists.txt) and added to the table by
// src/runtime/dispatch.cpp where CPUID has that feature; apart, so that nothing else in the
// table is compiled for it. The dot kernels are quant_vnni512.hpp's (two blocks a zmm, no sign
// work); the quantizers and P V are the avx512 ones.
#include "../common/quant.hpp"
#include "quant_vnni512.hpp"
#include "quant_x86.hpp"

namespace tessera::arch {

const QuantKernels& avx512_vnni_quant_kernels() {
  static const QuantKernels kernels = [] {
    QuantKernels k = make_quant_kernels<QuantAvx512Vnni>();
#if !defined(TESSERA_NO_QUANTIZED)
    k.dot[0][1] = &quant_dot_vnni512<0, 1>, k.dot[0][2] = &quant_dot_vnni512<0, 2>;
    k.dot[0][3] = &quant_dot_vnni512<0, 3>, k.dot[0][4] = &quant_dot_vnni512<0, 4>;
    k.dot[1][1] = &quant_dot_vnni512<1, 1>, k.dot[1][2] = &quant_dot_vnni512<1, 2>;
    k.dot[1][3] = &quant_dot_vnni512<1, 3>, k.dot[1][4] = &quant_dot_vnni512<1, 4>;
    static_assert(kMaxDotRows == 4, "a kernel per row count");
#endif
    k.feature = "avx512_vnni";
    return k;
  }();
  return kernels;
}

}  // namespace tessera::arch
