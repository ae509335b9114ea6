// The layer's paged cache: a batch of sequences of different lengths sharing one pool of pages
// ([kv_heads][num_pages][page_size][dim]) through a block table, a prefill chunk then decode
// steps, against reference::mha_forward on copies of the pool; every cache type, prepared and
// one-shot, every table; bad pools rejected with nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tessera/layers.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"

namespace paged_layer_test {

namespace {

using tessera::Status;
namespace ref = tessera::reference;

// Three sequences holding 0, 23 and 70 rows in a pool of pages of 16 rows, 8 pages a sequence,
// their pages shuffled among two spare ones.
struct PagedRun {
  static constexpr int64_t B = 3, M = 64, Hq = 4, Hk = 2, D = 32, P = 16, kPerSeq = 8;
  static constexpr int64_t kPages = B * kPerSeq + 2;
  tessera_dtype ct;
  tessera::MhaDesc d;
  std::vector<float> wq, wk, wv, wo, bq;
  std::vector<uint8_t> kc, vc;
  std::vector<int32_t> table, lens = {0, 23, 70};

  std::vector<uint8_t> stored(const std::vector<float>& x) const {
    std::vector<uint8_t> out(ref::storage_bytes(ct, int64_t(x.size())));
    if (ct == TESSERA_Q8_0 || ct == TESSERA_Q4_0)
      ref::quantize(ct, int64_t(x.size()), x.data(), out.data());
    else
      for (size_t i = 0; i < x.size(); ++i) ref::store_element(ct, out.data(), int64_t(i), x[i]);
    return out;
  }

