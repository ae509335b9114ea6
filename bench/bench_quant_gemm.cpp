// Block-type weights (q8_0, q4_0) against 16-bit and float32 ones, each way alternated in one
// process (15 rounds of ~15 ms slices, medians of the per-round ratios), 1 and 2 threads:
//   gemv  1 x 8192 x 8192, B^T (weights as rows): the weights packed once (sgemm_pack_b16 /
//         sgemm_pack_bq, as a prepared layer holds them) and as stored (gemm_ex), beside a read
//         loop over 256 MB: GB/s of the bytes stored, and the fraction of the read loop's;
//   gemm  512 x 4096 x 4096: sgemm in float32, q8_0 / q4_0 through gemm_ex (packed per call)
//         and prepacked, and oneDNN's dnnl_gemm_u8s8s32 (one offset and no scales: the integer
//         product alone) where it loads: GOP/s and the fraction of the table's vpdpbusd / sdot
//         peak loop (int8_peak%).
// Every call is checked before it is timed.
#include <string>
#include <vector>

#include "harness.hpp"
#include "peers.hpp"
#include "tessera/convert.hpp"
#include "tessera/gemm.hpp"

namespace bench {
namespace bench_quant_gemm {
namespace {

using tessera::DType;
using tessera::Transpose;

struct Weights {
  int64_t n, k;
  std::vector<float> a, c;
  std::vector<float> f32;
  std::vector<uint16_t> f16;
  std::vector<uint8_t> q[2];
  std::vector<float> packed16, packedq[2];
  Weights(int64_t m, int64_t n_, int64_t k_, bool keep_f32) : n(n_), k(k_) {
    a = random_floats(size_t(m * k), 1);
    c.assign(size_t(m * n), 0.0f);
    f32 = random_floats(size_t(n * k), 2);
    f16.resize(f32.size());
    setup_ok(tessera::convert(DType::f32, DType::f16, int64_t(f32.size()), f32.data(), f16.data()),
             "convert to f16");
    const size_t b16 = tessera::sgemm_pack_b16_size(Transpose::trans, k, n);
    packed16.resize(b16 / 4 + 1);
    setup_ok(tessera::sgemm_pack_b16(Transpose::trans, k, n, DType::f16, f16.data(), k,
                                     packed16.data(), b16),
             "sgemm_pack_b16");
    for (int t = 0; t < 2; ++t) {
      const DType ty = t == 0 ? DType::q8_0 : DType::q4_0;
      q[t].resize(tessera_dtype_size(tessera_dtype(ty), int64_t(f32.size())));
      setup_ok(tessera::convert(DType::f32, ty, int64_t(f32.size()), f32.data(), q[t].data()),
               "convert to a block type");
      const size_t bytes = tessera::sgemm_pack_bq_size(Transpose::trans, k, n, ty);
      packedq[t].resize(bytes / 4 + 1);
      setup_ok(tessera::sgemm_pack_bq(Transpose::trans, k, n, ty, q[t].data(), k, packedq[t].data(),
                                      bytes),
               "sgemm_pack_bq");
    }
    if (!keep_f32) f32 = {};
  }
  tessera::Status packed(int m, const void* p) {
    const auto st = tessera::sgemm_packed(Transpose::no_trans, m, n, k, 1.0f, a.data(), k, p, 0.0f,
                                          c.data(), n);
    benchmark::DoNotOptimize(c.data());
    return st;
  }
  tessera::Status stored(int m, int t) {
    const auto st =
        tessera::gemm_ex(Transpose::no_trans, Transpose::trans, m, n, k, 1.0f, DType::f32, a.data(),
                         k, t == 0 ? DType::q8_0 : DType::q4_0, q[t].data(), k, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
    return st;
  }
};

struct Way {
  std::string name;
  double bytes;
  std::function<tessera::Status()> run;
};

// Times every way alternately; counters <name>_us, <name>_GBps (bytes / time) and, for the
// ways after the first, <name>_over_<first> (the first's time over theirs: a speedup).
Alternated measure(benchmark::State& state, int threads, const std::vector<Way>& ways) {
  std::vector<std::function<void()>> fs;
  for (const Way& w : ways) {
    if (!ok(state, w.run())) return {};
    fs.push_back([&w] { w.run(); });
  }
  const Alternated t = alternate(state, threads, fs);
  for (size_t i = 0; i < ways.size(); ++i) {
    state.counters[ways[i].name + "_us"] = t.seconds[i] * 1e6;
    if (ways[i].bytes > 0)
      state.counters[ways[i].name + "_GBps"] = ways[i].bytes / t.seconds[i] * 1e-9;
    if (i > 0) state.counters[ways[i].name + "_over_" + ways[0].name] = 1.0 / t.over_first[i];
  }
  return t;
}

void register_gemv(int threads) {
  constexpr int64_t N = 8192, K = 8192;
  const std::string name =
      "quant_gemm/gemv/m:1/n:8192/k:8192/B^T/threads:" + std::to_string(threads);
  benchmark::RegisterBenchmark(
      name.c_str(),
      [threads](benchmark::State& state) {
        Weights w(1, N, K, false);
        const std::vector<float> big = random_floats(size_t(64) << 20, 5);  // 256 MB: past any L3
        std::vector<Way> ways = {
            {"f16_packed", 2.0 * N * K, [&] { return w.packed(1, w.packed16.data()); }},
            {"q8_0_packed", double(w.q[0].size()),
             [&] { return w.packed(1, w.packedq[0].data()); }},
            {"q4_0_packed", double(w.q[1].size()),
             [&] { return w.packed(1, w.packedq[1].data()); }},
            {"q8_0_stored", double(w.q[0].size()), [&] { return w.stored(1, 0); }},
            {"q4_0_stored", double(w.q[1].size()), [&] { return w.stored(1, 1); }},
            {"read", 4.0 * double(big.size()), [&] {
               benchmark::DoNotOptimize(sum_over_threads(big));
               return tessera::Status::ok;
             }}};
        const Alternated t = measure(state, threads, ways);
        if (t.seconds.empty()) return;
        const double read = ways.back().bytes / t.seconds.back();
        for (size_t i = 0; i + 1 < ways.size(); ++i)
          state.counters[ways[i].name + "_read%"] = 100.0 * ways[i].bytes / t.seconds[i] / read;
      })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

using U8s8Gemm = int (*)(char, char, char, int64_t, int64_t, int64_t, float, const uint8_t*,
                         int64_t, uint8_t, const int8_t*, int64_t, int8_t, float, int32_t*, int64_t,
                         const int32_t*);

void register_gemm(int threads) {
  constexpr int64_t M = 512, N = 4096, K = 4096;
  const std::string name =
      "quant_gemm/gemm/m:512/n:4096/k:4096/B^T/threads:" + std::to_string(threads);
  benchmark::RegisterBenchmark(
      name.c_str(),
      [threads](benchmark::State& state) {
        Weights w(M, N, K, true);
        const double ops = 2.0 * M * N * K;
        std::vector<Way> ways = {
            {"f32", 0,
             [&] {
               return tessera::sgemm(Transpose::no_trans, Transpose::trans, M, N, K, 1.0f,
                                     w.a.data(), K, w.f32.data(), K, 0.0f, w.c.data(), N);
             }},
            {"q8_0", 0, [&] { return w.stored(M, 0); }},
            {"q4_0", 0, [&] { return w.stored(M, 1); }},
            {"q8_0_packed", 0, [&] { return w.packed(M, w.packedq[0].data()); }},
            {"q4_0_packed", 0, [&] { return w.packed(M, w.packedq[1].data()); }}};
        // oneDNN's integer GEMM on the same shape (random bytes; its threads are OpenMP's).
        std::vector<uint8_t> au(size_t(M * K));
        std::vector<int8_t> bs(size_t(N * K));
        std::vector<int32_t> ci(size_t(M * N));
        for (size_t i = 0; i < au.size(); ++i) au[i] = uint8_t(w.a[i] * 100 + 128);
        for (size_t i = 0; i < bs.size(); ++i) bs[i] = int8_t(w.f32[i] * 60);
        const int32_t co = 0;
        for (const GemmPeer& peer : gemm_peers())
          if (peer.u8s8_fn) {
            peer.set_threads(peer, threads);
            const auto fn = reinterpret_cast<U8s8Gemm>(peer.u8s8_fn);
            ways.push_back({"onednn_u8s8s32", 0, [&, fn] {
                              const int st = fn('N', 'T', 'F', M, N, K, 1.0f, au.data(), K, 0,
                                                bs.data(), K, 0, 0.0f, ci.data(), N, &co);
                              benchmark::DoNotOptimize(ci.data());
                              return st == 0 ? tessera::Status::ok : tessera::Status::unsupported;
                            }});
            state.SetLabel(peer.kernel);
          }
        const Alternated t = measure(state, threads, ways);
        if (t.seconds.empty()) return;
        const double peak = int8_dot_peak_ops(threads);
        for (size_t i = 0; i < ways.size(); ++i) {
          state.counters[ways[i].name + "_GOPs"] = ops / t.seconds[i] * 1e-9;
          if (peak > 0 && i > 0)
            state.counters[ways[i].name + "_int8_peak%"] = 100.0 * ops / t.seconds[i] / peak;
        }
        if (ways.back().name == "onednn_u8s8s32")  // medians of the per-round ratios
          for (size_t i = 1; i + 1 < ways.size(); ++i) {
            std::vector<double> r;
            for (const auto& round : t.rounds) r.push_back(round.back() / round[i]);
            state.counters[ways[i].name + "_over_onednn"] = median(r);
          }
      })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace bench_quant_gemm

void register_quant_gemm() {
  using namespace bench_quant_gemm;
  for (int threads : thread_counts()) {
    register_gemv(threads);
    register_gemm(threads);
  }
}

}  // namespace bench
