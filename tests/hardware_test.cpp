// The hardware module, the dispatcher and the tuning rows under injected machines: which class
// each CPU falls in, which tables a feature set runs, what cache figures survive the checks,
// and that detection on this machine agrees with what the compiler's runtime reports.
#if defined(__aarch64__) || defined(__arm__)
#include <sys/auxv.h>
#endif
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "src/runtime/dispatch.hpp"
#include "src/runtime/hardware.hpp"
#include "src/runtime/tuning.hpp"

namespace hardware_test {

namespace {

using tessera::detail::Caches;
using tessera::detail::classify;
using tessera::detail::CpuClass;
using tessera::detail::Feature;
using tessera::detail::Hardware;
using tessera::detail::Vendor;

Hardware x86(Vendor v, int family, bool avx512) {
  Hardware hw;
  hw.vendor = v, hw.family = family;
  hw.with(Feature::sse2)
      .with(Feature::avx)
      .with(Feature::fma)
      .with(Feature::f16c)
      .with(Feature::avx2);
  if (avx512)
    hw.with(Feature::avx512f)
        .with(Feature::avx512dq)
        .with(Feature::avx512bw)
        .with(Feature::avx512vl);
  return hw;
}

Hardware arm64(int part, bool v82) {
  Hardware hw;
  hw.vendor = Vendor::arm, hw.arm_part = part;
  hw.with(Feature::asimd);
  if (v82) hw.with(Feature::fphp).with(Feature::asimdhp).with(Feature::asimddp);
  return hw;
}

std::string name(CpuClass c) { return tessera::detail::cpu_class_name(c); }

TEST(Hardware, ClassOfEachInjectedCpu) {
  EXPECT_EQ(name(classify(x86(Vendor::intel, 6, true))), "x86-intel-avx512");
  EXPECT_EQ(name(classify(x86(Vendor::amd, 0x19, true))), "x86-zen4");
  EXPECT_EQ(name(classify(x86(Vendor::amd, 0x1a, true))), "x86-zen5");
  EXPECT_EQ(name(classify(x86(Vendor::amd, 0x19, false))), "x86-generic");  // Zen 3
  EXPECT_EQ(name(classify(x86(Vendor::intel, 6, false))), "x86-generic");   // AVX2 Intel
  EXPECT_EQ(name(classify(x86(Vendor::unknown, 6, true))), "x86-generic");
  EXPECT_EQ(name(classify(arm64(0xd03, false))), "arm-a53");
  EXPECT_EQ(name(classify(arm64(0xd05, true))), "arm-a53");  // A55 is v8.2 and in order
  EXPECT_EQ(name(classify(arm64(0xd08, false))), "arm-a72");
  EXPECT_EQ(name(classify(arm64(0xd0b, true))), "arm-a76");
  EXPECT_EQ(name(classify(arm64(0, true))), "arm-a76");  // unknown part: by features
  EXPECT_EQ(name(classify(arm64(0, false))), "arm-a72");
  Hardware v7;
  v7.with(Feature::neon).with(Feature::vfpv4);
  EXPECT_EQ(name(classify(v7)), "armv7");
}

// The dispatcher's choice for injected feature sets, against the tables this build has.
TEST(Hardware, TablesForEachInjectedFeatureSet) {
  auto tables = [](const Hardware& hw) {
    const char* names[8];
    const int n = tessera::detail::tables_for(hw, names, 8);
    std::string out;
    for (int i = 0; i < n; ++i) out += (i ? " " : "") + std::string(names[i]);
    return out;
  };
#if defined(__x86_64__)
  EXPECT_EQ(tables(x86(Vendor::amd, 0x1a, true)), "avx512 avx2 sse2");
  EXPECT_EQ(tables(x86(Vendor::amd, 0x19, false)), "avx2 sse2");
  Hardware avx512_without_bw = x86(Vendor::intel, 6, false);
  avx512_without_bw.with(Feature::avx512f).with(Feature::avx512dq).with(Feature::avx512vl);
  EXPECT_EQ(tables(avx512_without_bw), "avx2 sse2");
  Hardware avx2_without_fma;
  avx2_without_fma.with(Feature::sse2).with(Feature::avx2).with(Feature::f16c);
  EXPECT_EQ(tables(avx2_without_fma), "sse2");
  Hardware avx2_without_f16c;  // the avx2 table converts f16 with F16C
  avx2_without_f16c.with(Feature::sse2).with(Feature::avx2).with(Feature::fma);
  EXPECT_EQ(tables(avx2_without_f16c), "sse2");
#elif defined(__aarch64__)
  EXPECT_EQ(tables(arm64(0xd08, false)), "neon64");
  EXPECT_EQ(tables(arm64(0xd0b, true)), "neon64_v82 neon64");
  Hardware fp16_only = arm64(0, false);
  fp16_only.with(Feature::asimdhp);  // no dotprod: not the v8.2 table
  EXPECT_EQ(tables(fp16_only), "neon64");
#elif defined(__arm__)
  Hardware v7;
  v7.with(Feature::neon).with(Feature::vfpv4);
  EXPECT_EQ(tables(v7), "neon32");
#endif
}

// Detection agrees with the compiler runtime (x86) or the auxiliary vector (ARM), read apart.
TEST(Hardware, DetectionMatchesThisMachine) {
  const Hardware hw = tessera::detail::detect_hardware();
#if defined(__x86_64__)
  __builtin_cpu_init();
  EXPECT_EQ(hw.has(Feature::sse2), bool(__builtin_cpu_supports("sse2")));
  EXPECT_EQ(hw.has(Feature::avx2), bool(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(hw.has(Feature::fma), bool(__builtin_cpu_supports("fma")));
  EXPECT_EQ(hw.has(Feature::avx512f), bool(__builtin_cpu_supports("avx512f")));
  EXPECT_EQ(hw.has(Feature::avx512bw), bool(__builtin_cpu_supports("avx512bw")));
  EXPECT_EQ(hw.has(Feature::avx512_bf16), bool(__builtin_cpu_supports("avx512bf16")));
  EXPECT_EQ(hw.vendor == Vendor::amd, bool(__builtin_cpu_is("amd")));
  EXPECT_EQ(hw.vendor == Vendor::intel, bool(__builtin_cpu_is("intel")));
#elif defined(__aarch64__)
  const unsigned long h1 = getauxval(AT_HWCAP), h2 = getauxval(AT_HWCAP2);
  EXPECT_EQ(hw.has(Feature::asimd), bool(h1 & (1ul << 1)));
  EXPECT_EQ(hw.has(Feature::asimdhp), bool(h1 & (1ul << 10)));
  EXPECT_EQ(hw.has(Feature::asimddp), bool(h1 & (1ul << 20)));
  EXPECT_EQ(hw.has(Feature::sve), bool(h1 & (1ul << 22)));
  EXPECT_EQ(hw.has(Feature::i8mm), bool(h2 & (1ul << 13)));
  EXPECT_EQ(hw.has(Feature::bf16), bool(h2 & (1ul << 14)));
  EXPECT_EQ(hw.sve_bytes > 0, hw.has(Feature::sve));
#elif defined(__arm__)
  EXPECT_EQ(hw.has(Feature::neon), bool(getauxval(AT_HWCAP) & (1ul << 12)));
#endif
  EXPECT_GE(hw.cores, 1);
  std::string features;
  for (uint32_t f = 0; f < uint32_t(Feature::count); ++f)
    if (hw.has(Feature(f)))
      features += std::string(" ") + tessera::detail::feature_name(Feature(f));
  const Caches c = tessera::detail::plausible_caches(hw.caches, classify(hw));
  std::printf("class %s, features%s, caches %lld / %lld / %lld KB (reported %lld / %lld / %lld)\n",
              name(classify(hw)).c_str(), features.c_str(), (long long)c.l1d >> 10,
              (long long)c.l2 >> 10, (long long)c.l3 >> 10, (long long)hw.caches.l1d >> 10,
              (long long)hw.caches.l2 >> 10, (long long)hw.caches.l3 >> 10);
}

// The kernels a table gains for a feature beyond its own (Bf16DotKernels) are there exactly
// where this CPU has that feature: on x86 the avx512 table's VDPBF16PS tile with avx512_bf16, on
// AArch64 the neon64_v82 table's BFDOT tile with HWCAP2 bf16 (qemu -cpu max has it,
// cortex-a76 and neoverse-n1 do not), and no other table has any.
TEST(Hardware, Bf16DotKernelsExactlyWhereTheCpuHasTheirFeature) {
  const Hardware& hw = tessera::detail::hardware();
  const char* names[8];
  const int n = tessera::detail::tables_for(hw, names, 8);
  for (int i = 0; i < n; ++i) {
    const auto* t = tessera::detail::find_table(names[i]);
    ASSERT_NE(t, nullptr);
    const std::string table = names[i];
    bool want = false;
    if (table == "avx512") want = hw.has(Feature::avx512_bf16);
    if (table == "neon64_v82") want = hw.has(Feature::bf16);
    EXPECT_EQ(t->bf16dot.packed[1] != nullptr, want) << table;
    if (want) {
      EXPECT_EQ(
          std::string(t->bf16dot.feature),
          tessera::detail::feature_name(table == "avx512" ? Feature::avx512_bf16 : Feature::bf16));
      for (int r = 1; r <= t->bf16dot.mr; ++r) EXPECT_NE(t->bf16dot.packed[r], nullptr) << r;
    }
    std::printf("%s: bf16 dot-product tile %s\n", names[i], want ? "present" : "absent");
  }
}

TEST(Hardware, ImplausibleCachesFallBackToTheClassFigures) {
  const CpuClass zen4 = CpuClass::x86_zen4;
  const Caches typical = tessera::detail::tuning_row(zen4).typical;
  // A VM's host-wide L3, a missing L2, a 1 KB L1: each replaced, the sane ones kept.
  const Caches got = tessera::detail::plausible_caches({1024, 0, int64_t(384) << 20}, zen4);
  EXPECT_EQ(got.l1d, typical.l1d);
  EXPECT_EQ(got.l2, typical.l2);
  EXPECT_EQ(got.l3, typical.l3);
  const Caches sane = tessera::detail::plausible_caches({49152, 2 << 20, 96 << 20}, zen4);
  EXPECT_EQ(sane.l1d, 49152);
  EXPECT_EQ(sane.l2, 2 << 20);
  EXPECT_EQ(sane.l3, 96 << 20);
}

// Every class has its row, named and found by name (TESSERA_CPU_CLASS), with thresholds that
// order as the planner assumes.
TEST(Hardware, EveryClassHasATuningRow) {
  for (uint32_t i = 0; i < uint32_t(CpuClass::count); ++i) {
    const auto& row = tessera::detail::tuning_row(CpuClass(i));
    EXPECT_EQ(row.cpu_class, CpuClass(i));
    CpuClass found{};
    ASSERT_TRUE(tessera::detail::find_cpu_class(name(CpuClass(i)).c_str(), found));
    EXPECT_EQ(found, CpuClass(i));
    EXPECT_GT(row.typical.l1d, 0);
    EXPECT_GT(row.l1_span_bytes, 0);
    EXPECT_LE(row.mid_in_place_bytes, row.mid_operand_bytes) << name(CpuClass(i));
    EXPECT_LE(row.min_parallel_macs, row.min_parallel_macs_few_rows) << name(CpuClass(i));
    EXPECT_GT(row.softmax_stream_bytes, 0);
    // Blocks of whole 8-row tiles, and score tasks of at least 16 keys.
    EXPECT_GT(row.hgemm_block_rows, 0) << name(CpuClass(i));
    EXPECT_EQ(row.hgemm_block_rows % 8, 0) << name(CpuClass(i));
    EXPECT_GT(row.hgemm_block_panels, 0) << name(CpuClass(i));
    EXPECT_GE(row.additive_keys_per_task, 16) << name(CpuClass(i));
  }
  CpuClass unused{};
  EXPECT_FALSE(tessera::detail::find_cpu_class("zen9", unused));
  EXPECT_FALSE(tessera::detail::find_cpu_class(nullptr, unused));
}

}  // namespace

}  // namespace hardware_test
