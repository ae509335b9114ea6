// Runtime choice of the kernel table: the best the CPU runs (AVX-512 > AVX2+FMA > SSE2 on
// x86-64; fixed at compile time on ARM), overridable by TESSERA_ISA or tessera_set_isa().
#pragma once

#include "../arch/kernels.hpp"

namespace tessera::detail {

const arch::KernelTable& active_table();
// The table of that name if this build has it and this CPU can run it, else nullptr.
const arch::KernelTable* find_table(const char* name);

}  // namespace tessera::detail
