// The avx512 kernel table: every template kernel instantiated for xsimd::avx512f.
// Compiled with this ISA's flags only (CMakeLists.txt); called only where CPUID allows.
#include "../common/table.hpp"
#include "convert_x86.hpp"
#include "quant_x86.hpp"
#include "widen_x86.hpp"

namespace tessera::arch {

const KernelTable& avx512_table() {
  static const GemmKernels deep =
      make_tile_kernels<xsimd::avx512f, kAvx512DeepGemm, Avx512F16Widen, Avx512Bf16Widen>();
  static const KernelTable table = [] {
    KernelTable t =
        make_table<xsimd::avx512f, kAvx512Gemm, Avx512F16Widen, Avx512Bf16Widen>("avx512");
    t.gemm.deep = &deep;
    t.convert = make_convert_kernels<Avx512HalfLanes>();
    t.quant = make_quant_kernels<QuantAvx512>();  // VNNI: avx512_vnni.cpp
    return t;
  }();
  return table;
}

}  // namespace tessera::arch
