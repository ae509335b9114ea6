// The avx512 table's kernels of the block types (quantizers, dot kernels without VNNI, P V),
// instantiated apart from the rest of the table so that they compile in parallel with it (see
// avx512_rest.cpp). Same flags as avx512.cpp.
#include "../common/quant.hpp"
#include "quant_x86.hpp"

namespace tessera::arch {

const QuantKernels& avx512_quant_kernels() {
  static const QuantKernels kernels = make_quant_kernels<QuantAvx512>();
  return kernels;
}

}  // namespace tessera::arch
