// The avx512 table's integer dot kernels of the quantized types (vpdpbusd on ymm), compiled with
// AVX512-VNNI on top of the avx512 flags (CMakeLists.txt) and added to the table by
// src/runtime/dispatch.cpp where CPUID has that feature; apart, so that nothing else in the
// table is compiled for it.
#include "../common/quant.hpp"
#include "quant_x86.hpp"

namespace tessera::arch {

const QuantKernels& avx512_vnni_quant_kernels() {
  static const QuantKernels kernels = [] {
    QuantKernels k = make_quant_kernels<QuantAvx512Vnni>();
    k.feature = "avx512_vnni";
    return k;
  }();
  return kernels;
}

}  // namespace tessera::arch
