# Portable x86-64: baseline code (x86-64, SSE2) everywhere except the per-ISA kernel files, which
# the runtime dispatcher selects from CPUID (AVX-512 > AVX2+FMA > SSE2). The binary runs on any
# x86-64 CPU. This is also what the default native build does; the file exists for packagers who
# want to say so explicitly and to pin the compiler.
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER gcc)
set(CMAKE_CXX_COMPILER g++)
set(CMAKE_C_FLAGS_INIT "-march=x86-64 -mtune=generic")
set(CMAKE_CXX_FLAGS_INIT "-march=x86-64 -mtune=generic")
