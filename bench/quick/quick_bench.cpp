// tessera-bench: what this machine can do and how much of it Tessera gets, in a minute or two.
// Measures the FMA peak (the kernel table's own FMA loop) and the read and copy bandwidth, then
// times SGEMM (square, attention scores, a decode projection), softmax, fused attention prefill
// and decode on 1 and on all threads, and prints one table: each row's rate and its fraction of
// the peak (compute-bound rows) or of the bandwidth (byte-bound rows). Each rate is the median of
// several timed runs. Installed with the library and cross-compiled with it; no peers, no
// Google Benchmark. --smoke runs the same rows on small shapes (CI runs it under qemu, where the
// numbers are not timings).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "src/runtime/dispatch.hpp"
#include "tessera/tessera.h"

namespace {

using Clock = std::chrono::steady_clock;

bool g_smoke = false;

void must(tessera_status s) {
  if (s == TESSERA_OK) return;
  std::fprintf(stderr, "tessera-bench: %s\n", tessera_last_error());
  std::exit(1);
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Median seconds of one call of f: runs of at least `min_s` each (several calls per run when a
// call is short), `runs` runs after one warm-up call.
double median_seconds(const std::function<void()>& f, int runs = 5, double min_s = 0.2) {
  f();
  std::vector<double> per_call;
  for (int r = 0; r < runs; ++r) {
    int64_t calls = 0;
    const auto t0 = Clock::now();
    double s = 0;
    do {
      f();
      ++calls;
      s = seconds_since(t0);
    } while (s < (g_smoke ? 0.0 : min_s));
    per_call.push_back(s / double(calls));
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

std::vector<float> data(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& e : v) {
    x = x * 1664525u + 1013904223u;
    e = float(int32_t(x >> 8) - (1 << 23)) / float(1 << 23);  // in [-1, 1): never zeros
  }
  return v;
}

struct Machine {
  double peak_flops, read_bps, copy_bps;
};

// Runs f(t) on `threads` std::threads at once and joins them (plain threads: the measurement
// is of the machine, and a join orders every write for ThreadSanitizer).
template <class F>
void on_threads(int threads, const F& f) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back([&f, t] { f(t); });
  for (auto& th : pool) th.join();
}

// Best of 5: on a shared machine interference only lowers a ceiling.
Machine measure_machine(int threads) {
  const auto& table = tessera::detail::active_table();
  Machine m{0, 0, 0};
  const int64_t iters = g_smoke ? 1000 : 20000000;
  const size_t floats = g_smoke ? (1 << 16) : (size_t(128) << 20) / 4;  // 128 MB: past any cache
  std::vector<float> src = data(floats, 1), dst(floats);
  const auto lo = [&](int t) { return floats * size_t(t) / size_t(threads); };
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    std::vector<float> sink(static_cast<size_t>(threads), 0.0f);
    on_threads(threads, [&](int t) { sink[size_t(t)] = table.peak_fma(iters); });
    m.peak_flops = std::max(
        m.peak_flops, double(iters) * table.peak_flops_per_iter * threads / seconds_since(t0));
    // Read: eight float sums (vectorised) over each thread's share.
    t0 = Clock::now();
    on_threads(threads, [&](int t) {
      float part[8] = {};
      for (size_t i = lo(t); i + 8 <= lo(t + 1); i += 8)
        for (int u = 0; u < 8; ++u) part[u] += src[i + size_t(u)];
      for (float x : part) sink[size_t(t)] += x;
    });
    m.read_bps = std::max(m.read_bps, double(floats) * 4 / seconds_since(t0));
    t0 = Clock::now();
    on_threads(threads, [&](int t) {
      std::memcpy(dst.data() + lo(t), src.data() + lo(t), (lo(t + 1) - lo(t)) * 4);
    });
    m.copy_bps = std::max(m.copy_bps, double(floats) * 8 / seconds_since(t0));  // read + write
    if (sink[0] == 42.0f) std::printf(" ");                                     // keeps the work
  }
  return m;
}

struct Row {
  std::string what;
  int threads;
  double rate;       // flop/s or bytes/s
  bool bytes;        // rate is bytes/s, against a bandwidth
  double ceiling;    // the peak or bandwidth it is a fraction of
  double footprint;  // bytes a call touches (byte-bound rows)
};

// The largest data cache the kernel lists (bytes, 0 where sysfs has none) and its level.
int64_t llc_bytes(int& level) {
  int64_t best = 0;
  level = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    char type[32] = {}, size[32] = {}, lvl[8] = {};
    const auto read = [](const std::string& path, char* buf, int n) {
      FILE* f = std::fopen(path.c_str(), "r");
      if (!f) return false;
      const bool got = std::fgets(buf, n, f) != nullptr;
      std::fclose(f);
      return got;
    };
    if (!read(dir + "type", type, sizeof type) || !read(dir + "size", size, sizeof size) ||
        !read(dir + "level", lvl, sizeof lvl))
      continue;
    if (std::strncmp(type, "Instruction", 11) == 0) continue;
    char* unit = nullptr;
    int64_t bytes = std::strtoll(size, &unit, 10);
    if (unit && *unit == 'K') bytes <<= 10;
    if (unit && *unit == 'M') bytes <<= 20;
    if (bytes > best) best = bytes, level = std::atoi(lvl);
  }
  return best;
}

int64_t scaled(int64_t full, int64_t smoke) { return g_smoke ? smoke : full; }

void gemm_rows(std::vector<Row>& rows, int threads, const Machine& mc) {
  struct Shape {
    const char* name;
    int64_t m, n, k;
    bool tb;
  };
  const Shape shapes[] = {
      {"sgemm square", scaled(1024, 64), scaled(1024, 64), scaled(1024, 64), false},
      {"sgemm scores Q K^T", scaled(2048, 64), scaled(2048, 64), scaled(64, 16), true},
      {"sgemm decode x W", 1, scaled(4096, 128), scaled(4096, 128), false}};
  for (const Shape& s : shapes) {
    const auto a = data(size_t(s.m * s.k), 2), b = data(size_t(s.k * s.n), 3);
    std::vector<float> c(size_t(s.m * s.n));
    const double t = median_seconds([&] {
      must(tessera_sgemm(TESSERA_NO_TRANS, s.tb ? TESSERA_TRANS : TESSERA_NO_TRANS, s.m, s.n, s.k,
                         1.0f, a.data(), s.k, b.data(), s.tb ? s.k : s.n, 0.0f, c.data(), s.n));
    });
    char name[96];
    std::snprintf(name, sizeof name, "%s %lldx%lldx%lld", s.name, (long long)s.m, (long long)s.n,
                  (long long)s.k);
    if (s.m == 1)  // one row: bound by reading B
      rows.push_back(
          {name, threads, double(s.k * s.n) * 4 / t, true, mc.read_bps, double(s.k * s.n) * 4});
    else
      rows.push_back({name, threads, 2.0 * double(s.m * s.n * s.k) / t, false, mc.peak_flops, 0});
  }
}

void softmax_rows(std::vector<Row>& rows, int threads, const Machine& mc) {
  const int64_t r = scaled(2048, 32), n = scaled(2048, 64);
  const auto x = data(size_t(r * n), 4);
  std::vector<float> y(x.size());
  const double t =
      median_seconds([&] { must(tessera_softmax(r, n, x.data(), n, y.data(), n, 1.0f)); });
  char name[64];
  std::snprintf(name, sizeof name, "softmax %lldx%lld", (long long)r, (long long)n);
  rows.push_back({name, threads, double(r * n) * 8 / t, true, mc.copy_bps, double(r * n) * 8});
}

void attention_rows(std::vector<Row>& rows, int threads, const Machine& mc) {
  const int64_t heads = 4;
  for (int64_t len : {scaled(512, 32), scaled(2048, 64)})
    for (int64_t d : {int64_t(64), int64_t(128)})
      for (int causal : {0, 1}) {
        const auto q = data(size_t(heads * len * d), 5), k = data(q.size(), 6),
                   v = data(q.size(), 7);
        std::vector<float> o(q.size());
        tessera_attention_desc desc;
        must(tessera_attention_desc_init(&desc, 1, heads, heads, len, len, d, d));
        desc.causal = causal;
        const double t = median_seconds(
            [&] { must(tessera_attention(&desc, q.data(), k.data(), v.data(), o.data())); }, 3);
        const double flops = 4.0 * double(heads * len * len * d) * (causal ? 0.5 : 1.0);
        char name[96];
        std::snprintf(name, sizeof name, "attention prefill L %lld d %lld%s, %lld heads",
                      (long long)len, (long long)d, causal ? " causal" : "", (long long)heads);
        rows.push_back({name, threads, flops / t, false, mc.peak_flops, 0});
      }
  // Decode: one query per head against a cache; bound by reading K and V.
  const int64_t qh = 32, kvh = 8, kv = scaled(4096, 64), d = 128;
  for (tessera_dtype type : {TESSERA_F32, TESSERA_F16, TESSERA_Q8_0, TESSERA_Q4_0}) {
    const auto q = data(size_t(qh * d), 8);
    const auto kf = data(size_t(kvh * kv * d), 9), vf = data(kf.size(), 10);
    const size_t bytes = tessera_dtype_size(type, int64_t(kf.size()));
    std::vector<uint8_t> k(bytes), v(bytes);
    // A build without the block types (TESSERA_QUANTIZED=OFF) has no such rows.
    if (tessera_convert(TESSERA_F32, type, int64_t(kf.size()), kf.data(), k.data()) ==
        TESSERA_UNSUPPORTED)
      continue;
    must(tessera_convert(TESSERA_F32, type, int64_t(vf.size()), vf.data(), v.data()));
    std::vector<float> o(q.size());
    tessera_attention_desc desc;
    must(tessera_attention_desc_init(&desc, 1, qh, kvh, 1, kv, d, d));
    desc.k_type = desc.v_type = type;
    const double t = median_seconds(
        [&] { must(tessera_attention(&desc, q.data(), k.data(), v.data(), o.data())); });
    char name[96];
    std::snprintf(name, sizeof name, "attention decode kv %lld, %lld/%lld heads, d 128, %s K/V",
                  (long long)kv, (long long)qh, (long long)kvh,
                  type == TESSERA_F32    ? "f32"
                  : type == TESSERA_F16  ? "f16"
                  : type == TESSERA_Q8_0 ? "q8_0"
                                         : "q4_0");
    const double kv_bytes = double(k.size() + v.size());
    rows.push_back({name, threads, kv_bytes / t, true, mc.read_bps, kv_bytes});
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) {
      g_smoke = true;
    } else if (std::strcmp(argv[i], "--quick") != 0) {
      std::fprintf(stderr, "usage: %s [--quick] [--smoke]\n", argv[0]);
      return 2;
    }
  }
  const auto start = Clock::now();
  const int hw = std::max(1, int(std::thread::hardware_concurrency()));
  std::vector<int> counts{1};
  if (hw > 1) counts.push_back(hw);
  std::vector<Row> rows;
  std::vector<Machine> machines;
  int step = 0;
  const int steps = 4 * int(counts.size());
  for (int threads : counts) {
    if (tessera_set_num_threads(threads) != TESSERA_OK) return 1;
    const auto progress = [&](const char* what) {
      std::fprintf(stderr, "[%d/%d] %s, %d thread%s (%.0f s)\n", ++step, steps, what, threads,
                   threads > 1 ? "s" : "", seconds_since(start));
    };
    progress("FMA peak and bandwidth");
    machines.push_back(measure_machine(threads));
    const Machine& mc = machines.back();
    progress("SGEMM");
    gemm_rows(rows, threads, mc);
    progress("softmax");
    softmax_rows(rows, threads, mc);
    progress("attention");
    attention_rows(rows, threads, mc);
  }
  if (tessera_set_num_threads(0) != TESSERA_OK) return 1;

