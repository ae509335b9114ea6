# AArch64 Linux (NEON) with Debian's cross compiler and multiarch libraries (dpkg
# --add-architecture arm64; libtbb-dev:arm64 etc.). Tests run under qemu-user with the multiarch
# root (-L /): with the cross packages' own sysroot (/usr/aarch64-linux-gnu) qemu 7.2 hangs at the
# first thread a program starts.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/)
# No CMAKE_FIND_ROOT_PATH: the target's libraries and CMake configs live in the multiarch
# directories (lib/<CMAKE_LIBRARY_ARCHITECTURE>), which CMake searches first and which hold no
# build-machine binaries; the architecture-independent headers are shared in /usr/include.
