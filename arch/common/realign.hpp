// Sequential vector reads p[0, W), p[W, 2W), ... that avoid loads split across cache lines where
// the ISA has the permute for it (arch/x86/realign_x86.hpp); elsewhere, unaligned loads.
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <cstdint>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include "../x86/realign_x86.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {
using x86::SequentialReader;
}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch

#else

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {
template <class Arch>
class SequentialReader {
  using B = xsimd::batch<float, Arch>;

 public:
  SequentialReader(const float* p, int64_t /*count*/) : p_(p) {}
  B next() {
    const B v = B::load_unaligned(p_);
    p_ += B::size;
    return v;
  }

 private:
  const float* p_ = nullptr;
};
}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch

#endif