  std::printf("tessera %s, kernel table %s, %d hardware threads%s\n\n", tessera_version(),
              tessera_isa_name(), hw, g_smoke ? " (--smoke: small shapes, not timings)" : "");
  std::printf("| threads | FMA peak GFLOP/s | read GB/s | copy GB/s (read + write) |\n");
  std::printf("|---|---|---|---|\n");
  for (size_t i = 0; i < counts.size(); ++i)
    std::printf("| %d | %.1f | %.1f | %.1f |\n", counts[i], machines[i].peak_flops / 1e9,
                machines[i].read_bps / 1e9, machines[i].copy_bps / 1e9);
  // A byte-bound row whose bytes fit in the last-level cache reads that cache, not memory: it
  // names the cache instead of a fraction of the memory bandwidth (which it can pass).
  int level = 0;
  const int64_t llc = llc_bytes(level);
  std::printf("\n| operation | threads | rate | of |\n|---|---|---|---|\n");
  for (const Row& r : rows) {
    char of[96];
    if (r.bytes && llc > 0 && r.footprint <= double(llc))
      std::snprintf(of, sizeof of, "in L%d (%.0f of %lld MB): no memory ceiling", level,
                    r.footprint / 1048576.0, (long long)(llc >> 20));
    else
      std::snprintf(of, sizeof of, "%.0f%% of %s%s", 100.0 * r.rate / r.ceiling,
                    r.bytes
                        ? (r.what.rfind("softmax", 0) == 0 ? "copy bandwidth" : "read bandwidth")
                        : "FMA peak",
                    r.rate > r.ceiling && !g_smoke ? " (above it: flagged)" : "");
    std::printf("| %s | %d | %.1f %s | %s |\n", r.what.c_str(), r.threads, r.rate / 1e9,
                r.bytes ? "GB/s" : "GFLOP/s", of);
  }
  std::printf("\n%zu rows in %.0f s\n", rows.size(), seconds_since(start));
  return 0;
}
