// The C API's contract under hostile input: outputs that alias inputs, size products that
// overflow, a packed-B buffer sized under another kernel table, and the thread cap staying
// inside Tessera. Each rejection names its argument and leaves every output untouched.
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif
#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/runtime/threading.hpp"
#include "tessera/tessera.h"
#include "test_util.hpp"

namespace contract_test {

namespace {

const tessera_transpose N = TESSERA_NO_TRANS;

bool starts_with(const char* message, const std::string& name) {
  return std::string(message).compare(0, name.size(), name) == 0;
}

// Expects `call` to fail with `status`, its message starting with `name`, and the bytes of
// every listed buffer unchanged.
#define EXPECT_FAILS_UNTOUCHED(call, status, name, ...)                                        \
  do {                                                                                         \
    const std::vector<std::vector<float>*> bufs_{__VA_ARGS__};                                 \
    std::vector<std::vector<float>> before_;                                                   \
    for (auto* b_ : bufs_) before_.push_back(*b_);                                             \
    EXPECT_EQ((call), status) << #call;                                                        \
    EXPECT_TRUE(starts_with(tessera_last_error(), name))                                       \
        << #call << ": \"" << tessera_last_error() << "\" does not start with " << name;       \
    for (size_t i_ = 0; i_ < bufs_.size(); ++i_)                                               \
      EXPECT_EQ(std::memcmp(bufs_[i_]->data(), before_[i_].data(), before_[i_].size() * 4), 0) \
          << #call << " wrote buffer " << i_;                                                  \
  } while (0)

TEST(Contract, GemmOutputAliasingAnInputIsRejected) {
  // c == a at n = 300 used to return TESSERA_OK with errors of 2.3e9.
  std::vector<float> a = tt::random_vec(300 * 300, 1), b = tt::random_vec(300 * 300, 2);
  EXPECT_FAILS_UNTOUCHED(
      tessera_sgemm(N, N, 300, 300, 300, 1, a.data(), 300, b.data(), 300, 0, a.data(), 300),
      TESSERA_INVALID_ARGUMENT, "c overlaps a", &a, &b);
  EXPECT_FAILS_UNTOUCHED(
      tessera_sgemm(N, N, 100, 100, 100, 1, a.data(), 300, b.data(), 300, 0, b.data() + 150, 300),
      TESSERA_INVALID_ARGUMENT, "c overlaps b", &a, &b);
  // Batched: the last C matrix reaches into A.
  std::vector<float> buf(4 * 64, 1.0f);
  EXPECT_FAILS_UNTOUCHED(
      tessera_sgemm_strided_batched(N, N, 4, 4, 4, 1, buf.data() + 128, 4, 16, buf.data(), 4, 0, 0,
                                    buf.data() + 64, 4, 32, 3),
      TESSERA_INVALID_ARGUMENT, "c overlaps a", &buf);
  // Packed: C over the packed buffer.
  const size_t bytes = tessera_sgemm_pack_b_size(N, 8, 8);
  std::vector<float> packed(bytes / 4 + 64), small = tt::random_vec(64, 3);
  ASSERT_EQ(tessera_sgemm_pack_b(N, 8, 8, small.data(), 8, packed.data(), bytes), TESSERA_OK);
  EXPECT_FAILS_UNTOUCHED(
      tessera_sgemm_packed(N, 8, 8, 8, 1, small.data(), 8, packed.data(), 0, packed.data() + 20, 8),
      TESSERA_INVALID_ARGUMENT, "c overlaps packed", &packed, &small);
  EXPECT_FAILS_UNTOUCHED(tessera_sgemm_pack_b(N, 8, 8, packed.data() + 16, 8, packed.data(), bytes),
                         TESSERA_INVALID_ARGUMENT, "packed overlaps b", &packed);
}

TEST(Contract, AttentionOutputAliasingAnInputIsRejected) {
  // o == k and o == v at L = 1500 used to return TESSERA_OK with errors of 0.23.
  tessera_attention_desc d;
  ASSERT_EQ(tessera_attention_desc_init(&d, 1, 2, 2, 1500, 1500, 32, 32), TESSERA_OK);
  std::vector<float> q = tt::random_vec(2 * 1500 * 32, 1), k = tt::random_vec(q.size(), 2);
  std::vector<float> v = tt::random_vec(q.size(), 3), lse(2 * 1500);
  EXPECT_FAILS_UNTOUCHED(tessera_attention(&d, q.data(), k.data(), v.data(), k.data()),
                         TESSERA_INVALID_ARGUMENT, "o overlaps k", &q, &k, &v);
  EXPECT_FAILS_UNTOUCHED(tessera_attention(&d, q.data(), k.data(), v.data(), v.data() + 7),
                         TESSERA_INVALID_ARGUMENT, "o overlaps v", &q, &k, &v);
  d.lse = q.data() + 100;
  std::vector<float> o(q.size(), 42.0f);
  EXPECT_FAILS_UNTOUCHED(tessera_attention(&d, q.data(), k.data(), v.data(), o.data()),
                         TESSERA_INVALID_ARGUMENT, "desc->lse overlaps q", &q, &o);
}

TEST(Contract, LayerAndSoftmaxOutputsAliasingAreRejected) {
  std::vector<float> x = tt::random_vec(64, 1), out(8, 42.0f);
  EXPECT_FAILS_UNTOUCHED(tessera_logsumexp(4, 16, x.data(), 16, 1, x.data() + 60),
                         TESSERA_INVALID_ARGUMENT, "out overlaps x", &x);
  std::vector<float> enc = tt::random_vec(64, 2), w = tt::random_vec(64, 3), keys(64);
  ASSERT_EQ(tessera_additive_keys(8, 8, 8, enc.data(), w.data(), keys.data()), TESSERA_OK);
  EXPECT_FAILS_UNTOUCHED(
      tessera_additive_attention_step(8, 8, 8, 8, enc.data(), keys.data(), w.data(), w.data(),
                                      w.data(), enc.data(), nullptr),
      TESSERA_INVALID_ARGUMENT, "context overlaps enc", &enc, &keys, &w);
  // MHA: k_cache == v_cache, a cache over the input, out over a weight.
  tessera_mha_desc d;
  ASSERT_EQ(tessera_mha_desc_init(&d, 1, 2, 2, 4, 2), TESSERA_OK);
  std::vector<float> wq = tt::random_vec(16, 4), xin = tt::random_vec(8, 5), cache(64);
  d.w_q = d.w_k = d.w_v = d.w_o = wq.data();
  d.k_cache = d.v_cache = cache.data();
  d.cache_capacity = 8;
  EXPECT_FAILS_UNTOUCHED(tessera_mha_forward(&d, xin.data(), xin.data(), out.data(), nullptr, 0),
                         TESSERA_INVALID_ARGUMENT, "desc->k_cache overlaps desc->v_cache", &cache,
                         &out);
  std::vector<float> vcache(64);
  d.v_cache = vcache.data();
  d.k_cache = xin.data();
  d.cache_capacity = 2;
  EXPECT_FAILS_UNTOUCHED(tessera_mha_forward(&d, xin.data(), xin.data(), out.data(), nullptr, 0),
                         TESSERA_INVALID_ARGUMENT, "desc->k_cache overlaps x_q", &xin, &out);
  d.k_cache = d.v_cache = nullptr;
  EXPECT_FAILS_UNTOUCHED(tessera_mha_forward(&d, xin.data(), xin.data(), wq.data() + 4, nullptr, 0),
                         TESSERA_INVALID_ARGUMENT, "out overlaps desc->w_q", &wq, &xin);
}

TEST(Contract, SizeProductsThatOverflowAreRejected) {
  std::vector<float> a(16, 1), c(16, 42.0f);
  const int64_t big = int64_t(1) << 40;
  // 2^40 rows of lda 2^40: the span overflows 64 bits (signed overflow was undefined).
  EXPECT_FAILS_UNTOUCHED(
      tessera_sgemm(N, N, big, 2, 2, 1, a.data(), big, a.data(), 2, 0, c.data(), 2),
      TESSERA_INVALID_ARGUMENT, "a", &c);
  tessera_attention_desc d;
  EXPECT_EQ(tessera_attention_desc_init(&d, 1, 1 << 20, 1, big, 1, 1 << 20, 1),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_TRUE(starts_with(tessera_last_error(), "q_len")) << tessera_last_error();
  // The ARMv7 case: q_len 32768 and heads x head_dim 32768 is a 4 GiB workspace, which wrapped
  // a 32-bit size_t to ~320 bytes. Rejected there; exact on 64-bit targets.
  tessera_mha_desc m;
  ASSERT_EQ(tessera_mha_desc_init(&m, 1, 32768, 1, 32768, 32), TESSERA_OK);
  m.w_q = m.w_k = m.w_v = m.w_o = a.data();
  size_t bytes = 0;
  const tessera_status s = tessera_mha_workspace_size(&m, &bytes);
  if (sizeof(size_t) < 8) {
    EXPECT_EQ(s, TESSERA_INVALID_ARGUMENT);
    EXPECT_TRUE(starts_with(tessera_last_error(), "desc")) << tessera_last_error();
  } else {
    ASSERT_EQ(s, TESSERA_OK);
    EXPECT_GE(bytes, 2 * size_t(32768) * 32768 * 4);  // the Q and O buffers at least
  }
  EXPECT_EQ(tessera_sgemm_pack_b_size(N, big, big), 0u);
}

// pack_b takes the buffer's size and reads the active table once: switching tables between
// pack_b_size and pack_b (from any thread) can no longer write past the buffer.
TEST(Contract, PackedBufferSizedForAnotherTable) {
  const auto isas = tt::all_isas();
  if (isas.size() < 2) GTEST_SKIP() << "one kernel table here";
  const std::string previous = tessera_isa_name();
  // k 300, n 257: the packed size differs between tables (the tiles' panel widths).
  std::vector<float> b = tt::random_vec(300 * 257, 1);
  size_t smallest = SIZE_MAX;
  std::string smallest_isa;
  for (const auto& isa : isas) {
    ASSERT_EQ(tessera_set_isa(isa.c_str()), TESSERA_OK);
    const size_t s = tessera_sgemm_pack_b_size(N, 300, 257);
    if (s < smallest) smallest = s, smallest_isa = isa;
  }
  for (const auto& isa : isas) {
    ASSERT_EQ(tessera_set_isa(isa.c_str()), TESSERA_OK);
    const size_t need = tessera_sgemm_pack_b_size(N, 300, 257);
    std::vector<float> buf(smallest / 4 + 256, 42.0f);
    const tessera_status s = tessera_sgemm_pack_b(N, 300, 257, b.data(), 257, buf.data(), smallest);
    if (need > smallest) {
      EXPECT_EQ(s, TESSERA_INVALID_ARGUMENT) << isa;
      EXPECT_TRUE(starts_with(tessera_last_error(), "packed_bytes")) << tessera_last_error();
      for (float f : buf) ASSERT_EQ(f, 42.0f) << isa << " wrote a buffer it rejected";
    } else {
      EXPECT_EQ(s, TESSERA_OK) << isa;
    }
    for (size_t i = smallest / 4; i < buf.size(); ++i)
      ASSERT_EQ(buf[i], 42.0f) << isa << " wrote past packed_bytes";
  }
  // Another thread switches tables while this one sizes and packs: never past the buffer.
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    for (size_t i = 0; !stop; ++i) tessera_set_isa(isas[i % isas.size()].c_str());
  });
  for (int i = 0; i < 300; ++i) {
    const size_t s = tessera_sgemm_pack_b_size(N, 300, 257);
    std::vector<float> buf(s / 4 + 64, 42.0f);
    const tessera_status st = tessera_sgemm_pack_b(N, 300, 257, b.data(), 257, buf.data(), s);
    ASSERT_TRUE(st == TESSERA_OK || st == TESSERA_INVALID_ARGUMENT);
    for (size_t j = s / 4; j < buf.size(); ++j) ASSERT_EQ(buf[j], 42.0f) << "wrote past the buffer";
  }
  stop = true;
  flipper.join();
  tessera_set_isa(previous.c_str());
}

// Scratch is reported and released: the per-thread GEMM buffers (up to 8 MB a thread) were
// neither. Calls work again after a release, growing it anew.
TEST(Contract, ScratchIsReportedAndReleased) {
  std::vector<float> a = tt::random_vec(512 * 512, 1), c(512 * 512);
  ASSERT_EQ(tessera_sgemm(N, N, 512, 512, 512, 1, a.data(), 512, a.data(), 512, 0, c.data(), 512),
            TESSERA_OK);
  EXPECT_GT(tessera_scratch_bytes(), size_t(0));
  ASSERT_EQ(tessera_release_scratch(), TESSERA_OK);
  EXPECT_EQ(tessera_scratch_bytes(), size_t(0));
  std::vector<float> again(c.size());
  ASSERT_EQ(
      tessera_sgemm(N, N, 512, 512, 512, 1, a.data(), 512, a.data(), 512, 0, again.data(), 512),
      TESSERA_OK);
  EXPECT_EQ(std::memcmp(c.data(), again.data(), c.size() * 4), 0);
  EXPECT_GT(tessera_scratch_bytes(), size_t(0));
}

// tessera_set_num_threads caps Tessera's calls, not the host's TBB work.
TEST(Contract, ThreadCapStaysInsideTessera) {
  using tbb::global_control;
  const size_t host = global_control::active_value(global_control::max_allowed_parallelism);
  const int host_arena = tbb::this_task_arena::max_concurrency();
  auto inside = [] {
    int n = 0;
    tessera::detail::in_arena([&] {
      n = tbb::this_task_arena::max_concurrency();
      return tessera::Status::ok;
    });
    return n;
  };
  ASSERT_EQ(tessera_set_num_threads(1), TESSERA_OK);
  EXPECT_EQ(inside(), 1) << "the cap did not take effect";
  EXPECT_EQ(global_control::active_value(global_control::max_allowed_parallelism), host)
      << "the cap reached the host's TBB";
  EXPECT_EQ(tbb::this_task_arena::max_concurrency(), host_arena);
  ASSERT_EQ(tessera_set_num_threads(3), TESSERA_OK);
  EXPECT_EQ(inside(), 3);
  ASSERT_EQ(tessera_set_num_threads(0), TESSERA_OK);
  EXPECT_EQ(inside(), host_arena);
}

}  // namespace

