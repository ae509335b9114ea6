// The avx512 kernel table: every template kernel instantiated for xsimd::avx512f.
// Compiled with this ISA's flags only (CMakeLists.txt); called only where CPUID allows.
#include <cpuid.h>

#include "../common/table.hpp"

namespace tessera::arch {

namespace {
// Zen 2..5 load a vector that straddles two cache lines at the cost of one; Intel cores since
// Skylake-SP take two (blocking.hpp: kAvx512Gemm, the small tiles).
bool splits_lines_cheaply() { return __builtin_cpu_is("amd"); }
// Zen 5 (AMD family 1Ah) has the load slots for a prefetch per line beside the wide kernels' B
// loads, and its hardware prefetcher alone left a B streamed from L3 ~15% short of the load
// loop's rate; Zen 4 lost with them (gemm_ukernel.hpp: kWideBAheadRows). GCC 12 has no name
// for family 1Ah, hence CPUID.
bool prefetches_streamed_b() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__builtin_cpu_is("amd") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned base = (eax >> 8) & 0xf, extended = (eax >> 20) & 0xff;
  return base + (base == 0xf ? extended : 0) >= 0x1a;
}
}  // namespace

const KernelTable& avx512_table() {
  static const GemmKernels deep = make_tile_kernels<xsimd::avx512f, kAvx512DeepGemm>();
  static const KernelTable table = [] {
    KernelTable t = make_table<xsimd::avx512f, kAvx512Gemm>("avx512");
    t.gemm.deep = &deep;
    t.gemm.small_b_in_place = splits_lines_cheaply();
    t.gemm.prefetch_streamed_b = prefetches_streamed_b();
    return t;
  }();
  return table;
}

}  // namespace tessera::arch