  explicit PagedRun(tessera_dtype type) : ct(type) {
    EXPECT_EQ(tessera::mha_desc_init(d, B, 1, 1, M, Hq), Status::ok);
    d.kv_heads = Hk, d.head_dim = d.value_dim = D, d.causal = 1, d.cache_type = ct;
    wq = tt::random_vec(size_t(M * Hq * D), 1, -0.3f, 0.3f);
    wk = tt::random_vec(size_t(M * Hk * D), 2, -0.3f, 0.3f);
    wv = tt::random_vec(size_t(M * Hk * D), 3, -0.3f, 0.3f);
    wo = tt::random_vec(size_t(Hq * D * M), 4, -0.3f, 0.3f);
    bq = tt::random_vec(size_t(Hq * D), 5);
    d.w_q = wq.data(), d.w_k = wk.data(), d.w_v = wv.data(), d.w_o = wo.data(), d.b_q = bq.data();
    // The rows already held: random values stored as the cache type.
    kc = stored(tt::random_vec(size_t(Hk * kPages * P * D), 6));
    vc = stored(tt::random_vec(size_t(Hk * kPages * P * D), 7));
    table.resize(size_t(kPages));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(7));
    table.resize(size_t(B * kPerSeq));
    d.k_cache = kc.data(), d.v_cache = vc.data();
    d.block_table = table.data(), d.block_table_stride = kPerSeq, d.page_size = P;
    d.num_pages = kPages, d.cache_lens = lens.data();
  }
};

class PagedLayer : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(PagedLayer);

// The pool's row of sequence b's position p for kv head hk (the block table's page).
int64_t pool_row(const PagedRun& run, int64_t b, int64_t hk, int64_t p) {
  const int64_t page = run.table[size_t(b * PagedRun::kPerSeq + p / PagedRun::P)];
  return (hk * PagedRun::kPages + page) * PagedRun::P + p % PagedRun::P;
}

// A row of the cache's type as float32 (exactly).
void widen_row(tessera_dtype t, int64_t n, const uint8_t* row, float* out) {
  if (t == TESSERA_Q8_0 || t == TESSERA_Q4_0) return ref::dequantize(t, n, row, out);
  for (int64_t i = 0; i < n; ++i) out[i] = ref::element(t, row, i);
}

// The rows the layer appended against those the reference appended to its own copy of the pool:
// each value within a rounding of the cache's type (the new rows are float32 sums that may land
// either side of a rounding point: one f16 ulp, a block type's step); every other row of the
// pool untouched, byte for byte. Returns how many appended values differ from the reference's.
int64_t expect_appended_rows(const PagedRun& run, const std::vector<uint8_t>& before,
                             const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                             int64_t step) {
  const int64_t D = PagedRun::D, rows = PagedRun::Hk * PagedRun::kPages * PagedRun::P;
  const size_t row_bytes = ref::storage_bytes(run.ct, D);
  std::vector<bool> appended(size_t(rows), false);
  int64_t differ = 0;
  for (int64_t b = 0; b < PagedRun::B; ++b)
    for (int64_t hk = 0; hk < PagedRun::Hk; ++hk)
      for (int64_t p = run.lens[size_t(b)]; p < run.lens[size_t(b)] + step; ++p) {
        const int64_t r = pool_row(run, b, hk, p);
        appended[size_t(r)] = true;
        std::vector<float> g(static_cast<size_t>(D)), w(g);
        widen_row(run.ct, D, got.data() + size_t(r) * row_bytes, g.data());
        widen_row(run.ct, D, want.data() + size_t(r) * row_bytes, w.data());
        double amax = 0;
        for (float v : w) amax = std::max(amax, double(std::fabs(v)));
        const double tol = run.ct == TESSERA_F32    ? 1e-5 * amax
                           : run.ct == TESSERA_F16  ? 0x1p-10 * amax
                           : run.ct == TESSERA_Q8_0 ? 1.2 * amax / 127
                                                    : 1.2 * amax / 8;
        for (int64_t c = 0; c < D; ++c) {
          EXPECT_LE(std::fabs(g[size_t(c)] - w[size_t(c)]), tol)
              << "sequence " << b << " head " << hk << " position " << p << " value " << c;
          differ += g[size_t(c)] != w[size_t(c)];
        }
        if (::testing::Test::HasFailure()) return differ;
      }
  for (int64_t r = 0; r < rows; ++r) {
    if (appended[size_t(r)]) continue;
    EXPECT_EQ(std::memcmp(got.data() + size_t(r) * row_bytes, before.data() + size_t(r) * row_bytes,
                          row_bytes),
              0)
        << "pool row " << r << " was written";
  }
  return differ;
}

// Prefill then decode steps, rotary positions on, every cache type: the rows appended against
// the reference's own (not read back from the pool the layer wrote: a layer that stored row t-1
// at position t, or zeros, fails), the rest of the pool untouched, and the output.
TEST_P(PagedLayer, SequencesOfDifferentLengthsAgainstTheReference) {
  std::vector<tessera_dtype> types = {TESSERA_F32, TESSERA_F16};
  if (tt::block_types_built()) types.push_back(TESSERA_Q8_0), types.push_back(TESSERA_Q4_0);
  for (const tessera_dtype ct : types)
    for (const bool prepared : {false, true}) {
      SCOPED_TRACE(testing::Message() << "cache " << ct << " prepared " << prepared);
      PagedRun run(ct);
      run.d.rope.style = TESSERA_ROPE_NEOX;
      tessera::MhaLayer layer;
      if (prepared) {
        ASSERT_EQ(layer.init(run.d), Status::ok) << tessera::last_error();
      }
      uint32_t seed = 20;
      for (const int64_t step : {5, 1, 1}) {
        tessera::MhaDesc d = run.d;
        d.q_len = d.kv_len = step;
        const auto x = tt::random_vec(size_t(PagedRun::B * step * PagedRun::M), seed++);
        std::vector<float> out(x.size(), tt::kNaN), want(x.size());
        const std::vector<uint8_t> k0 = run.kc, v0 = run.vc;
        ASSERT_EQ(prepared ? layer.forward(d, x.data(), x.data(), x.data(), out.data())
                           : tessera::mha_forward(d, x.data(), x.data(), out.data()),
                  Status::ok)
            << tessera::last_error();
        // The reference appends its own rows to a copy of the pool as it was.
        std::vector<uint8_t> rk = k0, rv = v0;
        tessera::MhaDesc r = d;
        r.k_cache = rk.data(), r.v_cache = rv.data();
        ref::mha_forward(r, x.data(), x.data(), want.data());
        const int64_t differ = expect_appended_rows(run, k0, run.kc, rk, step) +
                               expect_appended_rows(run, v0, run.vc, rv, step);
        if (HasFailure()) return;
        // The output against the reference's over its own rows: the float32 arithmetic's error
        // where every appended value is the reference's; where some rounded the other way, each
        // moves its row's share of the output by at most one rounding of the type.
        const double rounding = ct == TESSERA_F32    ? 0.0
                                : ct == TESSERA_F16  ? 0x1p-10
                                : ct == TESSERA_Q8_0 ? 1.0 / 127
                                                     : 1.0 / 8;
        EXPECT_LE(tt::rel_err(out, want), 2e-5 + (differ > 0 ? rounding : 0.0))
            << "step " << step << ", " << differ << " appended values rounded the other way";
        std::vector<int32_t> after = run.lens;
        for (int32_t& l : after) l += int32_t(step);
        run.lens = after;
      }
    }
}

TEST(PagedLayerApi, RejectsABadPoolAndWritesNothing) {
  struct Case {
    const char* name;
    void (*edit)(tessera::MhaDesc&, PagedRun&);
  };
  const Case cases[] = {
      {"desc->cache_lens", [](tessera::MhaDesc& d, PagedRun&) { d.cache_lens = nullptr; }},
      {"desc->cache_lens[2]", [](tessera::MhaDesc&, PagedRun& r) { r.lens[2] = 126; }},
      {"desc->block_table[9]", [](tessera::MhaDesc&, PagedRun& r) { r.table[9] = 99; }},
      {"desc->page_size", [](tessera::MhaDesc& d, PagedRun&) { d.page_size = 24; }},
      {"desc->num_pages", [](tessera::MhaDesc& d, PagedRun&) { d.num_pages = -2; }},
      {"desc->ring_window",
       [](tessera::MhaDesc& d, PagedRun&) { d.ring_window = 8, d.cache_capacity = 64; }},
      {"desc->kv_lens", [](tessera::MhaDesc& d, PagedRun& r) { d.kv_lens = r.lens.data(); }},
  };
  for (const Case& c : cases) {
    PagedRun run(TESSERA_F32);
    tessera::MhaDesc d = run.d;
    d.q_len = d.kv_len = 3;
    c.edit(d, run);
    const auto x = tt::random_vec(size_t(PagedRun::B * 3 * PagedRun::M), 1);
    std::vector<float> out(x.size(), 7.0f);
    const std::vector<uint8_t> k0 = run.kc;
    EXPECT_EQ(tessera::mha_forward(d, x.data(), x.data(), out.data()), Status::invalid_argument)
        << c.name;
    EXPECT_NE(std::string(tessera::last_error()).find(c.name), std::string::npos)
        << tessera::last_error();
    for (float v : out) ASSERT_EQ(v, 7.0f);
    EXPECT_EQ(run.kc, k0);
  }
}

}  // namespace

}  // namespace paged_layer_test
