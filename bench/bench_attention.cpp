// Attention: the fused kernel next to the naive unfused composition of Tessera's own sgemm and
// softmax (score matrix materialised), batch 1, fp32, on 1 and all threads. FLOP/s counts
// 4 q_len kv_len d (halved for causal); peak% is against the measured FMA peak.
#include <tbb/blocked_range.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "harness.hpp"
#include "tessera/attention.hpp"
#include "tessera/gemm.hpp"
#include "tessera/softmax.hpp"

namespace bench {
namespace bench_attention {
namespace {

struct Problem {
  const char* label;
  int64_t heads, kv_heads, q_len, kv_len, d;
  bool causal;
};

std::vector<Problem> problems() {
  std::vector<Problem> out;
  for (int64_t L : {256, 512, 1024, 2048, 4096})
    for (int64_t d : {64, 128})
      for (bool causal : {false, true}) out.push_back({"self", 8, 8, L, L, d, causal});
  out.push_back({"cross", 8, 8, 128, 4096, 128, false});
  out.push_back({"gqa", 32, 8, 2048, 2048, 128, true});
  out.push_back({"gqa-repeated", 32, 32, 2048, 2048, 128, true});
  for (int64_t kv : {512, 4096, 32768}) out.push_back({"decode", 32, 32, 1, kv, 128, false});
  out.push_back({"decode-gqa", 32, 8, 1, 4096, 128, false});
  out.push_back({"decode-gqa-repeated", 32, 32, 1, 4096, 128, false});
  return out;
}

std::string name_of(const Problem& p, const char* who, int threads) {
  return std::string("attention/") + p.label + "/heads:" + std::to_string(p.heads) +
         "/kv_heads:" + std::to_string(p.kv_heads) + "/q:" + std::to_string(p.q_len) +
         "/kv:" + std::to_string(p.kv_len) + "/d:" + std::to_string(p.d) +
         (p.causal ? "/causal" : "") + "/" + who + "/threads:" + std::to_string(threads);
}

double flops_of(const Problem& p) {
  const double f = 4.0 * p.heads * p.q_len * p.kv_len * p.d;
  return p.causal ? f / 2 : f;
}

struct Tensors {
  tessera::AttentionDesc desc{};
  std::vector<float> q, k, v, o;
  explicit Tensors(const Problem& p) {
    setup_ok(
        tessera::attention_desc_init(desc, 1, p.heads, p.kv_heads, p.q_len, p.kv_len, p.d, p.d),
        "attention_desc_init");
    desc.causal = p.causal ? 1 : 0;
    desc.align = TESSERA_ALIGN_BOTTOM_RIGHT;
    q = random_floats(size_t(p.heads * p.q_len * p.d), 1);
    k = random_floats(size_t(p.kv_heads * p.kv_len * p.d), 2);
    v = random_floats(size_t(p.kv_heads * p.kv_len * p.d), 3);
    o.resize(q.size());
  }
};

void register_problem(const Problem& p, int threads) {
  benchmark::RegisterBenchmark(
      name_of(p, "fused", threads).c_str(),
      [p, threads](benchmark::State& state) {
        Tensors t(p);
        run_in_arena(state, threads, [&] {
          const auto st =
              tessera::attention(t.desc, t.q.data(), t.k.data(), t.v.data(), t.o.data());
          benchmark::DoNotOptimize(t.o.data());
          return st;
        });
        // Bytes of K and V that must be read (the decode rows compare them with the read ceiling).
        set_rates(state, flops_of(p), 4.0 * p.kv_heads * p.kv_len * p.d * 2);
        set_peak_fraction(state, flops_of(p), threads);
      })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);

