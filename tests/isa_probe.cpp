// Prints the kernel table and CPU class Tessera picks on this machine, and with arguments
// (table [class [dot]]) exits 1 unless they are the ones named (dot: the instruction of the block
// types' dot kernels): the dispatch tests run it under qemu's CPU models (tests/CMakeLists.txt).
#include <cstdio>
#include <cstring>

#include "src/runtime/dispatch.hpp"
#include "src/runtime/hardware.hpp"
#include "src/runtime/tuning.hpp"
#include "tessera/tessera.h"

int main(int argc, char** argv) {
  using namespace tessera::detail;
  const Hardware& hw = hardware();
  const char* table = tessera_isa_name();
  const char* cls = cpu_class_name(active_tuning().cpu_class);
  std::printf("table %s, class %s, features", table, cls);
  for (uint32_t f = 0; f < uint32_t(Feature::count); ++f)
    if (hw.has(Feature(f))) std::printf(" %s", feature_name(Feature(f)));
  const char* dot = active_table().quant.dot_name ? active_table().quant.dot_name : "none";
  std::printf(", part 0x%x, sve %d bytes, block dot %s\n", hw.arm_part, hw.sve_bytes, dot);
  if (argc > 1 && std::strcmp(argv[1], table) != 0) {
    std::printf("expected table %s\n", argv[1]);
    return 1;
  }
  if (argc > 2 && std::strcmp(argv[2], cls) != 0) {
    std::printf("expected class %s\n", argv[2]);
    return 1;
  }
  if (argc > 3 && std::strcmp(argv[3], dot) != 0) {
    std::printf("expected block dot %s\n", argv[3]);
    return 1;
  }
  return 0;
}
