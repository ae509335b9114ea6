// The portable kernel table, for CPUs without a SIMD table of their own: the templates
// instantiated for the widest arch xsimd finds at compile time (scalar code if none).
#include "../common/table.hpp"

namespace tessera::arch {

const KernelTable& scalar_table() {
  static const KernelTable table = make_table<xsimd::default_arch, kSse2Gemm>("scalar");
  return table;
}

}  // namespace tessera::arch