  // Unfused: S = scale Q K^T (materialised), causal mask written into S, softmax, O = P V.
  if (std::string(p.label).find("repeated") != std::string::npos) return;
  benchmark::RegisterBenchmark(
      name_of(p, "unfused", threads).c_str(),
      [p, threads](benchmark::State& state) {
        Tensors t(p);
        std::vector<float> s(size_t(p.q_len * p.kv_len));
        const float scale = 1.0f / std::sqrt(float(p.d));
        run_in_arena(state, threads, [&] {
          tessera::Status st = tessera::Status::ok;
          for (int64_t h = 0; h < p.heads && st == tessera::Status::ok; ++h) {
            const float* q = t.q.data() + h * p.q_len * p.d;
            const float* k = t.k.data() + (h / (p.heads / p.kv_heads)) * p.kv_len * p.d;
            const float* v = t.v.data() + (h / (p.heads / p.kv_heads)) * p.kv_len * p.d;
            st = tessera::sgemm(tessera::Transpose::no_trans, tessera::Transpose::trans, p.q_len,
                                p.kv_len, p.d, scale, q, p.d, k, p.d, 0.0f, s.data(), p.kv_len);
            if (p.causal) {
              for (int64_t i = 0; i < p.q_len; ++i)
                for (int64_t j = i + p.kv_len - p.q_len + 1; j < p.kv_len; ++j)
                  s[size_t(i * p.kv_len + j)] = -INFINITY;
            }
            if (st == tessera::Status::ok)
              st =
                  tessera::softmax(p.q_len, p.kv_len, s.data(), p.kv_len, s.data(), p.kv_len, 1.0f);
            if (st == tessera::Status::ok)
              st = tessera::sgemm(tessera::Transpose::no_trans, tessera::Transpose::no_trans,
                                  p.q_len, p.d, p.kv_len, 1.0f, s.data(), p.kv_len, v, p.d, 0.0f,
                                  t.o.data() + h * p.q_len * p.d, p.d);
          }
          benchmark::DoNotOptimize(t.o.data());
          return st;
        });
        set_rates(state, flops_of(p), 0);
        set_peak_fraction(state, flops_of(p), threads);
      })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

// One +inf bias column against the same call without it (L = 512, d = 64, one head, 1 thread),
// alternated in ~10 ms slices in one process: `ratio` is the median over 15 pairs of the +inf
// call's time over the plain call's. Such rows used to go to the reference at run time.
void register_plus_inf_pair() {
  benchmark::RegisterBenchmark(
      "attention/plus-inf-bias-pair/L:512/d:64/threads:1",
      [](benchmark::State& state) {
        const Problem p{"self", 1, 1, 512, 512, 64, false};
        Tensors t(p);
        std::vector<float> zero(512, 0.0f), inf(512, 0.0f);
        inf[100] = INFINITY;
        t.desc.bias_stride[0] = t.desc.bias_stride[1] = t.desc.bias_stride[2] = 0;
        t.desc.bias_stride[3] = 1;  // one row of bias for every query
        auto slice = [&](const std::vector<float>& bias) {
          t.desc.bias = bias.data();
          return seconds_per_call(
              [&] { tessera::attention(t.desc, t.q.data(), t.k.data(), t.v.data(), t.o.data()); },
              10);
        };
        for (const auto* bias : {&zero, &inf}) {
          t.desc.bias = bias->data();
          if (!ok(state,
                  tessera::attention(t.desc, t.q.data(), t.k.data(), t.v.data(), t.o.data())))
            return;
        }
        std::vector<double> ratios, plain, with_inf;
        run_in_arena(state, 1, [&] {
          ratios.clear();
          for (int pair = 0; pair < 15; ++pair) {
            plain.push_back(slice(zero));
            with_inf.push_back(slice(inf));
            ratios.push_back(with_inf.back() / plain.back());
          }
        });
        state.counters["ratio"] = median(ratios);
        state.counters["plain_us"] = median(plain) * 1e6;
        state.counters["inf_us"] = median(with_inf) * 1e6;
      })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace bench_attention

// The read ceiling the decode rows are measured against: one pass over as many bytes as K and V
// of the 32K-key decode (1 GiB, far beyond any cache), split over the threads.
void register_read_ceiling(int threads) {
  using namespace bench_attention;
  const int64_t floats = int64_t(32) * 32768 * 128 * 2;
  const std::string name = "attention/memory-read/bytes:" + std::to_string(floats * 4) +
                           "/threads:" + std::to_string(threads);
  benchmark::RegisterBenchmark(name.c_str(),
                               [floats, threads](benchmark::State& state) {
                                 std::vector<float> x(size_t(floats), 1.0f);
                                 run_in_arena(state, threads, [&] {
                                   const double total = sum_over_threads(x);
                                   benchmark::DoNotOptimize(total);
                                 });
                                 set_rates(state, 0, 4.0 * double(floats));
                               })
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

void register_attention() {
  using namespace bench_attention;
  register_plus_inf_pair();
  for (int t : thread_counts()) register_read_ceiling(t);
  for (const Problem& p : problems())
    for (int t : thread_counts()) register_problem(p, t);
}

}  // namespace bench
