// The neon64_v82 kernel table: ARMv8.2-A with FEAT_FP16 and dotprod (Cortex-A55, A76 and later,
// Neoverse N1), compiled with -march=armv8.2-a+fp16+dotprod (CMakeLists.txt) and chosen where
// HWCAP has asimdhp and asimddp (src/runtime/dispatch.cpp). Its fp32 kernels are neon64's templates
// rebuilt for v8.2, in a namespace of their own (kernel_ns.hpp); the half-precision and
// dot-product kernels join it with their element types, and tessera_hgemm's fp16-arithmetic tile.
#include "../common/table.hpp"
#include "convert_neon64.hpp"
#include "gemm_ukernel_neon64.hpp"
#include "hgemm_neon64_fp16.hpp"
#include "qgemm_sdot.hpp"
#include "quant_gemv_sdot.hpp"
#include "quant_neon.hpp"
#include "quant_neon4.hpp"
#include "widen_neon64.hpp"

namespace tessera::arch {

const KernelTable& neon64_v82_table() {
  static const KernelTable table = [] {
    KernelTable t =
        make_table<xsimd::neon64, kNeon64Gemm, Neon64F16Widen, Neon64Bf16Widen,
                   Neon64PackedKernel<xsimd::neon64, kNeon64Gemm.mr, kNeon64Gemm.nv>>("neon64_v82");
    t.convert = make_convert_kernels<Neon64HalfLanes>();
    t.quant = make_quant_kernels<QuantNeonDot>();
    use_neon4_dots<QuantNeonDot>(t.quant);
    fill_gemv_sdot(t.quant);
    fill_qgemm_sdot(t.quant, std::make_integer_sequence<int, kQGemmSdotMr>());
    fill_hgemm_neon64_fp16<8, 2>(t.hgemm, std::make_integer_sequence<int, 8>());
    return t;
  }();
  return table;
}

}  // namespace tessera::arch
