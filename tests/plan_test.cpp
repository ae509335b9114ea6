// Golden plans: the SGEMM planner's choice (rule, tile, threads) for a corpus of shapes on every
// table's blocking under the tuning rows of the classes that run it, pinned in
// tests/data/gemm_plans.txt. The planner is a pure function of the tile geometry, the tuning
// row, the shape and the thread count, so the tables are described here from blocking.hpp
// (no kernel runs) and every build checks every table's plans, whatever CPU it runs on.
// A change of rule or threshold shows up as a diff of this file: regenerate it with
// TESSERA_UPDATE_GOLDEN=1 and commit the diff with the measurements that justify it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "arch/common/blocking.hpp"
#include "src/attention/attention_plan.hpp"
#include "src/attention/attention_tile.hpp"
#include "src/gemm/gemm_plan.hpp"

namespace plan_test {

namespace {

namespace arch = tessera::arch;
namespace detail = tessera::detail;
using detail::CpuClass;

void no_kernel(const arch::TileRun&, int64_t, const float*, int64_t, int64_t, const float*, int64_t,
               float*, int64_t, int64_t, float, float) {}

// What the planner reads of a table, from its blocking and vector width (as make_table fills).
arch::GemmKernels geometry(const arch::GemmBlocking& g, int w) {
  arch::GemmKernels k{};
  k.mr = g.mr, k.nr = g.nv * w, k.kc = g.kc, k.mc = g.mc, k.nc = g.nc;
  k.simd_floats = w;
  for (int r = 1; r <= arch::kMaxRowPanelRows && r * g.nv <= 8; ++r) k.row_panels_rows = r;
  k.dot_rows = g.dot_rows;
  for (int r = 1; r <= arch::kMaxDotRows; ++r) k.dot_cols[r] = r == 1 ? w : g.dot_cols;
  if (g.small_rows > 0) {
    k.small_rows = g.small_rows, k.small_cols = g.small_nv * w;
    k.small_run = &no_kernel;
  }
  return k;
}

struct Profile {
  const char* table;
  arch::GemmKernels kernels;
  std::vector<CpuClass> classes;  // the classes whose machines run this table
};

std::vector<Profile> profiles() {
  static const arch::GemmKernels deep = geometry(arch::kAvx512DeepGemm, 16);
  arch::GemmKernels avx512 = geometry(arch::kAvx512Gemm, 16);
  avx512.deep = &deep;
  return {
      {"avx512", avx512, {CpuClass::x86_intel_avx512, CpuClass::x86_zen4, CpuClass::x86_zen5}},
      {"avx2", geometry(arch::kAvx2Gemm, 8), {CpuClass::x86_generic, CpuClass::x86_zen4}},
      {"sse2", geometry(arch::kSse2Gemm, 4), {CpuClass::x86_generic}},
      {"neon64_v82", geometry(arch::kNeon64Gemm, 4), {CpuClass::arm_a53, CpuClass::arm_a76}},
      {"neon64", geometry(arch::kNeon64Gemm, 4), {CpuClass::arm_a53, CpuClass::arm_a72}},
      {"neon32", geometry(arch::kNeon32Gemm, 4), {CpuClass::armv7}},
  };
}

struct Shape {
  int64_t m, n, k;
  bool ta, tb;
  int b_offset;  // bytes past a 64-byte line (B's rows are then not aligned)
  const char* what;
};

// Every rule, and the shapes the drivers' comments measured.
const Shape kShapes[] = {
    {0, 64, 64, false, false, 0, "empty"},
    {1, 4096, 128, false, true, 0, "decode Q K^T"},
    {4, 1000, 64, false, true, 16, "few rows, B^T"},
    {1, 128, 4096, false, false, 0, "decode P V"},
    {2, 128, 8192, false, false, 0, "narrow B, long k"},
    {1, 200, 5000, false, false, 16, "narrow B, tail"},
    {4, 1024, 1024, false, false, 0, "few rows, B 4 MB"},
    {2, 64, 64, false, false, 16, "few rows, small"},
    {8, 256, 256, true, false, 0, "few rows, A^T"},
    {64, 64, 64, false, false, 16, "64^3"},
    {64, 64, 64, false, true, 16, "64^3 B^T"},
    {64, 64, 32, false, false, 0, "64 x 64 x 32"},
    {48, 48, 48, false, false, 16, "48^3"},
    {96, 96, 96, false, false, 16, "96^3"},
    {128, 128, 128, false, false, 0, "128^3"},
    {128, 128, 128, true, true, 16, "128^3 A^T B^T"},
    {256, 256, 256, false, false, 0, "256^3 aligned"},
    {256, 256, 256, false, false, 16, "256^3 misaligned"},
    {200, 300, 256, false, true, 0, "200 x 300 x 256 B^T"},
    {384, 384, 384, false, false, 16, "384^3"},
    {512, 512, 512, false, false, 0, "512^3"},
    {1024, 1024, 1024, false, false, 16, "1024^3"},
    {2048, 2048, 2048, false, false, 0, "2048^3"},
    {4096, 4096, 64, false, true, 0, "Q K^T"},
    {4096, 64, 4096, false, false, 0, "P V"},
    {4096, 128, 4096, false, false, 16, "P V, d 128"},
    {4096, 96, 1024, false, false, 0, "partial deep panel"},
    {4096, 512, 32, false, false, 0, "4096 x 512 x 32"},
    {16384, 1024, 64, false, false, 0, "A of 4 MB"},
    {4096, 1024, 64, true, true, 0, "A^T B^T short k"},
    {512, 320, 96, false, false, 0, "5 panels"},
    {301, 256, 64, false, false, 16, "row tail"},
    {32, 256, 256, false, false, 16, "32 x 256 x 256"},
};

enum class Packed { no, f32, b16 };  // B as given, prepacked, or prepacked in 16 bits

std::string plan_line(const Profile& pr, CpuClass c, const Shape& s, int threads, bool alpha0,
                      Packed packed) {
  detail::GemmProblem p;
  p.ta = s.ta, p.tb = s.tb, p.m = s.m, p.n = s.n, p.k = s.k;
  p.alpha = alpha0 ? 0.0f : 1.0f;
  p.lda = s.ta ? s.m : s.k;
  p.ldb = s.tb ? s.k : s.n;
  p.ldc = s.n;
  // Never read: the planner looks at B's alignment only.
  p.b = reinterpret_cast<const float*>(uintptr_t(1) << 20 | uintptr_t(s.b_offset));
  if (packed == Packed::f32) p.b_packed = p.b;
  // cppcheck-suppress invalidPointerCast
  if (packed == Packed::b16) p.b_packed16 = reinterpret_cast<const uint16_t*>(p.b);
  const detail::GemmPlan plan =
      detail::plan_gemm(pr.kernels, detail::tuning_row(c), p, true, threads);
  char names[96];
  detail::gemm_kernel_names(plan, p.m, pr.table, names, sizeof names);
  char line[320];
  std::snprintf(line, sizeof line, "%s %s t%d %lldx%lldx%lld%s%s%s+%d%s -> %s %s threads:%d",
                pr.table, detail::cpu_class_name(c), threads, (long long)s.m, (long long)s.n,
                (long long)s.k, s.ta ? " A^T" : "", s.tb ? " B^T" : "",
                packed == Packed::f32   ? " packed"
                : packed == Packed::b16 ? " packed16"
                                        : "",
                s.b_offset, alpha0 ? " alpha0" : "", plan.rule, names, plan.threads);
  return line;
}

std::vector<std::string> all_plans() {
  std::vector<std::string> out;
  for (const Profile& pr : profiles())
    for (CpuClass c : pr.classes)
      for (int threads : {1, 2, 4}) {
        for (const Shape& s : kShapes)
          out.push_back(plan_line(pr, c, s, threads, false, Packed::no));
        out.push_back(plan_line(pr, c, kShapes[20], threads, true, Packed::no));    // alpha = 0
        out.push_back(plan_line(pr, c, kShapes[20], threads, false, Packed::f32));  // prepacked B
        out.push_back(plan_line(pr, c, kShapes[3], threads, false, Packed::f32));   // 1 row
        out.push_back(plan_line(pr, c, kShapes[6], threads, false, Packed::f32));   // 4 rows
        for (const int i : {20, 21, 6})  // B in 16 bits: 512^3, 1024^3, 4 rows
          out.push_back(plan_line(pr, c, kShapes[i], threads, false, Packed::b16));
      }
  return out;
}

const char* golden_path() { return TESSERA_SOURCE_DIR "/tests/data/gemm_plans.txt"; }

TEST(GemmPlan, GoldenPlansForEveryTableAndClass) {
  const std::vector<std::string> got = all_plans();
  if (const char* u = std::getenv("TESSERA_UPDATE_GOLDEN"); u && *u == '1') {
    std::ofstream out(golden_path());
    for (const auto& line : got) out << line << "\n";
    GTEST_SKIP() << "wrote " << got.size() << " plans to " << golden_path();
  }
  std::ifstream in(golden_path());
  ASSERT_TRUE(in) << "cannot read " << golden_path();
  std::vector<std::string> want;
  for (std::string line; std::getline(in, line);) want.push_back(line);
  ASSERT_EQ(got.size(), want.size()) << "the corpus changed: regenerate (see the file's test)";
  int diffs = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && ++diffs <= 20)
      ADD_FAILURE() << "plan changed:\n  golden: " << want[i] << "\n  now:    " << got[i];
  EXPECT_EQ(diffs, 0) << "plans differ from " << golden_path();
}

// Each rule of the planner fires somewhere in the corpus: a rule no shape reaches is untested.
TEST(GemmPlan, EveryRuleFiresInTheCorpus) {
  std::string all;
  for (const auto& line : all_plans()) all += line + "\n";
  for (const char* rule : {"empty", "alpha-or-k-zero", "prepacked-b16-column-slices", "prepacked-b",
                           "prepacked-b-few-rows", "few-rows-b-trans", "few-rows-narrow-b-k-chunks",
                           "few-rows-b-streamed", "few-rows-b", "short-k-small-tile-panels",
                           "small-tiles-b-in-place", "small-tiles-b-panels", "few-rows-a-in-place",
                           "small-deep-tile-a-in-place", "small-a-in-place", "mid-a-in-place",
                           "mid-column-slices", "large-column-slices", "blocked"})
    EXPECT_NE(all.find(std::string("-> ") + rule + " "), std::string::npos) << rule;
}

// ---- the attention planner: the same, over a corpus of attention shapes --------------------

struct AttentionShape {
  int64_t batch, q_heads, kv_heads, q_len, kv_len;
  const char* what;
};
const AttentionShape kAttentionShapes[] = {
    {1, 32, 8, 1, 4096, "decode, GQA 4"},
    {1, 32, 8, 1, 32768, "decode, K and V past the last-level cache"},
    {1, 32, 32, 1, 512, "decode within one chunk"},
    {1, 32, 32, 1, 513, "decode, one chunk and a remainder"},
    {1, 32, 32, 1, 768, "decode, two chunks"},
    {4, 8, 8, 8, 2048, "8 speculative tokens"},
    {1, 8, 8, 9, 2048, "9 queries"},
    {1, 16, 16, 512, 512, "prefill 512"},
    {1, 32, 8, 4096, 4096, "prefill, GQA 4"},
    {1, 1, 1, 4096, 4096, "one head"},
    {2, 12, 12, 197, 197, "ViT"},
    {1, 8, 1, 640, 640, "MQA"},
    {1, 7, 7, 300, 1500, "cross"},
};

std::string attention_plan_line(const Profile& pr, CpuClass c, const AttentionShape& s,
                                int threads) {
  tessera_attention_desc d{};
  d.batch = s.batch, d.q_heads = s.q_heads, d.kv_heads = s.kv_heads;
  d.q_len = s.q_len, d.kv_len = s.kv_len;
  d.head_dim = d.value_dim = 128, d.k_type = d.v_type = TESSERA_F16;
  const int64_t group = s.q_heads / s.kv_heads;
  const detail::AttentionPlan plan = detail::plan_attention(
      d, group, pr.kernels.mr, detail::fa::few_rows(pr.kernels, group * s.q_len),
      detail::tuning_row(c), threads);
  char line[256];
  std::snprintf(line, sizeof line,
                "%s %s t%d b%lld h%lld/%lld q%lld kv%lld -> %s bq:%lld blocks:%lld chunk:%lld "
                "chunks:%lld kv-prefetch:%d",
                pr.table, detail::cpu_class_name(c), threads, (long long)s.batch,
                (long long)s.q_heads, (long long)s.kv_heads, (long long)s.q_len,
                (long long)s.kv_len, plan.rule, (long long)plan.bq, (long long)plan.q_blocks,
                (long long)plan.chunk, (long long)plan.chunks, int(plan.prefetch_kv));
  return line;
}

std::vector<std::string> all_attention_plans() {
  std::vector<std::string> out;
  for (const Profile& pr : profiles())
    for (CpuClass c : pr.classes)
      for (int threads : {1, 2, 4})
        for (const AttentionShape& s : kAttentionShapes)
          out.push_back(attention_plan_line(pr, c, s, threads));
  return out;
}

TEST(AttentionPlan, GoldenPlansForEveryTableAndClass) {
  const std::string path = TESSERA_SOURCE_DIR "/tests/data/attention_plans.txt";
  const std::vector<std::string> got = all_attention_plans();
  if (const char* u = std::getenv("TESSERA_UPDATE_GOLDEN"); u && *u == '1') {
    std::ofstream out(path);
    for (const auto& line : got) out << line << "\n";
    GTEST_SKIP() << "wrote " << got.size() << " plans to " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::vector<std::string> want;
  for (std::string line; std::getline(in, line);) want.push_back(line);
  ASSERT_EQ(got.size(), want.size()) << "the corpus changed: regenerate (see the file's test)";
  int diffs = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && ++diffs <= 20)
      ADD_FAILURE() << "plan changed:\n  golden: " << want[i] << "\n  now:    " << got[i];
  EXPECT_EQ(diffs, 0) << "plans differ from " << path;
}

// Decode takes every head of a chunk in turn exactly where a page holds the KV heads side by
// side ([page][head][row] or [page][row][head]); contiguous K/V and a head-major pool keep the
// head-by-head order.
TEST(AttentionPlan, HeadsInnerWherePagesHoldTheHeadsSideBySide) {
  const int32_t table[64] = {};
  struct Layout {
    const char* name;
    int64_t page, head, row;  // strides in values; page 0: not paged
    bool inner;
  };
  const int64_t P = 64, H = 8, D = 128, pages = 64;
  const Layout layouts[] = {{"contiguous", 0, 4096 * D, D, false},
                            {"[page][head][row]", H * P * D, P * D, D, true},
                            {"[page][row][head]", P * H * D, D, H * D, true},
                            {"[head][page][row]", P * D, pages * P * D, D, false}};
  for (const Layout& l : layouts) {
    tessera_attention_desc d{};
    ASSERT_EQ(tessera_attention_desc_init(&d, 1, 32, H, 1, 4096, D, D), TESSERA_OK);
    if (l.page) {
      d.block_table = table, d.block_table_stride = pages, d.page_size = P, d.num_pages = pages;
      for (int64_t* st : {d.k_stride, d.v_stride}) st[0] = l.page, st[1] = l.head, st[2] = l.row;
    }
    const detail::AttentionPlan p =
        detail::plan_attention(d, 4, 14, true, detail::tuning_row(CpuClass::x86_zen4), 2);
    ASSERT_EQ(p.path, detail::AttentionPath::decode_split_kv) << l.name;
    EXPECT_EQ(p.heads_inner, l.inner) << l.name;
  }
}

// A decode of 32/8 heads, d 128, kv 4096 (8 chunks of 512 keys) over `page`-row pages of a pool
// laid out [page][head][row] or, head_major, [head][page][row].
tessera_attention_desc paged_decode(const int32_t* table, int64_t page, bool head_major) {
  const int64_t H = 8, D = 128, kv = 4096, pages = kv / page;
  tessera_attention_desc d{};
  EXPECT_EQ(tessera_attention_desc_init(&d, 1, 32, H, 1, kv, D, D), TESSERA_OK);
  d.block_table = table, d.block_table_stride = pages, d.page_size = page, d.num_pages = pages;
  for (int64_t* st : {d.k_stride, d.v_stride}) {
    st[0] = head_major ? page * D : H * page * D;
    st[1] = head_major ? pages * page * D : page * D;
    st[2] = D;
  }
  return d;
}

// A decode task takes a page's KV heads together where the heads sit side by side and the rows
// take the dot kernels: one thread every head it may, several in as many tasks as give each
// thread sixteen (the row's attention_paged_tasks_per_thread); short runs of a head's rows are
// prefetched into L1.
TEST(AttentionPlan, HeadsTogetherWherePagesHoldTheHeads) {
  const int32_t table[512] = {};
  struct Case {
    const char* name;
    int64_t page;
    bool head_major, few;
    int threads;
    int64_t together;
    bool l1;
  };
  // kv 4096: 8 chunks of 512 keys, 8 KV heads (2 threads: 32 tasks of 2 heads). float32 rows of
  // 512 bytes: a head's run of 16 rows is 8 KB, prefetched into L1 (the row's
  // attention_l1_run_bytes), of 256 rows 128 KB.
  const Case cases[] = {{"16 rows, 1 thread", 16, false, true, 1, 8, true},
                        {"16 rows, 2 threads", 16, false, true, 2, 2, true},
                        {"16 rows, 4 threads", 16, false, true, 4, 1, false},
                        {"16 rows, packed rows", 16, false, false, 1, 1, false},
                        {"16 rows, head-major", 16, true, true, 1, 1, false},
                        {"8 rows", 8, false, true, 1, 8, true},
                        {"32 rows", 32, false, true, 1, 8, false},
                        {"256 rows", 256, false, true, 2, 2, false},
                        {"256 rows, head-major", 256, true, true, 1, 1, false}};
  for (const Case& c : cases) {
    const tessera_attention_desc d = paged_decode(table, c.page, c.head_major);
    const detail::AttentionPlan p =
        detail::plan_attention(d, 4, 14, c.few, detail::tuning_row(CpuClass::x86_zen4), c.threads);
    ASSERT_EQ(p.path, detail::AttentionPath::decode_split_kv) << c.name;
    EXPECT_EQ(p.heads_per_task, c.together) << c.name;
    EXPECT_EQ(p.prefetch_l1, c.l1) << c.name;
  }
}

// A task's heads read their runs of a group of pages in turn, as many pages as make a head's
// runs attention_page_group_bytes (16 KB), for 16-bit K and V only (the block types' bursts of
// prefetches measured slower so), up to kMaxPageGroup; one page where a task has one head.
TEST(AttentionPlan, PagesInGroupsForSixteenBitRows) {
  const int32_t table[512] = {};
  struct Case {
    const char* name;
    int64_t page;
    tessera_dtype k, v;
    bool head_major;
    int threads;
    int64_t group;
  };
  // d 128: a f16 row is 256 bytes, a head's run of 16 rows 4 KB; a q8_0 row 136 bytes.
  const Case cases[] = {{"f16 16 rows", 16, TESSERA_F16, TESSERA_F16, false, 2, 4},
                        {"bf16 / f16 16 rows", 16, TESSERA_BF16, TESSERA_F16, false, 2, 4},
                        {"f16 8 rows", 8, TESSERA_F16, TESSERA_F16, false, 2, 8},
                        {"f16 32 rows", 32, TESSERA_F16, TESSERA_F16, false, 2, 2},
                        {"f16 64 rows", 64, TESSERA_F16, TESSERA_F16, false, 2, 1},
                        {"f16 16 rows, head-major", 16, TESSERA_F16, TESSERA_F16, true, 2, 1},
                        {"f16 16 rows, a head a task", 16, TESSERA_F16, TESSERA_F16, false, 16, 1},
                        {"f32 16 rows", 16, TESSERA_F32, TESSERA_F32, false, 2, 1},
                        {"q8_0 16 rows", 16, TESSERA_Q8_0, TESSERA_Q8_0, false, 2, 1},
                        {"f16 K, q8_0 V", 16, TESSERA_F16, TESSERA_Q8_0, false, 2, 1}};
  for (const Case& c : cases) {
    tessera_attention_desc d = paged_decode(table, c.page, c.head_major);
    d.k_type = c.k, d.v_type = c.v;
    const detail::AttentionPlan p =
        detail::plan_attention(d, 4, 14, true, detail::tuning_row(CpuClass::x86_zen4), c.threads);
    ASSERT_EQ(p.path, detail::AttentionPath::decode_split_kv) << c.name;
    EXPECT_EQ(p.page_group, c.group) << c.name;
  }
}

// Each block of a prefill plan is a whole number of MR panels where the group allows, and the
// blocks cover the queries; a split plan's chunks cover the keys.
TEST(AttentionPlan, BlocksAndChunksCoverTheProblem) {
  for (const Profile& pr : profiles())
    for (CpuClass c : pr.classes)
      for (int threads : {1, 2, 3, 4, 8})
        for (const AttentionShape& s : kAttentionShapes) {
          tessera_attention_desc d{};
          d.batch = s.batch, d.q_heads = s.q_heads, d.kv_heads = s.kv_heads;
          d.q_len = s.q_len, d.kv_len = s.kv_len;
          const int64_t group = s.q_heads / s.kv_heads;
          const detail::AttentionPlan p = detail::plan_attention(d, group, pr.kernels.mr, false,
                                                                 detail::tuning_row(c), threads);
          const std::string at = attention_plan_line(pr, c, s, threads);
          if (p.path == detail::AttentionPath::decode_split_kv) {
            // The last chunk runs to kv_len: at least half a chunk (or the only one), under
            // one and a half.
            const int64_t last = s.kv_len - p.chunk * (p.chunks - 1);
            EXPECT_TRUE(p.chunks == 1 || last >= p.chunk / 2) << at;
            EXPECT_LT(last, p.chunk + p.chunk / 2) << at;
          } else {
            EXPECT_GE(p.bq * p.q_blocks, s.q_len) << at;
            EXPECT_LT(p.bq * (p.q_blocks - 1), s.q_len) << at;
          }
        }
}

}  // namespace

}  // namespace plan_test
