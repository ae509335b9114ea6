// SGEMM: square sizes and the shapes attention makes, on 1 and all threads, Tessera next to
// every peer found, as FLOP/s (2 m n k) and as a fraction of the measured FMA peak.
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness.hpp"
#include "peers.hpp"
#include "tessera/gemm.hpp"
#include "tessera/threading.hpp"

namespace bench {
namespace bench_gemm {
namespace {

using tessera::Transpose;

struct Shape {
  const char* label;
  int64_t m, n, k, batch;
  Transpose tb;
  // Operands start on 64-byte lines (as the tensors of most frameworks do), or 16 bytes past
  // one (where glibc's malloc puts large std::vector buffers), the same for every library.
  bool aligned = false;
};

// Q K^T products are NT (keys are rows); P V and projections are NN.
const Shape kShapes[] = {
    {"square", 64, 64, 64, 1, Transpose::no_trans},
    {"square", 128, 128, 128, 1, Transpose::no_trans},
    {"square", 256, 256, 256, 1, Transpose::no_trans},
    {"square", 512, 512, 512, 1, Transpose::no_trans},
    {"square-aligned", 256, 256, 256, 1, Transpose::no_trans, true},
    {"square-aligned", 512, 512, 512, 1, Transpose::no_trans, true},
    {"square", 1024, 1024, 1024, 1, Transpose::no_trans},
    {"square", 2048, 2048, 2048, 1, Transpose::no_trans},
    {"scores_QKt", 4096, 4096, 64, 1, Transpose::trans},
    {"PV", 4096, 64, 4096, 1, Transpose::no_trans},
    {"decode_qKt", 1, 4096, 128, 1, Transpose::trans},
    // Decode's P V (a GEMV: one probability row against V), and a 4-token step through a
    // d_model 1024 projection.
    {"decode_PV", 1, 128, 4096, 1, Transpose::no_trans},
    {"few_tokens_proj", 4, 1024, 1024, 1, Transpose::no_trans},
    {"batched", 64, 64, 64, 256, Transpose::trans},
    {"batched", 512, 512, 512, 8, Transpose::no_trans},
};

// family: "sgemm" for the rows of one library, "sgemm_pair" for the paired rows.
std::string shape_name(const Shape& s, const char* family = "sgemm") {
  std::string name = std::string(family) + "/" + s.label + "/m:" + std::to_string(s.m) +
                     "/n:" + std::to_string(s.n) + "/k:" + std::to_string(s.k);
  if (s.batch > 1) name += "/batch:" + std::to_string(s.batch);
  return name + (s.tb == Transpose::trans ? "/NT" : "/NN");
}

struct Operands {
  std::vector<float> a_store, b_store, c_store;
  float *a, *b, *c;
  int64_t lda, ldb, ldc, sa, sb, sc;
  explicit Operands(const Shape& s)
      : lda(s.k),
        ldb(s.tb == Transpose::trans ? s.k : s.n),
        ldc(s.n),
        sa(s.m * s.k),
        sb(s.k * s.n),
        sc(s.m * s.n) {
    // 20 floats of slack: the start moves by up to 15 floats, then 4 more when misaligned.
    a_store = random_floats(size_t(sa * s.batch + 20), 1);
    b_store = random_floats(size_t(sb * s.batch + 20), 2);
    c_store = random_floats(size_t(sc * s.batch + 20), 3);
    auto start = [&](std::vector<float>& v) {
      const auto misalign = reinterpret_cast<uintptr_t>(v.data()) % 64 / sizeof(float);
      return v.data() + (16 - misalign) % 16 + (s.aligned ? 0 : 4);
    };
    a = start(a_store), b = start(b_store), c = start(c_store);
  }
};

// One product (or strided batch) of shape s by Tessera, on the calling thread's arena.
tessera::Status tessera_product(const Shape& s, const Operands& op) {
  if (s.batch == 1)
    return tessera::sgemm(Transpose::no_trans, s.tb, s.m, s.n, s.k, 1.0f, op.a, op.lda, op.b,
                          op.ldb, 0.0f, op.c, op.ldc);
  return tessera::sgemm_strided_batched(Transpose::no_trans, s.tb, s.m, s.n, s.k, 1.0f, op.a,
                                        op.lda, op.sa, op.b, op.ldb, op.sb, 0.0f, op.c, op.ldc,
                                        op.sc, s.batch);
}

// Whether C holds the product (16 elements of the first item, each against its double sum
// within SGEMM's bound): a row times only a call that computed what it claims.
bool product_right(benchmark::State& state, const Shape& s, const Operands& op) {
  for (int e = 0; e < 16; ++e) {
    const int64_t i = (e * 7919) % s.m, j = (e * 104729) % s.n;
    double sum = 0, mag = 0;
    for (int64_t p = 0; p < s.k; ++p) {
      const double t = double(op.a[i * op.lda + p]) *
                       op.b[s.tb == Transpose::trans ? j * op.ldb + p : p * op.ldb + j];
      sum += t, mag += std::fabs(t);
    }
    if (std::fabs(op.c[i * op.ldc + j] - sum) > 2 * std::sqrt(double(s.k)) * 0x1p-24 * mag) {
      state.SkipWithError("the product is wrong");
      return false;
    }
  }
  return true;
}

// The same by a peer (a batch as one call per item: none of them has a strided batched sgemm).
void peer_product(const GemmPeer& peer, const Shape& s, const Operands& op) {
  for (int64_t i = 0; i < s.batch; ++i)
    peer.sgemm(peer, Transpose::no_trans, s.tb, s.m, s.n, s.k, 1.0f, op.a + i * op.sa, op.lda,
               op.b + i * op.sb, op.ldb, 0.0f, op.c + i * op.sc, op.ldc);
}

// isa: a kernel table to force for this row (its peak% then refers to that table's peak), or
// null for the dispatcher's choice.
void register_tessera(const Shape& s, int threads, const char* isa = nullptr) {
  const std::string name = shape_name(s) + "/tessera" + (isa ? std::string("-") + isa : "") +
                           "/threads:" + std::to_string(threads);
  benchmark::RegisterBenchmark(name.c_str(),
                               [s, threads, isa](benchmark::State& state) {
                                 const std::string default_isa = tessera::isa_name();
                                 if (isa) tessera::set_isa(isa);
                                 Operands op(s);
                                 {
                                   tbb::task_arena arena(threads);
                                   tessera::Status st;
                                   arena.execute([&] { st = tessera_product(s, op); });
                                   if (!ok(state, st) || !product_right(state, s, op)) {
                                     if (isa) tessera::set_isa(default_isa.c_str());
                                     return;
                                   }
                                 }
                                 run_in_arena(state, threads, [&] {
                                   // (its status checked before the loop)
                                   (void)tessera_product(s, op);
                                   benchmark::DoNotOptimize(op.c);
                                 });
                                 const double flops = 2.0 * s.m * s.n * s.k * s.batch;
                                 set_rates(state, flops, 0);
                                 set_peak_fraction(state, flops, threads);
                                 set_peak_now_fraction(state, flops, threads);
                                 if (isa) tessera::set_isa(default_isa.c_str());
                               })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

void register_peer(const Shape& s, int threads, const GemmPeer& peer) {
  const std::string name = shape_name(s) + "/" + peer.name + "/threads:" + std::to_string(threads);
  benchmark::RegisterBenchmark(name.c_str(),
                               [s, threads, &peer](benchmark::State& state) {
                                 Operands op(s);
                                 peer.set_threads(peer, threads);
                                 for (auto _ : state) {
                                   peer_product(peer, s, op);
                                   benchmark::DoNotOptimize(op.c);
                                 }
                                 const double flops = 2.0 * s.m * s.n * s.k * s.batch;
                                 set_rates(state, flops, 0);
                                 set_peak_fraction(state, flops, threads);
                                 state.SetLabel(peer.kernel);
                               })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

// Tessera and one peer in alternating slices of about 10 ms, on 1 thread: each benchmark
// iteration is one pair of slices (the order swapped every pair), and "ratio" is Tessera's rate
// over the peer's within the pair. This VM's clock drifts by 10-20% within minutes, so two rows
// of a run, a second apart, can differ by more than the libraries do; the two halves of a pair
// are 10 ms apart. 1 thread only: on 2, a peer's OpenMP workers keep spinning for ~14 ms after
// its call and take the second core from the slice after it, and an idle gap to let them stop
// makes the VM slow to wake its second vCPU (Tessera paired with itself read 347 against 304).
constexpr int kPairs = 15;

void register_pair(const Shape& s, const GemmPeer& peer) {
  const std::string name = shape_name(s, "sgemm_pair") + "/tessera_vs_" + peer.name;
  benchmark::RegisterBenchmark(
      name.c_str(),
      [s, &peer](benchmark::State& state) {
        Operands op(s);
        peer.set_threads(peer, 1);
        tbb::task_arena arena(1);
        const double flops = 2.0 * s.m * s.n * s.k * s.batch;
        // Calls per slice, each library's own: sized from a first slice of one call (which also
        // does the first touch and starts the thread pools), so that a slow peer's slice (the
        // decode rows on OpenBLAS's Prescott kernel: 6 GFLOP/s) is not 25 times Tessera's.
        int64_t calls[2] = {1, 1};
        auto slice = [&](bool ours) {
          const auto t0 = std::chrono::steady_clock::now();
          if (ours) {
            arena.execute([&] {
              for (int64_t i = 0; i < calls[1]; ++i) tessera_product(s, op);
            });
          } else {
            for (int64_t i = 0; i < calls[0]; ++i) peer_product(peer, s, op);
          }
          benchmark::DoNotOptimize(op.c);
          const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
          return flops * double(calls[ours]) / dt.count();
        };
        if (!ok(state, tessera_product(s, op)) || !product_right(state, s, op)) return;
        for (int ours = 0; ours < 2; ++ours)
          calls[ours] = std::max<int64_t>(1, int64_t(0.01 * slice(ours != 0) / flops));
        std::vector<double> ratio, ours_rate, peer_rate;
        for (auto _ : state) {
          const bool ours_first = ratio.size() % 2 == 0;
          const double first = slice(ours_first), second = slice(!ours_first);
          ours_rate.push_back(ours_first ? first : second);
          peer_rate.push_back(ours_first ? second : first);
          ratio.push_back(ours_rate.back() / peer_rate.back());
        }
        state.counters["ratio"] = median(ratio);
        state.counters["tessera_GFLOP/s"] = median(ours_rate) / 1e9;
        state.counters["peer_GFLOP/s"] = median(peer_rate) / 1e9;
        state.SetLabel(peer.kernel);
      })
      ->Iterations(kPairs)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace bench_gemm

void register_gemm() {
  using namespace bench_gemm;
  for (const Shape& s : kShapes)
    for (int t : thread_counts()) {
      register_tessera(s, t);
      for (const GemmPeer& p : gemm_peers()) register_peer(s, t, p);
    }
  // The AVX2 kernels on an AVX-512 machine, against the AVX2 peak.
  if (tessera::isa_name() == std::string("avx512") && tessera::isa_supported("avx2"))
    for (const Shape& s : kShapes)
      if (s.label == std::string("square") && s.m == 1024) register_tessera(s, 1, "avx2");
  for (const Shape& s : kShapes)
    for (const GemmPeer& p : gemm_peers()) register_pair(s, p);
}

}  // namespace bench
