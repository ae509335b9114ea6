// Two builds of Tessera in one process: the before/after table of a change (DEVELOPERS' 3% rule).
// Each build is a shared libtessera opened with dlopen (RTLD_LOCAL, so their symbols stay apart);
// every row first checks that both builds accept the call and write the same bytes, then times
// them with alternate(): 15 rounds of a ~15 ms slice of each, the order reversed every round.
// Counters: each build's median time, and the median, p25 and p75 of the per-round ratio
// new / old (below 1: the new build is faster).
//   TESSERA_AB_OLD=/path/old/libtessera.so TESSERA_AB_NEW=/path/new/libtessera.so tessera_ab
// (TESSERA_AB_RELATIVE: see ab_row).
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "harness.hpp"
#include "tessera/tessera.h"

namespace {

struct Build {
  void* handle = nullptr;
  std::string error;
  decltype(&tessera_sgemm) sgemm = nullptr;
  decltype(&tessera_softmax) softmax = nullptr;
  decltype(&tessera_logsumexp) logsumexp = nullptr;
  decltype(&tessera_attention_desc_init) desc_init = nullptr;
  decltype(&tessera_attention) attention = nullptr;
  decltype(&tessera_convert) convert = nullptr;
};

template <class F>
void bind(Build& b, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(b.handle, name));
  if (!f && b.error.empty()) b.error = std::string("no symbol ") + name;
}

Build open_build(const char* env) {
  Build b;
  const char* path = std::getenv(env);
  if (!path) {
    b.error = std::string(env) + " is not set";
    return b;
  }
  b.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!b.handle) {
    b.error = dlerror();
    return b;
  }
  bind(b, b.sgemm, "tessera_sgemm");
  bind(b, b.softmax, "tessera_softmax");
  bind(b, b.logsumexp, "tessera_logsumexp");
  bind(b, b.desc_init, "tessera_attention_desc_init");
  bind(b, b.attention, "tessera_attention");
  bind(b, b.convert, "tessera_convert");
  return b;
}

const Build& old_build() {
  static const Build b = open_build("TESSERA_AB_OLD");
  return b;
}
const Build& new_build() {
  static const Build b = open_build("TESSERA_AB_NEW");
  return b;
}

// One row: run(build, out) makes the call into out (a buffer of out_floats) and returns its
// status. Both builds must succeed and agree bitwise before anything is timed.
void ab_row(benchmark::State& state, size_t out_floats,
            const std::function<tessera_status(const Build&, float*)>& run) {
  const Build &o = old_build(), &n = new_build();
  if (!o.error.empty() || !n.error.empty()) {
    state.SkipWithError((o.error.empty() ? n.error : o.error).c_str());
    for (auto _ : state) {
    }
    return;
  }
  const int threads = int(state.range(0));
  std::vector<float> out_old(out_floats), out_new(out_floats);
  tessera_status s_old = TESSERA_OK, s_new = TESSERA_OK;
  tbb::task_arena(threads).execute(
      [&] { s_old = run(o, out_old.data()), s_new = run(n, out_new.data()); });
  if (s_old != TESSERA_OK || s_new != TESSERA_OK) {
    state.SkipWithError("a build rejected the call");
    for (auto _ : state) {
    }
    return;
  }
  // A change that reorders a sum on purpose: TESSERA_AB_RELATIVE=1e-5 lets the outputs differ
  // by that much of the largest |value| (the row's counter max_rel_diff says by how much).
  const char* allowed = std::getenv("TESSERA_AB_RELATIVE");
  double diff = 0, mag = 0;
  for (size_t i = 0; i < out_floats; ++i) {
    diff = std::max(diff, double(std::fabs(out_old[i] - out_new[i])));
    mag = std::max(mag, double(std::fabs(out_old[i])));
  }
  const bool same = std::memcmp(out_old.data(), out_new.data(), out_floats * sizeof(float)) == 0;
  if (!same && !(allowed && diff <= std::atof(allowed) * mag)) {
    state.SkipWithError("the builds' results differ");
    for (auto _ : state) {
    }
    return;
  }
  if (!same) state.counters["max_rel_diff"] = diff / mag;
  // Both write one buffer while timed: where it sits against the inputs (4K aliasing of a
  // row's loads and stores) then cannot favour either build.
  const bench::Alternated t = bench::alternate(
      state, threads, {[&] { run(o, out_old.data()); }, [&] { run(n, out_old.data()); }});
  std::vector<double> ratios;
  for (const auto& r : t.rounds) ratios.push_back(r[1] / r[0]);
  std::sort(ratios.begin(), ratios.end());
  state.counters["old_us"] = t.seconds[0] * 1e6;
  state.counters["new_us"] = t.seconds[1] * 1e6;
  state.counters["new/old"] = t.over_first[1];
  state.counters["p25"] = ratios[ratios.size() / 4];
  state.counters["p75"] = ratios[ratios.size() * 3 / 4];
}

