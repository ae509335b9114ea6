// The avx512 table's bf16 dot-product kernels, compiled with AVX512_BF16 on top of the avx512
// flags (CMakeLists.txt) and added to the table by src/runtime/dispatch.cpp where CPUID has that
// feature; apart, so that nothing in the rest of the table is compiled for it.
#include "gemm_bf16_dot_avx512.hpp"

#include <utility>

namespace tessera::arch {
namespace {

// 14 x 32: the float32 tile's shape (blocking.hpp: kAvx512Gemm) with k in pairs.
constexpr int kMR = 14;

// k blocks of 1024 (512 pair steps): the B micro-panel (1024 k x 32 columns, 64 KB) is the
// float32 tile's (512 x 32 floats) in bytes and in k steps, streamed from L2 as that one is, and C
// is read and written once per 512 steps rather than per 128 (k blocks of 256 kept B in L1 but
// ran slower: C's round trips cost more than B's L2 reads). MC = 336 rows: the A block (336 x
// 1024 bf16, 672 KB) stays in a 1 MB L2 across the B panels. A task walks all its columns (no NC
// block): B is packed whole once.
constexpr int kKC = 1024, kMC = 24 * kMR;
// k <= 256 walks C by row strips: a tile is then ~500-1800 cycles of VDPBF16PS against its C
// (1.8 KB, a memory round trip when C is past L3), and C rows 16 KB apart down a panel touch a
// page per row; deeper blocks keep a B micro-panel down the row block (measurements: the commit
// that set this).
constexpr int kRowsOuterK = 256;

template <int... R>
void fill(Bf16DotKernels& d, std::integer_sequence<int, R...>) {
  ((d.packed[R + 1] = bf16_dot_packed<kMR, R + 1>), ...);
}

}  // namespace

const Bf16DotKernels& avx512_bf16_dot_kernels() {
  static const Bf16DotKernels kernels = [] {
    Bf16DotKernels d;
    d.feature = "avx512_bf16";
    d.mr = kMR, d.nr = kBf16DotNR;
    d.kc = kKC, d.mc = kMC, d.rows_outer_k = kRowsOuterK;
    fill(d, std::make_integer_sequence<int, kMR>());
    d.pack = pack_bf16_pairs;
    // 16 accumulators whatever the rows: 1 x 16, 2 x 8, 4 x 4 (3 rows: 3 x 4).
    d.dot_rows = 4;
    d.dot[1] = bf16_dot_nt<1, 16>, d.dot[2] = bf16_dot_nt<2, 8>;
    d.dot[3] = bf16_dot_nt<3, 4>, d.dot[4] = bf16_dot_nt<4, 4>;
    d.dot_cols[1] = 16, d.dot_cols[2] = 8, d.dot_cols[3] = 4, d.dot_cols[4] = 4;
    d.dot1[1] = bf16_dot_nt<1, 1>, d.dot1[2] = bf16_dot_nt<2, 1>;
    d.dot1[3] = bf16_dot_nt<3, 1>, d.dot1[4] = bf16_dot_nt<4, 1>;
    d.peak = bf16_dot_peak_loop;
    d.peak_flops_per_iter = kBf16DotPeakFlopsPerIter;
    return d;
  }();
  return kernels;
}

}  // namespace tessera::arch
