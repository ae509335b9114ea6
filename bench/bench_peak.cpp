// The FMA peak of every kernel table the CPU runs, per thread count: the ceiling the GEMM and
// attention rows are measured against.
#include <tbb/parallel_for.h>

#include <string>
#include <vector>

#include "harness.hpp"
#include "src/runtime/dispatch.hpp"
#include "tessera/threading.hpp"

namespace bench {

void register_peak() {
  const char* names[8];
  const int tables = tessera::detail::tables_for(tessera::detail::hardware(), names, 8);
  for (const char* isa : std::vector<const char*>(names, names + tables)) {
    const tessera::arch::KernelTable* table = tessera::detail::find_table(isa);
    if (!table) continue;
    for (int t : thread_counts()) {
      const std::string name = std::string("peak_fma/") + isa + "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [table, t](benchmark::State& state) {
                                     const int64_t iters = 100'000;
                                     run_in_arena(state, t, [&] {
                                       tbb::parallel_for(
                                           0, t,
                                           [&](int) {
                                             volatile float sink = table->peak_fma(iters);
                                             (void)sink;
                                           },
                                           tbb::static_partitioner());
                                     });
                                     set_rates(state,
                                               double(iters) * table->peak_flops_per_iter * t, 0);
                                   })
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      if (table->bf16dot.peak == nullptr) continue;
      const std::string dot = std::string("peak_bf16_dot/") + isa + "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(
          dot.c_str(),
          [table, t](benchmark::State& state) {
            const int64_t iters = 100'000;
            run_in_arena(state, t, [&] {
              tbb::parallel_for(
                  0, t,
                  [&](int) {
                    volatile float sink = table->bf16dot.peak(iters);
                    (void)sink;
                  },
                  tbb::static_partitioner());
            });
            set_rates(state, double(iters) * table->bf16dot.peak_flops_per_iter * t, 0);
          })
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace bench
