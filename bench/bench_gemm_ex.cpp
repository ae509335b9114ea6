// GEMM with 16-bit operands (tessera::gemm_ex): f32 x f16, f32 x bf16 and bf16 x bf16 next to
// Tessera's float32 sgemm and oneDNN's dnnl_gemm_bf16bf16f32, at 1024^3, the attention score
// shape 4096 x 4096 x 64, the decode weight shape 1 x 4096 x 128 (B^T: weights as rows) and a
// token through a 4096 x 4096 projection stored x W (in x out: 64 MB in float32, past L3), on
// 1 and all threads; and the same with B packed once (float32 panels, or panels kept in 16
// bits). bytes_per_second counts A, B and C once at their stored sizes: the decode
// row is bound by them.
#include <string>

#include "harness.hpp"
#include "peers.hpp"
#include "tessera/convert.hpp"
#include "tessera/gemm.hpp"

namespace bench {
namespace bench_gemm_ex {
namespace {

using tessera::DType;
using tessera::Transpose;

struct ExShape {
  int64_t m, n, k;
  bool tb;
};
constexpr ExShape kExShapes[] = {{1024, 1024, 1024, false},
                                 {4096, 4096, 64, true},
                                 {1, 4096, 128, true},
                                 {1, 4096, 4096, false}};

const char* type_name(DType t) {
  return t == DType::f32 ? "f32" : t == DType::f16 ? "f16" : "bf16";
}
size_t type_bytes(DType t) { return t == DType::f32 ? 4 : 2; }

struct ExOperands {
  std::vector<float> a, b, c;
  std::vector<uint16_t> a16, b16;
  ExOperands(const ExShape& s, DType at, DType bt) {
    a = random_floats(size_t(s.m * s.k), 1);
    b = random_floats(size_t(s.k * s.n), 2);
    c.assign(size_t(s.m * s.n), 0.0f);
    if (at != DType::f32) {
      a16.resize(a.size());
      setup_ok(tessera::convert(DType::f32, at, int64_t(a.size()), a.data(), a16.data()),
               "convert");
    }
    if (bt != DType::f32) {
      b16.resize(b.size());
      setup_ok(tessera::convert(DType::f32, bt, int64_t(b.size()), b.data(), b16.data()),
               "convert");
    }
  }
  const void* a_in() const { return a16.empty() ? static_cast<const void*>(a.data()) : a16.data(); }
  const void* b_in() const { return b16.empty() ? static_cast<const void*>(b.data()) : b16.data(); }
};

std::string ex_name(const ExShape& s, const std::string& who, int threads) {
  return "gemm_ex/m:" + std::to_string(s.m) + "/n:" + std::to_string(s.n) +
         "/k:" + std::to_string(s.k) + (s.tb ? "/tb" : "") + "/" + who +
         "/threads:" + std::to_string(threads);
}

// A and B read once, C written once (beta = 0 reads none of it).
double bytes_of(const ExShape& s, DType at, DType bt) {
  return double(s.m * s.k * type_bytes(at) + s.k * s.n * type_bytes(bt) + s.m * s.n * 4);
}

void register_ex(const ExShape& s, DType at, DType bt, int threads) {
  const std::string who = std::string("tessera_") + type_name(at) + "x" + type_name(bt);
  benchmark::RegisterBenchmark(
      ex_name(s, who, threads).c_str(),
      [s, at, bt, threads](benchmark::State& state) {
        ExOperands op(s, at, bt);
        const int64_t ldb = s.tb ? s.k : s.n;
        run_in_arena(state, threads, [&] {
          const auto st = tessera::gemm_ex(
              Transpose::no_trans, s.tb ? Transpose::trans : Transpose::no_trans, s.m, s.n, s.k,
              1.0f, at, op.a_in(), s.k, bt, op.b_in(), ldb, 0.0f, op.c.data(), s.n);
          benchmark::DoNotOptimize(op.c.data());
          return st;
        });
        const double flops = 2.0 * s.m * s.n * s.k;
        set_rates(state, flops, bytes_of(s, at, bt));
        set_peak_fraction(state, flops, threads);
        if (at == DType::bf16 && bt == DType::bf16) set_bf16_peak_fraction(state, flops, threads);
      })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

// B packed once (sgemm_pack_b for f32, sgemm_pack_b16 for f16/bf16, kept in 16 bits), then
// sgemm_packed: a prepared layer's projections, the packing outside the timed loop.
void register_packed(const ExShape& s, DType bt, int threads) {
  const std::string who = std::string("tessera_f32x") + type_name(bt) + "_packed";
  benchmark::RegisterBenchmark(
      ex_name(s, who, threads).c_str(),
      [s, bt, threads](benchmark::State& state) {
        ExOperands op(s, DType::f32, bt);
        const Transpose tb = s.tb ? Transpose::trans : Transpose::no_trans;
        const int64_t ldb = s.tb ? s.k : s.n;
        const size_t bytes = bt == DType::f32 ? tessera::sgemm_pack_b_size(tb, s.k, s.n)
                                              : tessera::sgemm_pack_b16_size(tb, s.k, s.n);
        std::vector<float> packed(bytes / 4 + 1);
        const tessera::Status packing =
            bt == DType::f32
                ? tessera::sgemm_pack_b(tb, s.k, s.n, op.b.data(), ldb, packed.data(), bytes)
                : tessera::sgemm_pack_b16(tb, s.k, s.n, bt, op.b_in(), ldb, packed.data(), bytes);
        if (!ok(state, packing)) return;
        run_in_arena(state, threads, [&] {
          const auto st =
              tessera::sgemm_packed(Transpose::no_trans, s.m, s.n, s.k, 1.0f, op.a.data(), s.k,
                                    packed.data(), 0.0f, op.c.data(), s.n);
          benchmark::DoNotOptimize(op.c.data());
          return st;
        });
        const double flops = 2.0 * s.m * s.n * s.k;
        set_rates(state, flops, bytes_of(s, DType::f32, bt));
        set_peak_fraction(state, flops, threads);
      })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

using Bf16Gemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t,
                         const uint16_t*, int64_t, float, float*, int64_t);

void register_onednn_bf16(const ExShape& s, const GemmPeer& peer, int threads) {
  benchmark::RegisterBenchmark(
      ex_name(s, "onednn_bf16xbf16", threads).c_str(),
      [s, &peer, threads](benchmark::State& state) {
        ExOperands op(s, DType::bf16, DType::bf16);
        peer.set_threads(peer, threads);
        const auto gemm = reinterpret_cast<Bf16Gemm>(peer.bf16_fn);
        const int64_t ldb = s.tb ? s.k : s.n;
        for (auto _ : state) {
          if (gemm('N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, op.a16.data(), s.k, op.b16.data(),
                   ldb, 0.0f, op.c.data(), s.n) != 0) {
            state.SkipWithError("dnnl_gemm_bf16bf16f32 failed (no bf16 support on this CPU?)");
            break;
          }
          benchmark::DoNotOptimize(op.c.data());
        }
        const double flops = 2.0 * s.m * s.n * s.k;
        set_rates(state, flops, bytes_of(s, DType::bf16, DType::bf16));
        set_peak_fraction(state, flops, threads);
        set_bf16_peak_fraction(state, flops, threads);
        state.SetLabel(peer.kernel);
      })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace
}  // namespace bench_gemm_ex

void register_gemm_ex() {
  using namespace bench_gemm_ex;
  const DType pairs[][2] = {{DType::f32, DType::f32},
                            {DType::f32, DType::f16},
                            {DType::f32, DType::bf16},
                            {DType::bf16, DType::bf16}};
  for (const ExShape& s : kExShapes)
    for (int t : thread_counts()) {
      for (const auto& p : pairs) register_ex(s, p[0], p[1], t);
      for (DType bt : {DType::f32, DType::f16, DType::bf16}) register_packed(s, bt, t);
      for (const GemmPeer& peer : gemm_peers())
        if (peer.bf16_fn) register_onednn_bf16(s, peer, t);
    }
}

}  // namespace bench
