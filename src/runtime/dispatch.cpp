#include "runtime/dispatch.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "runtime/error.hpp"
#include "runtime/hardware.hpp"
#include "tessera/threading.hpp"

namespace tessera {
namespace detail {
namespace {

struct Candidate {
  const char* name;
  const arch::KernelTable& (*table)();
  bool (*runs_on)(const Hardware& hw);
  const char* features;  // what runs_on asks for, as hardware.hpp names them
};

bool always(const Hardware&) { return true; }
#if defined(TESSERA_HAVE_X86)
bool avx512(const Hardware& hw) {
  return hw.has(Feature::avx512f) && hw.has(Feature::avx512dq) && hw.has(Feature::avx512bw) &&
         hw.has(Feature::avx512vl);
}
bool avx2(const Hardware& hw) {
  return hw.has(Feature::avx2) && hw.has(Feature::fma) && hw.has(Feature::f16c);
}
// The avx512 table with the kernels of the features beyond its own that this CPU has
// (AVX512_BF16's vdpbf16ps, AVX512-VNNI's vpdpbusd).
const arch::KernelTable& avx512_here() {
  static const arch::KernelTable table = [] {
    arch::KernelTable t = arch::avx512_table();
    if (hardware().has(Feature::avx512_bf16)) t.bf16dot = arch::avx512_bf16_dot_kernels();
    if (hardware().has(Feature::avx512_vnni)) t.quant = arch::avx512_vnni_quant_kernels();
    return t;
  }();
  return table;
}
// Best first.
constexpr Candidate kCandidates[] = {
    {"avx512", avx512_here, avx512, "avx512f avx512dq avx512bw avx512vl"},
    {"avx2", arch::avx2_table, avx2, "avx2 fma f16c"},
    {"sse2", arch::sse2_table, always, "sse2"},
};
#elif defined(TESSERA_HAVE_NEON64)
bool v82(const Hardware& hw) { return hw.has(Feature::asimdhp) && hw.has(Feature::asimddp); }
// The neon64_v82 table with the kernels of the features beyond its own that this CPU has.
const arch::KernelTable& neon64_v82_here() {
  static const arch::KernelTable table = [] {
    arch::KernelTable t = arch::neon64_v82_table();
    if (hardware().has(Feature::bf16)) t.bf16dot = arch::neon64_bf16_dot_kernels();
    if (hardware().has(Feature::i8mm)) t.quant = arch::neon64_i8mm_quant_kernels();
    return t;
  }();
  return table;
}
constexpr Candidate kCandidates[] = {
    {"neon64_v82", neon64_v82_here, v82, "asimd asimdhp asimddp"},
    {"neon64", arch::neon64_table, always, "asimd"},
};
#elif defined(TESSERA_HAVE_NEON32)
constexpr Candidate kCandidates[] = {{"neon32", arch::neon32_table, always, "neon vfpv4"}};
#endif

const arch::KernelTable* best_table() {
  for (const auto& c : kCandidates)
    if (c.runs_on(hardware())) return &c.table();
  return &kCandidates[0].table();
}

const arch::KernelTable* initial_table() {
  if (const char* env = std::getenv("TESSERA_ISA")) {
    if (const arch::KernelTable* t = find_table(env)) return t;
  }
  return best_table();
}

std::atomic<const arch::KernelTable*> g_active{nullptr};

}  // namespace

const arch::KernelTable* find_table(const char* name) {
  if (name == nullptr) return nullptr;
  for (const auto& c : kCandidates)
    if (std::strcmp(c.name, name) == 0) return c.runs_on(hardware()) ? &c.table() : nullptr;
  return nullptr;
}

const char* table_features(const char* name) {
  for (const auto& c : kCandidates)
    if (name && std::strcmp(c.name, name) == 0) return c.features;
  return "";
}

int tables_for(const Hardware& hw, const char** names, int capacity) {
  int n = 0;
  for (const auto& c : kCandidates)
    if (c.runs_on(hw) && n < capacity) names[n++] = c.name;
  return n;
}

const arch::KernelTable& active_table() {
  const arch::KernelTable* t = g_active.load(std::memory_order_acquire);
  if (t == nullptr) {
    const arch::KernelTable* first = initial_table();
    // A concurrent first use may have won; both computed the same answer anyway.
    g_active.compare_exchange_strong(t, first, std::memory_order_acq_rel);
    t = g_active.load(std::memory_order_acquire);
  }
  return *t;
}

const arch::KernelTable* exchange_active_table_for_testing(const arch::KernelTable* t) {
  const arch::KernelTable* previous = &active_table();
  g_active.store(t, std::memory_order_release);
  return previous;
}

}  // namespace detail

const char* isa_name() { return detail::active_table().name; }

bool isa_supported(const char* name) { return detail::find_table(name) != nullptr; }

Status set_isa(const char* name) {
  const arch::KernelTable* t = detail::find_table(name);
  if (t == nullptr) {
    return detail::fail(Status::unsupported, "name = \"%s\" is not a kernel table this CPU runs",
                        name ? name : "(null)");
  }
  detail::g_active.store(t, std::memory_order_release);
  return Status::ok;
}

}  // namespace tessera