void sgemm_row(benchmark::State& state, bool tb, int64_t m, int64_t n, int64_t k) {
  const auto a = bench::random_floats(size_t(m * k), 1), b = bench::random_floats(size_t(k * n), 2);
  ab_row(state, size_t(m * n), [&](const Build& x, float* c) {
    return x.sgemm(TESSERA_NO_TRANS, tb ? TESSERA_TRANS : TESSERA_NO_TRANS, m, n, k, 1.0f, a.data(),
                   k, b.data(), tb ? k : n, 0.0f, c, n);
  });
}

void softmax_row(benchmark::State& state, bool lse, int64_t rows, int64_t cols) {
  const auto x = bench::random_floats(size_t(rows * cols), 3, -8.0f, 8.0f);
  ab_row(state, size_t(lse ? rows : rows * cols), [&](const Build& b, float* y) {
    return lse ? b.logsumexp(rows, cols, x.data(), cols, 1.0f, y)
               : b.softmax(rows, cols, x.data(), cols, y, cols, 1.0f);
  });
}

// Attention over BHSD tensors; K and V stored as `type` (converted by the old build once).
void attention_row(benchmark::State& state, int64_t hq, int64_t hkv, int64_t lq, int64_t lkv,
                   int64_t d, bool causal, tessera_dtype type) {
  const auto q = bench::random_floats(size_t(hq * lq * d), 4);
  const auto k = bench::random_floats(size_t(hkv * lkv * d), 5);
  const auto v = bench::random_floats(size_t(hkv * lkv * d), 6);
  // Bytes per 32 values: 16-bit types 64, q8_0 34, q4_0 18.
  const size_t per32 = type == TESSERA_Q8_0 ? 34 : type == TESSERA_Q4_0 ? 18 : 64;
  std::vector<uint8_t> ks(k.size() / 32 * per32 + 64), vs(v.size() / 32 * per32 + 64);
  const void *kp = k.data(), *vp = v.data();
  if (type != TESSERA_F32 && old_build().error.empty()) {
    if (old_build().convert(TESSERA_F32, type, int64_t(k.size()), k.data(), ks.data()) !=
            TESSERA_OK ||
        old_build().convert(TESSERA_F32, type, int64_t(v.size()), v.data(), vs.data()) !=
            TESSERA_OK) {
      state.SkipWithError("the old build does not convert to this type");
      return;
    }
    kp = ks.data(), vp = vs.data();
  }
  ab_row(state, size_t(hq * lq * d), [&](const Build& b, float* o) {
    tessera_attention_desc desc;
    b.desc_init(&desc, 1, hq, hkv, lq, lkv, d, d);
    desc.causal = causal ? 1 : 0;
    desc.align = TESSERA_ALIGN_BOTTOM_RIGHT;
    desc.k_type = desc.v_type = type;
    return b.attention(&desc, q.data(), kp, vp, o);
  });
}

// Decode over a pool of `page`-row pages, [page][KV head][row][d], handed out shuffled (as a
// serving pool's free list leaves them): the BHSD buffers above read as such a pool, of f16 or
// q8_0 rows (bytes; the strides count values either way).
void paged_row(benchmark::State& state, int64_t page, tessera_dtype type) {
  constexpr int64_t hq = 32, hkv = 8, lkv = 32768, d = 128;
  const int64_t row_bytes = type == TESSERA_Q8_0 ? d / 32 * 34 : 2 * d;
  const auto q = bench::random_floats(size_t(hq * d), 4);
  const auto k = bench::random_floats(size_t(hkv * lkv * d), 5);
  const auto v = bench::random_floats(size_t(hkv * lkv * d), 6);
  std::vector<uint8_t> ks(size_t(hkv * lkv * row_bytes)), vs(ks.size());
  if (old_build().error.empty() && (old_build().convert(TESSERA_F32, type, int64_t(k.size()),
                                                        k.data(), ks.data()) != TESSERA_OK ||
                                    old_build().convert(TESSERA_F32, type, int64_t(v.size()),
                                                        v.data(), vs.data()) != TESSERA_OK)) {
    state.SkipWithError("the old build does not convert to this type");
    return;
  }
  std::vector<int32_t> table(size_t(lkv / page));
  for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t(i);
  std::shuffle(table.begin(), table.end(), std::mt19937(7));
  ab_row(state, size_t(hq * d), [&](const Build& b, float* o) {
    tessera_attention_desc desc;
    b.desc_init(&desc, 1, hq, hkv, 1, lkv, d, d);
    desc.causal = 1;
    desc.align = TESSERA_ALIGN_BOTTOM_RIGHT;
    desc.k_type = desc.v_type = type;
    for (int64_t* st : {desc.k_stride, desc.v_stride})
      st[0] = hkv * page * d, st[1] = page * d, st[2] = d;
    desc.block_table = table.data();
    desc.block_table_stride = int64_t(table.size());
    desc.page_size = page;
    desc.num_pages = int64_t(table.size());
    return b.attention(&desc, q.data(), ks.data(), vs.data(), o);
  });
}

