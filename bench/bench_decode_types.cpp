// Decode with K/V stored as f32, f16, bf16, q8_0 or q4_0: one query token against a cache (32
// query heads, 8 KV heads, d = 128), on 1 and all threads. Decode reads every K/V byte once, so
// it is bound by bytes: bytes_per_second counts the K/V bytes actually stored and read (2 bytes
// a value for the 16-bit types, 34 and 18 bytes a block of 32 for q8_0 and q4_0), to be set
// beside the attention/memory-read rows. The `pair` rows alternate a base type's call, the
// type's call and a plain read in one process (~15 ms slices) and report the median of the
// per-round speedups (base time / type time: tokens/s over the base type's) and of the type's
// GB/s over the read's.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "harness.hpp"
#include "tessera/attention.hpp"
#include "tessera/convert.hpp"

namespace bench {
namespace bench_decode_types {
namespace {

constexpr int64_t kHeads = 32, kKvHeads = 8, kDim = 128;

const char* type_name(tessera_dtype t) {
  const char* names[] = {"f32", "f16", "bf16", "q8_0", "q4_0"};
  return t >= 0 && t < 5 ? names[t] : "?";
}

// One decode problem with its K/V stored as `type` (the same values, rounded, for every type).
struct Decode {
  tessera::AttentionDesc desc{};
  std::vector<float> q, o;
  std::vector<float> k32, v32;
  std::vector<uint8_t> ks, vs;  // K and V stored as the type, when it is not f32

  Decode(int64_t kv, tessera_dtype type) {
    setup_ok(tessera::attention_desc_init(desc, 1, kHeads, kKvHeads, 1, kv, kDim, kDim),
             "attention_desc_init");
    desc.k_type = desc.v_type = type;
    q = random_floats(size_t(kHeads * kDim), 1);
    o.resize(q.size());
    k32 = random_floats(size_t(kKvHeads * kv * kDim), 2);
    v32 = random_floats(k32.size(), 3);
    if (type != TESSERA_F32) {
      const auto n = int64_t(k32.size());
      ks.resize(tessera_dtype_size(type, n));
      vs.resize(ks.size());
      const auto to = tessera::DType(type);
      setup_ok(tessera::convert(tessera::DType::f32, to, n, k32.data(), ks.data()), "K");
      setup_ok(tessera::convert(tessera::DType::f32, to, n, v32.data(), vs.data()), "V");
      k32 = {};
      v32 = {};
    }
  }
  tessera::Status run() {
    const void* k = ks.empty() ? static_cast<const void*>(k32.data()) : ks.data();
    const void* v = vs.empty() ? static_cast<const void*>(v32.data()) : vs.data();
    const tessera::Status st = tessera::attention(desc, q.data(), k, v, o.data());
    benchmark::DoNotOptimize(o.data());
    return st;
  }
  double bytes() const {
    return 2.0 * double(tessera_dtype_size(desc.k_type, kKvHeads * desc.kv_len * kDim));
  }
};

std::string name_of(const char* what, int64_t kv, const std::string& types, int threads) {
  return std::string("attention/") + what + "/heads:32/kv_heads:8/q:1/kv:" + std::to_string(kv) +
         "/d:128/" + types + "/threads:" + std::to_string(threads);
}

void register_decode(int64_t kv, tessera_dtype type, int threads) {
  benchmark::RegisterBenchmark(
      name_of("decode-kv-type", kv, std::string("kv:") + type_name(type), threads).c_str(),
      [kv, type, threads](benchmark::State& state) {
        Decode p(kv, type);
        run_in_arena(state, threads, [&] { return p.run(); });
        set_rates(state, 4.0 * kHeads * kv * kDim, p.bytes());
      })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

// A plain read of 256 MB (past any cache) over the arena's threads: the read ceiling, measured
// in the same rounds as the decode calls. The VM's read bandwidth moves between states (the
// separate attention/memory-read row read 48 GB/s in one run and 65 in the next, 2 threads), so
// a fraction of it is only meaningful against a read taken alongside.
struct ReadCeiling {
  std::vector<float> x = std::vector<float>(size_t(64) << 20, 1.0f);
  void run() {
    const double total = sum_over_threads(x);
    benchmark::DoNotOptimize(total);
  }
  double bytes() const { return 4.0 * double(x.size()); }
};

// Median over 15 alternated rounds of (base call time) / (type's call time), and of the type's
// GB/s over the read ceiling's in the same round (of_read%).
void register_pair(int64_t kv, tessera_dtype base, tessera_dtype type, int threads) {
  benchmark::RegisterBenchmark(
      name_of("decode-kv-type-pair", kv, std::string(type_name(type)) + "-vs-" + type_name(base),
              threads)
          .c_str(),
      [kv, base, type, threads](benchmark::State& state) {
        Decode first(kv, base), second(kv, type);
        ReadCeiling read;
        if (!ok(state, first.run()) || !ok(state, second.run())) return;
        const Alternated t = alternate(
            state, threads, {[&] { first.run(); }, [&] { second.run(); }, [&] { read.run(); }});
        std::vector<double> of_read;
        for (const auto& r : t.rounds)
          of_read.push_back(second.bytes() / r[1] / (read.bytes() / r[2]));
        state.counters["speedup"] = 1.0 / t.over_first[1];
        state.counters["base_GBps"] = first.bytes() / t.seconds[0] * 1e-9;
        state.counters["type_GBps"] = second.bytes() / t.seconds[1] * 1e-9;
        state.counters["read_GBps"] = read.bytes() / t.seconds[2] * 1e-9;
        state.counters["base_us"] = t.seconds[0] * 1e6;
        state.counters["type_us"] = t.seconds[1] * 1e6;
        // Against the DRAM read only when the type's K/V do not fit in the last-level cache
        // (kv 4096 in 16 bits: 16.8 MB, read from a 32 MB L3 at up to 1.7x the DRAM rate).
        std::string cache;
        const int64_t llc = llc_bytes(&cache);
        if (second.bytes() > double(llc))
          state.counters["of_read%"] = 100.0 * median(of_read);
        else
          state.SetLabel("K/V in " + cache + " (" + std::to_string(int64_t(second.bytes()) >> 20) +
                         " of " + std::to_string(llc >> 20) + " MB): no DRAM ceiling");
      })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace bench_decode_types

void register_decode_types() {
  using namespace bench_decode_types;
  for (int threads : thread_counts())
    for (int64_t kv : {4096, 32768}) {
      for (tessera_dtype t : {TESSERA_F32, TESSERA_F16, TESSERA_BF16, TESSERA_Q8_0, TESSERA_Q4_0})
        register_decode(kv, t, threads);
      for (tessera_dtype t : {TESSERA_F16, TESSERA_BF16})
        register_pair(kv, TESSERA_F32, t, threads);
      for (tessera_dtype t : {TESSERA_Q8_0, TESSERA_Q4_0})
        register_pair(kv, TESSERA_F16, t, threads);
    }
}

}  // namespace bench
