# x86-64 tuned for the build machine's scheduling (-mtune=native) while keeping the portable
# baseline ISA: the kernels still come from the runtime-dispatched per-ISA files, so the binary
# stays correct on any x86-64 CPU.
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER gcc)
set(CMAKE_CXX_COMPILER g++)
set(CMAKE_C_FLAGS_INIT "-mtune=native")
set(CMAKE_CXX_FLAGS_INIT "-mtune=native")
