// Parts of the avx512 table instantiated apart from its tiles (avx512.cpp) so that they compile
// in parallel: the deep tile (kAvx512DeepGemm, for long k), and the few-row, softmax, rotary
// and conversion kernels (fill_table_rest). As one translation unit the table was the build's
// critical path (47 s in Release, three minutes under ASan). Same flags as avx512.cpp.
#include "../common/table.hpp"
#include "convert_x86.hpp"
#include "widen_x86.hpp"

namespace tessera::arch {

const GemmKernels& avx512_deep_gemm_kernels() {
  static const GemmKernels deep =
      make_tile_kernels<xsimd::avx512f, kAvx512DeepGemm, Avx512F16Widen, Avx512Bf16Widen>();
  return deep;
}

void avx512_fill_table_rest(KernelTable& t) {
  fill_table_rest<xsimd::avx512f, kAvx512Gemm, Avx512F16Widen, Avx512Bf16Widen>(t);
  t.convert = make_convert_kernels<Avx512HalfLanes>();
}

}  // namespace tessera::arch
