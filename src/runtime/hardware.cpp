#include "runtime/hardware.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__linux__) && (defined(__aarch64__) || defined(__arm__))
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif

namespace tessera::detail {
namespace {

constexpr const char* kFeatureNames[] = {
    "sse2",        "avx",      "fma",      "f16c",        "avx2",        "avx512f",
    "avx512dq",    "avx512bw", "avx512vl", "avx512_bf16", "avx512_fp16", "amx_bf16",
    "avx512_vnni", "avx_vnni", "asimd",    "fphp",        "asimdhp",     "asimddp",
    "i8mm",        "bf16",     "sve",      "sve2",        "neon",        "vfpv4"};
static_assert(sizeof(kFeatureNames) / sizeof(*kFeatureNames) == size_t(Feature::count));

constexpr const char* kClassNames[] = {"x86-generic", "x86-intel-avx512", "x86-zen4", "x86-zen5",
                                       "arm-a53",     "arm-a72",          "arm-a76",  "armv7"};
static_assert(sizeof(kClassNames) / sizeof(*kClassNames) == size_t(CpuClass::count));

void set(Hardware& hw, Feature f, bool on) {
  if (on) hw.with(f);
}

#if defined(__x86_64__) || defined(__i386__)
void detect_cpu(Hardware& hw) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return;
  const unsigned max_leaf = a;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4), std::memcpy(vendor + 4, &d, 4), std::memcpy(vendor + 8, &c, 4);
  hw.vendor = std::strcmp(vendor, "GenuineIntel") == 0   ? Vendor::intel
              : std::strcmp(vendor, "AuthenticAMD") == 0 ? Vendor::amd
                                                         : Vendor::unknown;
  __get_cpuid(1, &a, &b, &c, &d);
  const int base_family = int(a >> 8) & 0xf, base_model = int(a >> 4) & 0xf;
  hw.family = base_family + (base_family == 0xf ? int(a >> 20) & 0xff : 0);
  hw.model = base_model | (base_family == 6 || base_family == 0xf ? int(a >> 12) & 0xf0 : 0);
  // The OS must save the wider registers (XCR0) before their features count.
  uint64_t xcr0 = 0;
  if (c & (1u << 27)) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (uint64_t(hi) << 32) | lo;
  }
  const bool ymm = (xcr0 & 0x6) == 0x6, zmm = ymm && (xcr0 & 0xe0) == 0xe0;
  const bool tiles = (xcr0 & 0x60000) == 0x60000;
  set(hw, Feature::sse2, d & (1u << 26));
  set(hw, Feature::avx, ymm && (c & (1u << 28)));
  set(hw, Feature::fma, ymm && (c & (1u << 12)));
  set(hw, Feature::f16c, ymm && (c & (1u << 29)));
  if (max_leaf < 7) return;
  __get_cpuid_count(7, 0, &a, &b, &c, &d);
  const unsigned leaf7_edx = d;
  set(hw, Feature::avx512_vnni, zmm && (c & (1u << 11)));
  set(hw, Feature::avx2, ymm && (b & (1u << 5)));
  set(hw, Feature::avx512f, zmm && (b & (1u << 16)));
  set(hw, Feature::avx512dq, zmm && (b & (1u << 17)));
  set(hw, Feature::avx512bw, zmm && (b & (1u << 30)));
  set(hw, Feature::avx512vl, zmm && (b & (1u << 31)));
  set(hw, Feature::avx512_fp16, zmm && (leaf7_edx & (1u << 23)));
  set(hw, Feature::amx_bf16, tiles && (leaf7_edx & (1u << 22)));
  __get_cpuid_count(7, 1, &a, &b, &c, &d);
  set(hw, Feature::avx512_bf16, zmm && (a & (1u << 5)));
  set(hw, Feature::avx_vnni, ymm && (a & (1u << 4)));
}
#elif defined(__linux__) && defined(__aarch64__)
void detect_cpu(Hardware& hw) {
  // Linux's AArch64 HWCAP / HWCAP2 bits (uapi asm/hwcap.h), spelled out: the build's headers
  // may predate some of them.
  const unsigned long h1 = getauxval(AT_HWCAP), h2 = getauxval(AT_HWCAP2);
  set(hw, Feature::asimd, h1 & (1ul << 1));
  set(hw, Feature::fphp, h1 & (1ul << 9));
  set(hw, Feature::asimdhp, h1 & (1ul << 10));
  set(hw, Feature::asimddp, h1 & (1ul << 20));
  set(hw, Feature::sve, h1 & (1ul << 22));
  set(hw, Feature::sve2, h2 & (1ul << 1));
  set(hw, Feature::i8mm, h2 & (1ul << 13));
  set(hw, Feature::bf16, h2 & (1ul << 14));
  hw.vendor = Vendor::arm;
  if (h1 & (1ul << 11)) {  // HWCAP_CPUID: the kernel emulates reads of the ID registers
    uint64_t midr = 0;
    __asm__ volatile("mrs %0, midr_el1" : "=r"(midr));
    if (((midr >> 24) & 0xff) == 0x41) hw.arm_part = int(midr >> 4) & 0xfff;
  }
  if (hw.has(Feature::sve)) {
    const int vl = prctl(51 /* PR_SVE_GET_VL */);
    hw.sve_bytes = vl > 0 ? vl & 0xffff : 0;
  }
}
#elif defined(__linux__) && defined(__arm__)
void detect_cpu(Hardware& hw) {
  const unsigned long h1 = getauxval(AT_HWCAP);  // HWCAP_NEON bit 12, HWCAP_VFPv4 bit 16
  set(hw, Feature::neon, h1 & (1ul << 12));
  set(hw, Feature::vfpv4, h1 & (1ul << 16));
  hw.vendor = Vendor::arm;
}
#else
void detect_cpu(Hardware&) {}
#endif

