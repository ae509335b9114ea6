// Vectorized exp and tanh throughput, in cache (4096 floats, 1 thread), against std::exp and,
// on AVX-512 machines, xsimd::exp and glibc's libmvec expf.
#include <cmath>
#include <string>
#include <vector>

#include "harness.hpp"
#include "src/runtime/dispatch.hpp"

namespace bench {

#ifdef TESSERA_BENCH_X86_BASELINES
void mvec_exp(int64_t n, const float* x, float* y);
void xsimd_exp(int64_t n, const float* x, float* y);
#endif

namespace bench_exp {
namespace {

constexpr int64_t kN = 4096;

template <class F>
void register_array(const std::string& name, F fn, float lo = -80.0f, float hi = 80.0f) {
  benchmark::RegisterBenchmark(name.c_str(), [fn, lo, hi](benchmark::State& state) {
    auto x = random_floats(kN, 5, lo, hi);
    std::vector<float> y(kN);
    for (auto _ : state) {
      fn(kN, x.data(), y.data());
      benchmark::DoNotOptimize(y.data());
    }
    state.counters["elem/s"] =
        benchmark::Counter(double(kN), benchmark::Counter::kIsIterationInvariantRate);
  });
}

}  // namespace
}  // namespace bench_exp

void register_exp() {
  using namespace bench_exp;
  const char* names[8];
  const int tables = tessera::detail::tables_for(tessera::detail::hardware(), names, 8);
  for (const char* isa : std::vector<const char*>(names, names + tables)) {
    const tessera::arch::KernelTable* t = tessera::detail::find_table(isa);
    if (!t) continue;
    register_array(std::string("exp/tessera-") + isa, t->softmax.exp);
    // The variant softmax and attention run (x - max <= 0).
    register_array(std::string("exp_nonpositive/tessera-") + isa, t->softmax.exp_nonpositive,
                   -80.0f, 0.0f);
    // exp(x - 1) as the softmax and attention kernels compute it (ShiftedExp).
    auto shifted = t->softmax.exp_shifted;
    register_array(
        std::string("exp_shifted/tessera-") + isa,
        [shifted](int64_t n, const float* x, float* y) { shifted(n, x, 1.0f, 1.0f, y); }, -80.0f,
        1.0f);
    register_array(std::string("tanh/tessera-") + isa, t->softmax.tanh);
  }
  register_array("exp/std::exp", [](int64_t n, const float* x, float* y) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
  });
  register_array("tanh/std::tanh", [](int64_t n, const float* x, float* y) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
  });
#ifdef TESSERA_BENCH_X86_BASELINES
  if (tessera::detail::find_table("avx512")) {
    register_array("exp/xsimd::exp-avx512", xsimd_exp);
    register_array("exp/libmvec-avx512", mvec_exp);
  }
#endif
}

}  // namespace bench