namespace {

// The per-table fixtures (tt::isas) run every table this build has whose features the CPU
// reports, read here from CPUID or the target, apart from the dispatcher: a table the
// dispatcher stopped offering would otherwise just drop out of every test.
TEST(Contract, EveryTableThisCpuRunsIsTested) {
  std::vector<std::string> expected;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    expected.emplace_back("avx512");
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    expected.emplace_back("avx2");
  expected.emplace_back("sse2");
#elif defined(__aarch64__)
  // HWCAP_ASIMDHP (bit 10) and HWCAP_ASIMDDP (bit 20): the v8.2 table.
  const unsigned long hwcap = getauxval(AT_HWCAP);
  if ((hwcap & (1ul << 10)) && (hwcap & (1ul << 20))) expected.emplace_back("neon64_v82");
  expected.emplace_back("neon64");
#elif defined(__arm__)
  expected.emplace_back("neon32");
#endif
  if (tt::best_table_only()) expected.resize(1);  // TESSERA_TEST_TABLES=best
  EXPECT_EQ(tt::isas(), expected);
  std::string tested;
  for (const auto& isa : tt::isas()) tested += " " + isa;
  std::printf("kernel tables tested on this CPU:%s\n", tested.c_str());
}

// The tests' acceptance norm is relative to the output's own scale: an output near 0.15 off by
// 1e-5 is 6.7e-5 relative (a floor of 1 under the scale made it 1e-5, absolute, for every
// output below 1), and an output of zeros against a reference that is not is 100%.
TEST(Contract, TheAcceptanceNormIsRelativeBelowOne) {
  const std::vector<float> ref = {0.15f, -0.1f, 0.05f}, out = {0.15001f, -0.1f, 0.05f};
  EXPECT_NEAR(tt::rel_err(out, ref), 1e-5 / 0.15, 1e-6);
  EXPECT_EQ(tt::rel_err(std::vector<float>(3, 0.0f), ref), 1.0);
  EXPECT_EQ(tt::rel_err(std::vector<float>(3, 0.0f), std::vector<float>(3, 0.0f)), 0.0);
  EXPECT_EQ(tt::rel_err({1e-3f}, {0.0f}), 1e-3f);  // a reference of zeros: absolute
}

}  // namespace

}  // namespace contract_test