void threads_1_2(benchmark::internal::Benchmark* b) {
  b->Arg(1)->Arg(2)->Iterations(1)->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK_CAPTURE(sgemm_row, 64, false, 64, 64, 64)->Apply(threads_1_2);
BENCHMARK_CAPTURE(sgemm_row, 256, false, 256, 256, 256)->Apply(threads_1_2);
BENCHMARK_CAPTURE(sgemm_row, 1024, false, 1024, 1024, 1024)->Apply(threads_1_2);
BENCHMARK_CAPTURE(sgemm_row, qkT_4096x4096x64, true, 4096, 4096, 64)->Apply(threads_1_2);
BENCHMARK_CAPTURE(sgemm_row, pv_4096x64x4096, false, 4096, 64, 4096)->Apply(threads_1_2);
BENCHMARK_CAPTURE(sgemm_row, 1x4096x128_bT, true, 1, 4096, 128)->Apply(threads_1_2);
BENCHMARK_CAPTURE(sgemm_row, 4x1024x1024, false, 4, 1024, 1024)->Apply(threads_1_2);
BENCHMARK_CAPTURE(softmax_row, softmax_4096x128, false, 4096, 128)->Apply(threads_1_2);
BENCHMARK_CAPTURE(softmax_row, softmax_64x4096, false, 64, 4096)->Apply(threads_1_2);
BENCHMARK_CAPTURE(softmax_row, softmax_4x65536, false, 4, 65536)->Apply(threads_1_2);
BENCHMARK_CAPTURE(softmax_row, logsumexp_4096x1024, true, 4096, 1024)->Apply(threads_1_2);
BENCHMARK_CAPTURE(attention_row, prefill_8h_L1024_d64_causal, 8, 8, 1024, 1024, 64, true,
                  TESSERA_F32)
    ->Apply(threads_1_2);
BENCHMARK_CAPTURE(attention_row, prefill_8h_L2048_d128, 8, 8, 2048, 2048, 128, false, TESSERA_F32)
    ->Apply(threads_1_2);
BENCHMARK_CAPTURE(attention_row, decode_32_8h_kv4096_d128, 32, 8, 1, 4096, 128, true, TESSERA_F32)
    ->Apply(threads_1_2);
BENCHMARK_CAPTURE(attention_row, decode_32_8h_kv4096_d128_f16, 32, 8, 1, 4096, 128, true,
                  TESSERA_F16)
    ->Apply(threads_1_2);
// A 1B-class model's decode (head 64) just past one chunk and past two.
BENCHMARK_CAPTURE(attention_row, decode_32_8h_kv600_d64_f16, 32, 8, 1, 600, 64, true, TESSERA_F16)
    ->Apply(threads_1_2);
BENCHMARK_CAPTURE(attention_row, decode_32_8h_kv1100_d64_f16, 32, 8, 1, 1100, 64, true, TESSERA_F16)
    ->Apply(threads_1_2);
BENCHMARK_CAPTURE(attention_row, decode_32_8h_kv32768_d128, 32, 8, 1, 32768, 128, true, TESSERA_F32)
    ->Apply(threads_1_2);
BENCHMARK_CAPTURE(attention_row, decode_32_8h_kv32768_d128_f16, 32, 8, 1, 32768, 128, true,
                  TESSERA_F16)
    ->Apply(threads_1_2);
BENCHMARK_CAPTURE(attention_row, decode_32_8h_kv32768_d128_q8_0, 32, 8, 1, 32768, 128, true,
                  TESSERA_Q8_0)
    ->Apply(threads_1_2);
BENCHMARK_CAPTURE(attention_row, decode_32_8h_kv32768_d128_q4_0, 32, 8, 1, 32768, 128, true,
                  TESSERA_Q4_0)
    ->Apply(threads_1_2);

BENCHMARK_CAPTURE(paged_row, decode_paged16_shuffled_kv32768_d128_f16, 16, TESSERA_F16)
    ->Apply(threads_1_2);
BENCHMARK_CAPTURE(paged_row, decode_paged64_shuffled_kv32768_d128_f16, 64, TESSERA_F16)
    ->Apply(threads_1_2);
BENCHMARK_CAPTURE(paged_row, decode_paged16_shuffled_kv32768_d128_q8_0, 16, TESSERA_Q8_0)
    ->Apply(threads_1_2);
BENCHMARK_CAPTURE(paged_row, decode_paged64_shuffled_kv32768_d128_q8_0, 64, TESSERA_Q8_0)
    ->Apply(threads_1_2);

BENCHMARK_MAIN();
