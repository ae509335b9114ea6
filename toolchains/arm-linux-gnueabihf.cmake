# ARMv7-A Linux, hard float, NEON with VFPv4 (so vfma exists), with Debian's cross compiler and
# multiarch libraries (dpkg --add-architecture armhf). Tests run under qemu-arm with the
# multiarch root (-L /); see aarch64-linux-gnu.cmake for why not the cross sysroot.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR armv7-a)
set(CMAKE_C_COMPILER arm-linux-gnueabihf-gcc)
set(CMAKE_CXX_COMPILER arm-linux-gnueabihf-g++)
set(CMAKE_LIBRARY_ARCHITECTURE arm-linux-gnueabihf)
set(CMAKE_C_FLAGS_INIT "-march=armv7-a -mfpu=neon-vfpv4 -mfloat-abi=hard")
set(CMAKE_CXX_FLAGS_INIT "-march=armv7-a -mfpu=neon-vfpv4 -mfloat-abi=hard")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-arm;-L;/)
# No CMAKE_FIND_ROOT_PATH: the target's libraries and CMake configs live in the multiarch
# directories (lib/<CMAKE_LIBRARY_ARCHITECTURE>), which CMake searches first and which hold no
# build-machine binaries; the architecture-independent headers are shared in /usr/include.
