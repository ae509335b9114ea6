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

TEST_P(PagedLayer, SequencesOfDifferentLengthsAgainstTheReference) {
  std::vector<tessera_dtype> types = {TESSERA_F32, TESSERA_F16};
  if (tt::block_types_built()) types.push_back(TESSERA_Q8_0), types.push_back(TESSERA_Q4_0);
  for (const tessera_dtype ct : types)
    for (const bool prepared : {false, true}) {
      SCOPED_TRACE(testing::Message() << "cache " << ct << " prepared " << prepared);
      PagedRun run(ct);
      // A float32 cache: the reference appends its own rows, rotary positions on. Otherwise
      // the reference reads the rows the layer wrote (their rounding may differ by a step).
      const bool own_rows = ct == TESSERA_F32;
      if (own_rows) run.d.rope.style = TESSERA_ROPE_NEOX;
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
        std::vector<uint8_t> rk = run.kc, rv = run.vc;  // the reference's pool
        ASSERT_EQ(prepared ? layer.forward(d, x.data(), x.data(), x.data(), out.data())
                           : tessera::mha_forward(d, x.data(), x.data(), out.data()),
                  Status::ok)
            << tessera::last_error();
        tessera::MhaDesc r = d;
        r.k_cache = rk.data(), r.v_cache = rv.data();
        std::vector<int32_t> after = run.lens;
        for (int32_t& l : after) l += int32_t(step);
        if (own_rows) {
          ref::mha_forward(r, x.data(), x.data(), want.data());
          std::vector<float> got_k(run.kc.size() / 4), want_k(got_k.size());
          std::memcpy(got_k.data(), run.kc.data(), run.kc.size());
          std::memcpy(want_k.data(), rk.data(), rk.size());
          EXPECT_LE(tt::rel_err(got_k, want_k), 1e-6) << "the appended keys";
        } else {  // the queries over the pool as the layer left it
          rk = run.kc, rv = run.vc;
          r.kv_len = 0, r.cache_lens = after.data();
          ref::mha_forward(r, x.data(), x.data(), want.data());
        }
        EXPECT_LE(tt::rel_err(out, want), 2e-5) << "step " << step;
        run.lens = after;
        if (HasFatalFailure()) return;
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
