// The neon32 kernel table: every template kernel instantiated for xsimd::neon.
// Compiled with this ISA's flags only (CMakeLists.txt); called only where CPUID allows.
#include "../common/table.hpp"

namespace tessera::arch {

const KernelTable& neon32_table() {
  static const KernelTable table = make_table<xsimd::neon, kNeon32Gemm>("neon32");
  return table;
}

}  // namespace tessera::arch
