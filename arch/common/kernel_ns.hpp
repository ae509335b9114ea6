// The namespace arch/'s templates are compiled into: one per kernel table's translation unit
// (TESSERA_KERNEL_NS, set per file in CMakeLists.txt), inline in tessera::arch. Two tables built
// with different flags for the same xsimd arch (neon64 and neon64_v82) then never share an
// instantiation that the linker could merge, running v8.2 code in the v8.0 table.
#pragma once

#ifndef TESSERA_KERNEL_NS
#define TESSERA_KERNEL_NS k_default
#endif
