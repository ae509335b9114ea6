// The neon64_v82 table's bf16 dot-product kernels (FEAT_BF16: BFDOT), compiled with +bf16 on top
// of that table's flags (CMakeLists.txt) and added to it by src/runtime/dispatch.cpp where HWCAP2
// has bf16 (Neoverse V1 / N2, Cortex-A510 / A710 and later); apart, so that nothing else in the
// table is compiled for it.
#include <utility>

#include "../common/bf16_pairs.hpp"
#include "gemm_bf16_dot_neon64.hpp"

namespace tessera::arch {
namespace {

// 8 x 12: the float32 tile's shape (blocking.hpp: kNeon64Gemm) with k in pairs.
constexpr int kMR = 8;

// k blocks of 512 (256 pair steps): the B micro-panel (512 k x 12 columns, 12 KB) is the
// float32 tile's (256 x 12 floats) in bytes and in steps, in L1 (32-64 KB) while the A panels
// pass it. MC = 128 rows: the A block (128 x 512 bf16, 128 KB) is half of a 256 KB L2.
constexpr int kKC = 512, kMC = 16 * kMR;

template <int... R>
void fill(Bf16DotKernels& d, std::integer_sequence<int, R...>) {
  ((d.packed[R + 1] = bf16_dot_packed_neon64<kMR, R + 1>), ...);
}

}  // namespace

const Bf16DotKernels& neon64_bf16_dot_kernels() {
  static const Bf16DotKernels kernels = [] {
    Bf16DotKernels d;
    d.feature = "bf16";
    d.mr = kMR, d.nr = 4 * kBf16DotNeonNV;
    d.kc = kKC, d.mc = kMC;
    fill(d, std::make_integer_sequence<int, kMR>());
    d.pack = pack_bf16_pairs_portable;
    d.peak = bf16_dot_peak_neon64;
    d.peak_flops_per_iter = kBf16DotNeonPeakFlopsPerIter;
    return d;
  }();
  return kernels;
}

}  // namespace tessera::arch
