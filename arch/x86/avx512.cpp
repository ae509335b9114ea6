// The avx512 kernel table: every template kernel instantiated for xsimd::avx512f.
// Compiled with this ISA's flags only (CMakeLists.txt); called only where CPUID allows.
#include "../common/table.hpp"

namespace tessera::arch {

namespace {
// Zen 2..5 load a vector that straddles two cache lines at the cost of one; Intel cores since
// Skylake-SP take two (blocking.hpp: kAvx512Gemm, the small tiles).
bool splits_lines_cheaply() { return __builtin_cpu_is("amd"); }
}  // namespace

const KernelTable& avx512_table() {
  static const GemmKernels deep = make_tile_kernels<xsimd::avx512f, kAvx512DeepGemm>();
  static const KernelTable table = [] {
    KernelTable t = make_table<xsimd::avx512f, kAvx512Gemm>("avx512");
    t.gemm.deep = &deep;
    t.gemm.small_b_in_place = splits_lines_cheaply();
    return t;
  }();
  return table;
}

}  // namespace tessera::arch
