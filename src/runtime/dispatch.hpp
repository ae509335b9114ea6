// Runtime choice of the kernel table: the best the CPU runs (AVX-512 > AVX2+FMA > SSE2 on
// x86-64; v8.2 with fp16 and dotprod > v8.0 on AArch64; NEON-VFPv4 on ARMv7), from the detected
// features (hardware.hpp), overridable by TESSERA_ISA or tessera_set_isa().
#pragma once

#include "arch/kernels.hpp"
#include "runtime/hardware.hpp"

namespace tessera::detail {

const arch::KernelTable& active_table();
// The table of that name if this build has it and this CPU can run it, else nullptr.
const arch::KernelTable* find_table(const char* name);
// The names of the tables this build has that a machine with hw's features runs, best first;
// returns how many (at most capacity).
int tables_for(const Hardware& hw, const char** names, int capacity);
// The features the table of that name needs ("avx2 fma"), "" for an unknown name.
const char* table_features(const char* name);

// Tests only (tests/mutant_test.cpp): makes t, a table of the tests' own (a real one with one
// kernel replaced by a mutant), the active table, and returns the one it replaced, which the
// test restores. No check: t must outlive its use and run on this CPU.
const arch::KernelTable* exchange_active_table_for_testing(const arch::KernelTable* t);

}  // namespace tessera::detail
