// The avx512 kernel table: every template kernel instantiated for xsimd::avx512f.
// Compiled with this ISA's flags only (CMakeLists.txt); called only where CPUID allows.
#include "../common/table.hpp"

namespace tessera::arch {

const KernelTable& avx512_table() {
  static const KernelTable table = make_table<xsimd::avx512f, kAvx512Gemm>("avx512");
  return table;
}

}  // namespace tessera::arch