// Linux's per-core cache description (sysfs), else glibc's sysconf; 0 where neither knows.
int64_t sysfs_cache(int level, bool data) {
  for (int i = 0; i < 8; ++i) {
    char path[96];
    auto read = [&](const char* field, char* out, int n) {
      std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", i, field);
      FILE* f = std::fopen(path, "r");
      if (!f) return false;
      const bool ok = std::fgets(out, n, f) != nullptr;
      std::fclose(f);
      return ok;
    };
    char lvl[16] = {}, type[32] = {}, size[32] = {};
    if (!read("level", lvl, sizeof lvl)) break;
    if (std::atoi(lvl) != level || !read("type", type, sizeof type)) continue;
    if (data ? std::strncmp(type, "Instruction", 11) == 0 : std::strncmp(type, "Unified", 7) != 0)
      continue;
    if (!read("size", size, sizeof size)) continue;
    char* unit = nullptr;
    const long v = std::strtol(size, &unit, 10);
    return int64_t(v) * (unit && *unit == 'K' ? 1024 : unit && *unit == 'M' ? 1 << 20 : 1);
  }
  return 0;
}

int64_t cache_size(int level) {
  if (const int64_t v = sysfs_cache(level, level == 1)) return v;
#if defined(_SC_LEVEL1_DCACHE_SIZE)
  const int name = level == 1   ? _SC_LEVEL1_DCACHE_SIZE
                   : level == 2 ? _SC_LEVEL2_CACHE_SIZE
                                : _SC_LEVEL3_CACHE_SIZE;
  const long v = sysconf(name);
  return v > 0 ? v : 0;
#else
  return 0;
#endif
}

}  // namespace

const char* feature_name(Feature f) { return kFeatureNames[static_cast<size_t>(f)]; }
const char* cpu_class_name(CpuClass c) { return kClassNames[static_cast<size_t>(c)]; }

Hardware detect_hardware() {
  Hardware hw;
  detect_cpu(hw);
  hw.caches = {cache_size(1), cache_size(2), cache_size(3)};
  const unsigned n = std::thread::hardware_concurrency();
  hw.cores = n > 0 ? int(n) : 1;
  return hw;
}

const Hardware& hardware() {
  static const Hardware hw = detect_hardware();
  return hw;
}

CpuClass classify(const Hardware& hw) {
  // x86: AVX-512 machines by vendor and family; everything else shares the generic row.
  if (hw.has(Feature::avx512f)) {
    if (hw.vendor == Vendor::intel) return CpuClass::x86_intel_avx512;
    if (hw.vendor == Vendor::amd)
      return hw.family >= 0x1a ? CpuClass::x86_zen5 : CpuClass::x86_zen4;
    return CpuClass::x86_generic;
  }
  if (hw.has(Feature::sse2)) return CpuClass::x86_generic;
  if (hw.has(Feature::neon)) return CpuClass::armv7;
  if (hw.has(Feature::asimd)) {
    switch (hw.arm_part) {  // Arm Ltd. MIDR part numbers
      case 0xd03:
      case 0xd05:
        return CpuClass::arm_a53;  // A53, A55
      case 0xd07:
      case 0xd08:
      case 0xd09:
        return CpuClass::arm_a72;  // A57, A72, A73
      default:
        break;
    }
    // Unknown or newer parts by what they can do.
    return hw.has(Feature::asimdhp) && hw.has(Feature::asimddp) ? CpuClass::arm_a76
                                                                : CpuClass::arm_a72;
  }
  return CpuClass::x86_generic;
}

}  // namespace tessera::detail
