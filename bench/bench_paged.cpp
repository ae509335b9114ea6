// Paged K/V against contiguous K/V, alternated in one process (15 rounds of ~15 ms slices): the
// same values read from one [head][seq][dim] array, or through a block table from a pool of
// pages, in one of two layouts:
//   shuffled   [page][head][row][dim], the sequence's pages at shuffled places in the pool: a
//              head's rows come in runs of one page (16 KB at page 64, f16, d 128);
//   in-order   the same, the pages in the order they were allocated (a fresh pool);
//   head-major [head][page][row][dim], the pages in the order they were allocated (a sequence
//              that grew alone): a head's rows run on across pages.
// Decode (1 query, 32/8 heads, d 128, kv 32768: pages of 16, 64 and 256 rows shuffled and
// head-major, 16 in order; kv 4096, pages of 64) and prefill (L 2048, 8 heads, pages of 16 and 64),
// f16 and q8_0 K/V. Counters: paged_over_contiguous (the median per-round ratio of times: above 1
// paging costs), each side's median time. Both calls are checked first.
#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "harness.hpp"
#include "tessera/tessera.h"

namespace bench {
namespace bench_paged {
namespace {

enum class Layout { shuffled, in_order, head_major };

struct PagedShape {
  int64_t heads, kv_heads, q_len, kv_len, page;
  Layout layout;
};

struct Attn {
  tessera_attention_desc d{};
  std::vector<float> q, o;
  std::vector<uint8_t> k, v;
  std::vector<int32_t> table;
  tessera_status run() {
    const tessera_status st = tessera_attention(&d, q.data(), k.data(), v.data(), o.data());
    benchmark::DoNotOptimize(o.data());
    return st;
  }
};

// The contiguous call (paged = false) or the paged one: the same rows, page by page, in a pool
// of the same size (see the layouts above).
Attn make(const PagedShape& s, tessera_dtype type, bool paged) {
  constexpr int64_t D = 128;
  Attn a;
  setup_ok(tessera_attention_desc_init(&a.d, 1, s.heads, s.kv_heads, s.q_len, s.kv_len, D, D),
           "attention_desc_init");
  a.d.k_type = a.d.v_type = type;
  a.d.causal = 1, a.d.align = TESSERA_ALIGN_BOTTOM_RIGHT;
  a.q = random_floats(size_t(s.heads * s.q_len * D), 1), a.o.resize(a.q.size());
  const auto kf = random_floats(size_t(s.kv_heads * s.kv_len * D), 2);
  const auto vf = random_floats(kf.size(), 3);
  const int64_t row = tessera_dtype_size(type, D), pages = s.kv_len / s.page;
  a.k.resize(size_t(tessera_dtype_size(type, int64_t(kf.size()))));
  a.v.resize(a.k.size());
  setup_ok(tessera_convert(TESSERA_F32, type, int64_t(kf.size()), kf.data(), a.k.data()), "K");
  setup_ok(tessera_convert(TESSERA_F32, type, int64_t(vf.size()), vf.data(), a.v.data()), "V");
  if (!paged) return a;
  // Page p of the sequence goes to pool page table[p], laid out [page][head][row][dim].
  a.table.resize(size_t(pages));
  std::iota(a.table.begin(), a.table.end(), 0);
  if (s.layout == Layout::shuffled) std::shuffle(a.table.begin(), a.table.end(), std::mt19937(4));
  std::vector<uint8_t> kp(a.k.size()), vp(a.v.size());
  const int64_t page_bytes = s.page * row;
  for (int64_t p = 0; p < pages; ++p)
    for (int64_t h = 0; h < s.kv_heads; ++h) {
      const int64_t from = (h * s.kv_len + p * s.page) * row;
      const bool head_major = s.layout == Layout::head_major;
      const int64_t to = head_major ? (h * pages + a.table[size_t(p)]) * page_bytes
                                    : (a.table[size_t(p)] * s.kv_heads + h) * page_bytes;
      std::copy_n(a.k.begin() + from, page_bytes, kp.begin() + to);
      std::copy_n(a.v.begin() + from, page_bytes, vp.begin() + to);
    }
  a.k.swap(kp), a.v.swap(vp);
  for (int64_t* st : {a.d.k_stride, a.d.v_stride})
    if (s.layout == Layout::head_major)
      st[0] = s.page * D, st[1] = pages * s.page * D, st[2] = D;
    else
      st[0] = s.kv_heads * s.page * D, st[1] = s.page * D, st[2] = D;
  a.d.block_table = a.table.data();
  a.d.block_table_stride = pages, a.d.page_size = s.page, a.d.num_pages = pages;
  return a;
}

void register_pair(const PagedShape& s, tessera_dtype type, int threads) {
  const std::string name =
      std::string("attention/paged-vs-contiguous/") + (s.q_len == 1 ? "decode" : "prefill") +
      "/heads:" + std::to_string(s.heads) + "/kv_heads:" + std::to_string(s.kv_heads) +
      "/q:" + std::to_string(s.q_len) + "/kv:" + std::to_string(s.kv_len) +
      "/d:128/page:" + std::to_string(s.page) +
      (s.layout == Layout::head_major ? "/head-major/"
       : s.layout == Layout::in_order ? "/in-order/"
                                      : "/shuffled/") +
      (type == TESSERA_F16 ? "f16" : "q8_0") + "/threads:" + std::to_string(threads);
  benchmark::RegisterBenchmark(
      name.c_str(),
      [s, type, threads](benchmark::State& state) {
        Attn base = make(s, type, false), paged = make(s, type, true);
        if (!ok(state, base.run()) || !ok(state, paged.run())) return;
        const Alternated t = alternate(state, threads, {[&] { base.run(); }, [&] { paged.run(); }});
        state.counters["paged_over_contiguous"] = t.over_first[1];
        state.counters["contiguous_ms"] = t.seconds[0] * 1e3;
        state.counters["paged_ms"] = t.seconds[1] * 1e3;
      })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace bench_paged

void register_paged() {
  using namespace bench_paged;
  // vLLM's default page is 16 rows, llama.cpp's and ORT's 16-256.
  constexpr Layout S = Layout::shuffled, O = Layout::in_order, H = Layout::head_major;
  const PagedShape shapes[] = {{32, 8, 1, 32768, 16, S},  {32, 8, 1, 32768, 64, S},
                               {32, 8, 1, 32768, 256, S}, {32, 8, 1, 32768, 16, O},
                               {32, 8, 1, 32768, 16, H},  {32, 8, 1, 32768, 64, H},
                               {32, 8, 1, 32768, 256, H}, {32, 8, 1, 4096, 64, S},
                               {8, 8, 2048, 2048, 16, S}, {8, 8, 2048, 2048, 64, S}};
  for (int threads : thread_counts())
    for (const PagedShape& s : shapes)
      for (tessera_dtype type : {TESSERA_F16, TESSERA_Q8_0}) register_pair(s, type, threads);
}

}  // namespace bench
