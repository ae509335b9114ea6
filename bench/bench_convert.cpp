// f32 <-> f16 / bf16 conversion: every table's kernels in cache (4096 elements, 1 thread), and
// tessera_convert on arrays past the caches (16M elements) on 1 and 2 threads, in bytes read and
// written per second, beside memcpy of the same bytes (the bandwidth those rows are bound by).
#include <tbb/task_group.h>

#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"
#include "src/runtime/dispatch.hpp"
#include "tessera/convert.hpp"

namespace bench {
namespace bench_convert {
namespace {

constexpr int64_t kInCache = 4096;
constexpr int64_t kLarge = int64_t(16) << 20;

// 16-bit inputs: the f32 values rounded, so every element is an ordinary number.
std::vector<uint16_t> halves(int64_t n, bool bf16) {
  const std::vector<float> x = random_floats(size_t(n), 11, -100.0f, 100.0f);
  std::vector<uint16_t> h(static_cast<size_t>(n));
  setup_ok(tessera::convert(tessera::DType::f32, bf16 ? tessera::DType::bf16 : tessera::DType::f16,
                            n, x.data(), h.data()),
           "convert");
  return h;
}

void register_kernel(const std::string& name, void (*narrow)(int64_t, const float*, uint16_t*),
                     void (*widen)(int64_t, const uint16_t*, float*), bool bf16) {
  benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    std::vector<float> f = random_floats(size_t(kInCache), 5, -100.0f, 100.0f);
    std::vector<uint16_t> h = halves(kInCache, bf16);
    for (auto _ : state) {
      if (narrow)
        narrow(kInCache, f.data(), h.data());
      else
        widen(kInCache, h.data(), f.data());
      benchmark::DoNotOptimize(h.data());
      benchmark::DoNotOptimize(f.data());
    }
    state.counters["elem/s"] =
        benchmark::Counter(double(kInCache), benchmark::Counter::kIsIterationInvariantRate);
  });
}

void register_call(tessera::DType from, tessera::DType to, const char* name, int threads) {
  const std::string row =
      std::string("convert/") + name + "/n:16M/threads:" + std::to_string(threads);
  benchmark::RegisterBenchmark(row.c_str(), [=](benchmark::State& state) {
    const bool from_f32 = from == tessera::DType::f32;
    std::vector<float> f = random_floats(size_t(kLarge), 5, -100.0f, 100.0f);
    std::vector<uint16_t> h =
        halves(kLarge, from == tessera::DType::bf16 || to == tessera::DType::bf16);
    run_in_arena(state, threads, [&] {
      return from_f32 ? tessera::convert(from, to, kLarge, f.data(), h.data())
                      : tessera::convert(from, to, kLarge, h.data(), f.data());
    });
    set_rates(state, 0, double(kLarge) * 6);
  })->UseRealTime();
}

}  // namespace
}  // namespace bench_convert

void register_convert() {
  using namespace bench_convert;
  const char* names[8];
  const int tables = tessera::detail::tables_for(tessera::detail::hardware(), names, 8);
  for (const char* isa : std::vector<const char*>(names, names + tables)) {
    const tessera::arch::KernelTable* t = tessera::detail::find_table(isa);
    if (!t) continue;
    const tessera::arch::ConvertKernels& c = t->convert;
    register_kernel(std::string("convert_kernel/f16_from_f32/tessera-") + isa, c.f32_to_f16,
                    nullptr, false);
    register_kernel(std::string("convert_kernel/f32_from_f16/tessera-") + isa, nullptr,
                    c.f16_to_f32, false);
    register_kernel(std::string("convert_kernel/bf16_from_f32/tessera-") + isa, c.f32_to_bf16,
                    nullptr, true);
    register_kernel(std::string("convert_kernel/f32_from_bf16/tessera-") + isa, nullptr,
                    c.bf16_to_f32, true);
  }
  using tessera::DType;
  for (int threads : thread_counts()) {
    register_call(DType::f32, DType::f16, "f32_to_f16", threads);
    register_call(DType::f16, DType::f32, "f16_to_f32", threads);
    register_call(DType::f32, DType::bf16, "f32_to_bf16", threads);
    register_call(DType::bf16, DType::f32, "bf16_to_f32", threads);
    // The bandwidth bound: the same 6 bytes an element, copied (read 4 write 2 -> 3 + 3).
    const std::string row = "convert/memcpy-same-bytes/n:16M/threads:" + std::to_string(threads);
    benchmark::RegisterBenchmark(row.c_str(), [threads](benchmark::State& state) {
      std::vector<char> a(size_t(kLarge) * 3, 1), b(size_t(kLarge) * 3);
      run_in_arena(state, threads, [&] {
        tbb::this_task_arena::isolate([&] {
          const size_t half = a.size() / size_t(threads);
          tbb::task_group g;
          for (int t = 0; t < threads; ++t)
            g.run([&, t] {
              std::memcpy(b.data() + size_t(t) * half, a.data() + size_t(t) * half, half);
            });
          g.wait();
        });
        benchmark::DoNotOptimize(b.data());
      });
      set_rates(state, 0, double(kLarge) * 6);
    })->UseRealTime();
  }
}

}  // namespace bench
