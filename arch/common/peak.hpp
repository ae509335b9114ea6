// The FMA-throughput ceiling, for the benchmarks' "% of peak" (written once over the xsimd arch).
//
// kAccumulators independent chains acc = acc * x + y hide the FMA latency: a core that issues P
// FMAs per cycle with latency L needs P*L chains (2 x 4 = 8 on the x86-intel-avx512 class,
// 2 x 4 on Neoverse N1, 1 x 4..8 on Cortex-A53/A72); 12 covers all of them without spilling
// (16 ymm / 16 q registers on the smaller ISAs).
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <cstdint>

#include "fmadd.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

constexpr int kPeakAccumulators = 12;

template <class Arch>
float peak_fma_loop(int64_t iters) {
  using B = xsimd::batch<float, Arch>;
  B acc[kPeakAccumulators];
  for (int a = 0; a < kPeakAccumulators; ++a) acc[a] = B(1.0f + 0.01f * a);
  // x * acc + y stays near 1 for any iteration count: no overflow, no denormals.
  const B x(0.999999f), y(0.000001f);
  for (int64_t i = 0; i < iters; ++i) {
    for (int a = 0; a < kPeakAccumulators; ++a) acc[a] = fmadd(acc[a], x, y);
  }
  B sum = acc[0];
  for (int a = 1; a < kPeakAccumulators; ++a) sum += acc[a];
  return xsimd::hadd(sum);
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
