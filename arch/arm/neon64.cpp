// The neon64 kernel table: every template kernel instantiated for xsimd::neon64.
// Compiled with this ISA's flags only (CMakeLists.txt); called only where CPUID allows.
#include "../common/table.hpp"

namespace tessera::arch {

const KernelTable& neon64_table() {
  static const KernelTable table = make_table<xsimd::neon64>("neon64");
  return table;
}

}  // namespace tessera::arch
