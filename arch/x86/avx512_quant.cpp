// The avx512 table's kernels of the block types (quantizers, dot kernels without VNNI, P V),
// instantiated apart from the rest of the table so that they compile in parallel with it (see
// avx512_rest.cpp). Same flags as avx512.cpp.
#include "../common/quant.hpp"
#include "quant_x86.hpp"
#include "quantize_rows_avx512.hpp"

namespace tessera::arch {

const QuantKernels& avx512_quant_kernels() {
  static const QuantKernels kernels = [] {
    QuantKernels k = make_quant_kernels<QuantAvx512>();
#if !defined(TESSERA_NO_QUANTIZED)
    k.quantize_rows = &quantize_q8_rows_avx512;
#endif
    return k;
  }();
  return kernels;
}

}  // namespace tessera::arch
