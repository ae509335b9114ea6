// Builds an ISA's kernel table from the templates, instantiated for that xsimd arch. Included
// once per ISA translation unit, each compiled with its own flags.
#pragma once

#include <xsimd/xsimd.hpp>

#include "../kernels.hpp"
#include "peak.hpp"

namespace tessera::arch {

template <class Arch>
KernelTable make_table(const char* name) {
  KernelTable t{};
  t.name = name;
  t.simd_floats = static_cast<int>(xsimd::batch<float, Arch>::size);
  t.peak_fma = &peak_fma_loop<Arch>;
  t.peak_flops_per_iter = 2 * kPeakAccumulators * t.simd_floats;
  return t;
}

}  // namespace tessera::arch
