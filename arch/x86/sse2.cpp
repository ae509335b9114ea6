// The sse2 kernel table: every template kernel instantiated for xsimd::sse2.
// Compiled with this ISA's flags only (CMakeLists.txt); called only where CPUID allows.
#include "../common/table.hpp"

namespace tessera::arch {

const KernelTable& sse2_table() {
  static const KernelTable table = make_table<xsimd::sse2, kSse2Gemm>("sse2");
  return table;
}

}  // namespace tessera::arch
