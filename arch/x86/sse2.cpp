// The sse2 kernel table: every template kernel instantiated for xsimd::sse2.
// Compiled with this ISA's flags only (CMakeLists.txt); called only where CPUID allows.
#include "../common/table.hpp"
#include "quant_x86.hpp"

namespace tessera::arch {

const KernelTable& sse2_table() {
  static const KernelTable table = [] {
    // SSE2 has no 16-bit float instructions: the portable widening.
    KernelTable t = make_table<xsimd::sse2, kSse2Gemm, ScalarF16Widen<xsimd::sse2>,
                               ShiftBf16Widen<xsimd::sse2>>("sse2");
    t.quant = make_quant_kernels<QuantSse2>();
    return t;
  }();
  return table;
}

}  // namespace tessera::arch
