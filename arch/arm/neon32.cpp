// The neon32 kernel table (ARMv7-A, NEON + VFPv4): every template kernel instantiated for
// xsimd::neon, with the load-and-replicate micro-kernel for packed panels.
#include "../common/table.hpp"
#include "gemm_ukernel_neon32.hpp"
#include "quant_neon.hpp"
#include "widen_neon32.hpp"

namespace tessera::arch {

const KernelTable& neon32_table() {
  static const KernelTable table = [] {
    KernelTable t = make_table<xsimd::neon, kNeon32Gemm, Neon32F16Widen, Neon32Bf16Widen,
                               Neon32PackedKernel<kNeon32Gemm.mr, kNeon32Gemm.nv>>("neon32");
    t.quant = make_quant_kernels<QuantNeon>();
    return t;
  }();
  return table;
}

}  // namespace tessera::arch
