// Paged K/V: attention that reads K and V through a block table from a pool of pages. Against
// the reference (which follows the table itself) on every path (packed prefill over many tiles,
// few-row decode, split-KV decode), every K/V type, pages smaller than, equal to and larger than
// the tile, and every table; bitwise against the contiguous call where the page is a multiple
// of the tile; pages shared between batches; bad tables rejected with nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "attention_tester.hpp"
#include "src/runtime/tuning.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"

namespace paged_test {

namespace {

using tessera::Status;
constexpr tessera_align BR = TESSERA_ALIGN_BOTTOM_RIGHT;

class Paged : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(Paged);

struct Types {
  tessera_dtype k, v;
};

std::vector<Types> kv_types() {
  std::vector<Types> types = {{TESSERA_F32, TESSERA_F32}, {TESSERA_F16, TESSERA_BF16}};
  if (tt::block_types_built()) types.push_back({TESSERA_Q8_0, TESSERA_Q8_0});
  if (tt::block_types_built()) types.push_back({TESSERA_Q4_0, TESSERA_F16});
  return types;
}

TEST_P(Paged, EveryPathAndKvTypeAgainstTheReference) {
  uint32_t seed = 1200;
  for (const Types& ty : kv_types()) {
#ifdef TESSERA_LIGHT_SWEEPS  // (qemu, sanitizers: a page that splits blocks, and one of tiles)
    for (const int64_t page : {48, 512}) {
#else
    for (const int64_t page : {16, 48, 512}) {
#endif
      SCOPED_TRACE(testing::Message() << "k " << ty.k << " v " << ty.v << " page " << page);
      // prefill, causal, kv_lens (unused table entries -1), odd sizes
      AttentionTester(2, 6, 2, 37, 141, 64, 32)
          .kv_types(ty.k, ty.v)
          .causal(BR)
          .with_kv_lens()
          .with_lse()
          .paged(page)
          .test(1e-5, seed++);
      // many tiles and query blocks, a mask, [batch][seq][head][dim] pages
      AttentionTester(1, 4, 2, 70, 520, 64, 64)
          .kv_types(ty.k, ty.v)
          .with_mask()
          .bshd()
          .paged(page)
          .test(1e-5, seed++);
      // one-token decode, GQA, a window
      AttentionTester(2, 8, 2, 1, 300, 64, 64)
          .kv_types(ty.k, ty.v)
          .causal(BR)
          .window(100, -1)
          .with_lse()
          .paged(page)
          .test(1e-5, seed++);
      // split-KV decode over chunks that span several pages
      AttentionTester(2, 8, 2, 3, 1700, 64, 64)
          .kv_types(ty.k, ty.v)
          .causal(BR)
          .with_kv_lens()
          .with_lse()
          .paged(page)
          .test(1e-5, seed++);
      // the same over a head-major pool whose pages run on in memory three at a time (the
      // readers' calls span them), and one-token decode there
      for (const int64_t q_len : {3, 1})
        AttentionTester(2, 8, 2, q_len, 1700, 64, 64)
            .kv_types(ty.k, ty.v)
            .causal(BR)
            .with_kv_lens()
            .paged(page, true)
            .test(1e-5, seed++);
      if (HasFatalFailure()) return;
    }
  }
}

// Pages a multiple of the tile: the same tiles as the contiguous call, so the same bits; with
// batches of their own lengths (each last page partly filled, the table's unused entries -1).
TEST_P(Paged, MatchesTheContiguousCallBitwiseWhenPagesHoldWholeTiles) {
  for (const Types& ty : kv_types()) {
    for (const int64_t q_len : {1, 5, 37}) {
      SCOPED_TRACE(testing::Message() << "k " << ty.k << " q_len " << q_len);
      AttentionTester t(2, 4, 2, q_len, 1100, 64, 64);
      AttentionProblem& p =
          t.kv_types(ty.k, ty.v).causal(BR).with_lse().with_kv_lens().paged(256).build(31);
      ASSERT_EQ(tessera::attention(p.d, p.q.data(), p.k_data(), p.v_data(), p.o.data()), Status::ok)
          << tessera::last_error();
      // The same rows gathered page by page into [batch][head][seq][dim].
      const auto& d = p.d;
      const int64_t kb = tessera::reference::storage_bytes(ty.k, d.head_dim),
                    vb = tessera::reference::storage_bytes(ty.v, d.value_dim);
      const auto* kp = static_cast<const uint8_t*>(p.k_data());
      const auto* vp = static_cast<const uint8_t*>(p.v_data());
      std::vector<uint8_t> kc(size_t(d.batch * d.kv_heads * d.kv_len * kb)),
          vc(size_t(d.batch * d.kv_heads * d.kv_len * vb));
      for (int64_t b = 0; b < d.batch; ++b)
        for (int64_t h = 0; h < d.kv_heads; ++h)
          for (int64_t j = 0; j < d.kv_lens[b]; ++j) {
            const int64_t page = d.block_table[b * d.block_table_stride + j / d.page_size];
            const int64_t row = (page * d.kv_heads + h) * d.page_size + j % d.page_size;
            const int64_t at = (b * d.kv_heads + h) * d.kv_len + j;
            std::copy_n(kp + row * kb, kb, kc.begin() + at * kb);
            std::copy_n(vp + row * vb, vb, vc.begin() + at * vb);
          }
      tessera::AttentionDesc c;
      ASSERT_EQ(tessera::attention_desc_init(c, d.batch, d.q_heads, d.kv_heads, d.q_len, d.kv_len,
                                             d.head_dim, d.value_dim),
                Status::ok);
      c.k_type = d.k_type, c.v_type = d.v_type, c.causal = 1, c.align = BR;
      c.kv_lens = d.kv_lens;
      std::vector<float> o(p.o.size()), lse(p.lse.size());
      c.lse = lse.data();
      ASSERT_EQ(tessera::attention(c, p.q.data(), kc.data(), vc.data(), o.data()), Status::ok)
          << tessera::last_error();
      EXPECT_EQ(o, p.o);
      EXPECT_EQ(lse, p.lse);
    }
  }
}

// Heads side by side in a page: a decode task reads a page's heads together (as many as the
// thread count leaves it), here over pages of 16 rows, with 16-bit rows in groups of pages.
// Against the reference, each last page partly filled and the table's unused entries -1, and
// bitwise the same on 1 thread (four heads a task, 16-bit rows 8 pages a group) as on 8 (a head
// a task, a page at a time): a head's sums never depend on its task's other heads, nor on the
// order its runs interleave with theirs (16-bit V: nor on which pages a call of P V spans).
TEST_P(Paged, ShortPagesReadHeadsTogetherAsHeadByHead) {
  uint32_t seed = 1300;
  // Wide heads (a page's run 16 KB at f16: groups of one page, calls of two) under a window
  // whose first key lies mid-page, the first page of a call.
  for (const bool wide : {false, true})
    for (const Types& ty : kv_types()) {
      SCOPED_TRACE(testing::Message() << "k " << ty.k << " v " << ty.v << " wide " << wide);
      auto tester = [&] {
        AttentionTester t = wide ? AttentionTester(1, 8, 4, 1, 700, 512, 512)
                                 : AttentionTester(2, 16, 4, 1, 1300, 64, 64);
        t.kv_types(ty.k, ty.v).causal(BR).with_lse().paged(16);
        if (wide)
          t.window(301, 0);  // the first key seen 398: row 14 of the group's first page, 24
        else
          t.with_kv_lens();
        return t;
      };
      tester().test(1e-5, seed);
      AttentionTester t = tester();
      AttentionProblem& p = t.build(seed++);
      std::vector<float> o[2], lse[2];
      for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(tessera::set_num_threads(i == 0 ? 1 : 8), Status::ok);
        ASSERT_EQ(tessera::attention(p.d, p.q.data(), p.k_data(), p.v_data(), p.o.data()),
                  Status::ok)
            << tessera::last_error();
        o[i] = p.o, lse[i] = p.lse;
      }
      tessera::set_num_threads(0);
      EXPECT_EQ(o[0], o[1]);
      EXPECT_EQ(lse[0], lse[1]);
    }
}

// Decode from memory: K and V past the tuning row's attention_stream_kv_bytes, where the readers
// prefetch the rows they read next across pages (a short call's handed to its kernels). Scattered
// 16-row pages whose heads a task reads together, and a head-major pool whose pages run on three
// at a time; the last page half filled.
TEST_P(Paged, DecodeFromMemoryAgainstTheReference) {
  const tessera::detail::Tuning& tn = tessera::detail::active_tuning();
  std::vector<Types> types = {{TESSERA_F16, TESSERA_F16}};
  if (tt::block_types_built()) types.push_back({TESSERA_Q8_0, TESSERA_Q8_0});
  uint32_t seed = 1400;
  for (const Types& ty : types)
    for (const bool runs : {false, true}) {
#ifdef TESSERA_LIGHT_SWEEPS  // (qemu, sanitizers: f16 head-major, q8_0 scattered)
      if (runs != (ty.k == TESSERA_F16)) continue;
#endif
      constexpr int64_t kKvHeads = 4, kD = 128;
      const int64_t key_bytes =
          kKvHeads * (tessera_dtype_size(ty.k, kD) + tessera_dtype_size(ty.v, kD));
      const int64_t past = std::max(int64_t(tn.attention_stream_kv_bytes) / key_bytes,
                                    2 * tn.attention_decode_chunk);
      const int64_t kv = (past / 16 + 2) * 16 + 8;
      SCOPED_TRACE(testing::Message() << "k " << ty.k << " kv " << kv << " runs " << runs);
      AttentionTester(1, 4 * kKvHeads, kKvHeads, 1, kv, kD, kD)
          .kv_types(ty.k, ty.v)
          .causal(BR)
          .with_lse()
          .paged(16, runs)
          .test(1e-5, seed++);
    }
}

// Batches sharing their first pages (a common prompt) read the same rows.
TEST_P(Paged, BatchesMaySharePages) {
  AttentionTester t(3, 4, 1, 2, 200, 32, 32);
  AttentionProblem& p = t.causal(BR).paged(64).build(5);
  // Every batch's first two pages are batch 0's.
  for (int64_t b = 1; b < 3; ++b)
    for (int64_t i = 0; i < 2; ++i)
      p.table[size_t(b * p.d.block_table_stride + i)] = p.table[size_t(i)];
  ASSERT_EQ(tessera::attention(p.d, p.q.data(), p.k.data(), p.v.data(), p.o.data()), Status::ok)
      << tessera::last_error();
  std::vector<float> want(p.o.size());
  tessera::reference::attention(p.d, p.q.data(), p.k.data(), p.v.data(), want.data());
  EXPECT_LE(tt::rel_err(p.o, want), 1e-5);
}

TEST(PagedApi, RejectsABadTableAndWritesNothing) {
  struct Case {
    const char* name;
    void (*edit)(AttentionProblem&);
  };
  const Case cases[] = {
      {"desc->page_size", [](AttentionProblem& p) { p.d.page_size = 8; }},
      {"desc->page_size", [](AttentionProblem& p) { p.d.page_size = 40; }},
      {"desc->num_pages", [](AttentionProblem& p) { p.d.num_pages = -1; }},
      {"desc->block_table_stride", [](AttentionProblem& p) { p.d.block_table_stride = 1; }},
      {"desc->block_table[3]", [](AttentionProblem& p) { p.table[3] = int32_t(p.d.num_pages); }},
      {"desc->block_table[2]", [](AttentionProblem& p) { p.table[2] = -1; }},
  };
  for (const Case& c : cases) {
    AttentionTester t(2, 2, 1, 3, 40, 16, 16);
    AttentionProblem& p = t.paged(16).build(9);
    c.edit(p);
    std::vector<float> o(p.o.size(), 7.0f);
    const Status st = tessera::attention(p.d, p.q.data(), p.k.data(), p.v.data(), o.data());
    EXPECT_EQ(st, Status::invalid_argument) << c.name;
    EXPECT_NE(std::string(tessera::last_error()).find(c.name), std::string::npos)
        << tessera::last_error();
    for (float x : o) ASSERT_EQ(x, 7.0f);
  }
}

}  // namespace

}  // namespace paged_test
