// The neon64 kernel table: every template kernel instantiated for xsimd::neon64, with the
// lane-indexed FMA micro-kernel for packed panels.
#include "../common/table.hpp"
#include "convert_neon64.hpp"
#include "gemm_ukernel_neon64.hpp"
#include "quant_neon.hpp"
#include "quant_neon4.hpp"
#include "widen_neon64.hpp"

namespace tessera::arch {

const KernelTable& neon64_table() {
  static const KernelTable table = [] {
    KernelTable t =
        make_table<xsimd::neon64, kNeon64Gemm, Neon64F16Widen, Neon64Bf16Widen,
                   Neon64PackedKernel<xsimd::neon64, kNeon64Gemm.mr, kNeon64Gemm.nv>>("neon64");
    t.convert = make_convert_kernels<Neon64HalfLanes>();
    t.quant = make_quant_kernels<QuantNeon>();
    use_neon4_dots<QuantNeon>(t.quant);
    return t;
  }();
  return table;
}

}  // namespace tessera::arch
