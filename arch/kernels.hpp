// The kernel-table interface: the only header arch/ and src/ share. One table per ISA, each
// defined in that ISA's translation unit (arch/x86/avx512.cpp, ..., arch/arm/neon32.cpp) and
// compiled with that ISA's flags; src/ reaches kernels only through these pointers.
#pragma once

#include <cstdint>

namespace tessera::arch {

struct KernelTable {
  const char* name;  // "avx512", "avx2", "sse2", "neon64", "neon32", "scalar"
  int simd_floats;   // floats per vector register

  // The FMA ceiling: runs iters x peak_flops_per_iter floating-point operations.
  float (*peak_fma)(int64_t iters);
  int peak_flops_per_iter;
};

// Defined only where the build compiles the ISA; src/dispatch.cpp decides which exist.
const KernelTable& avx512_table();
const KernelTable& avx2_table();
const KernelTable& sse2_table();
const KernelTable& neon64_table();
const KernelTable& neon32_table();
const KernelTable& scalar_table();

}  // namespace tessera::arch
