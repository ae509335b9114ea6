// What the CPU is: its features, vendor and model, caches and cores, detected once (x86: CPUID
// and XGETBV; AArch64 and ARMv7: the kernel's HWCAP words and MIDR), and the CPU class that
// picks a row of the tuning table (src/runtime/tuning.cpp). This module and the tuning rows are the
// only places that know a vendor or a model; everything else asks for features or reads a row.
#pragma once

#include <cstdint>

namespace tessera::detail {

enum class Feature : uint32_t {
  // x86
  sse2,
  avx,
  fma,
  f16c,
  avx2,
  avx512f,
  avx512dq,
  avx512bw,
  avx512vl,
  avx512_bf16,
  avx512_fp16,
  amx_bf16,
  avx512_vnni,
  avx_vnni,
  // AArch64 (HWCAP / HWCAP2 names)
  asimd,
  fphp,
  asimdhp,
  asimddp,
  i8mm,
  bf16,
  sve,
  sve2,
  // ARMv7 (vfpv4 brings vfma and the half-precision conversions)
  neon,
  vfpv4,
  count
};
const char* feature_name(Feature f);

enum class Vendor : uint8_t { unknown, intel, amd, arm };

// The CPU classes of the tuning table, each a family of cores that share cache sizes and
// pipeline widths closely enough for one set of block sizes and thresholds.
enum class CpuClass : uint8_t {
  x86_generic,       // any x86-64 the rows below do not name (SSE2 / AVX2 machines)
  x86_intel_avx512,  // Skylake-SP .. Emerald Rapids
  x86_zen4,          // AMD family 19h with AVX-512
  x86_zen5,          // AMD family 1Ah
  arm_a53,           // in-order Cortex-A53 / A55
  arm_a72,           // Cortex-A57 / A72 / A73 and any ARMv8.0 core without fp16 + dotprod
  arm_a76,           // Cortex-A76 .. A78, X1, Neoverse N1: fp16 arithmetic and dotprod
  armv7,             // 32-bit ARM with NEON-VFPv4
  count
};
const char* cpu_class_name(CpuClass c);

struct Caches {
  int64_t l1d = 0, l2 = 0, l3 = 0;  // bytes per core (l2) or per cluster (l3); 0 = none
};

struct Hardware {
  uint64_t features = 0;  // bit i: Feature(i)
  Vendor vendor = Vendor::unknown;
  int family = 0, model = 0;  // x86 family and model (extended fields folded in)
  int arm_part = 0;           // MIDR_EL1 part number (0xd08: Cortex-A72), 0 if unknown
  int sve_bytes = 0;          // SVE vector length, 0 without SVE
  Caches caches;              // as the system reports them (tuning.hpp: plausible_caches)
  int cores = 1;

  bool has(Feature f) const { return (features >> static_cast<uint32_t>(f)) & 1u; }
  Hardware& with(Feature f) {
    features |= uint64_t(1) << static_cast<uint32_t>(f);
    return *this;
  }
};

// Reads the machine; no caching (tests call it, hardware() keeps the first answer).
Hardware detect_hardware();
const Hardware& hardware();

// The class a (detected or injected) machine belongs to.
CpuClass classify(const Hardware& hw);

}  // namespace tessera::detail
