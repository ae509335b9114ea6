// Allocation contract: after a first call of a shape (scratch grows once), repeated calls
// allocate nothing; and when an allocation fails, the call returns TESSERA_OUT_OF_MEMORY with
// every output untouched. malloc and its kin are interposed here (glibc's __libc_* entry points
// do the work), so this binary is not built under the sanitizers, which interpose them too.
#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "src/runtime/tuning.hpp"
#include "tessera/tessera.h"
#include "test_util.hpp"

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
}

namespace {
std::atomic<long> g_count{0};
std::atomic<bool> g_counting{false};
// While set, aligned allocations (Tessera's scratch) fail; TBB's own small ones still succeed.
std::atomic<bool> g_fail_aligned{false};
// While set, only threads other than this one fail (the workers of a parallel call).
std::atomic<bool> g_fail_workers_only{false};
std::thread::id g_caller;

bool refuse_aligned() {
  if (!g_fail_aligned.load(std::memory_order_relaxed)) return false;
  return !g_fail_workers_only.load(std::memory_order_relaxed) ||
         std::this_thread::get_id() != g_caller;
}
void note() {
  if (g_counting.load(std::memory_order_relaxed)) g_count.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* malloc(size_t n) {
  note();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t m) {
  note();
  return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
  note();
  return __libc_realloc(p, n);
}
void* aligned_alloc(size_t a, size_t n) {
  note();
  return refuse_aligned() ? nullptr : __libc_memalign(a, n);
}
void* memalign(size_t a, size_t n) {
  note();
  return __libc_memalign(a, n);
}
int posix_memalign(void** p, size_t a, size_t n) {
  note();
  if (refuse_aligned()) return 12;  // ENOMEM
  *p = __libc_memalign(a, n);
  return *p ? 0 : 12;
}
void free(void* p) { __libc_free(p); }
}

namespace {

// Calls f (a call returning its tessera_status) once to warm up, then counts the allocations of
// `repeats` more calls. Every call must succeed: a call that fails its checks allocates nothing,
// and would pass as allocation-free. Returns -1 when one failed.
template <class F>
long steady_allocations(F&& f, int repeats = 5) {
  const tessera_status first = f();
  EXPECT_EQ(first, TESSERA_OK) << tessera_last_error();
  if (first != TESSERA_OK) return -1;
  tessera_status status[8] = {};
  g_count = 0;
  g_counting = true;
  for (int i = 0; i < repeats && i < 8; ++i) status[i] = f();
  g_counting = false;
  for (int i = 0; i < repeats && i < 8; ++i) {
    EXPECT_EQ(status[i], TESSERA_OK) << tessera_last_error();
    if (status[i] != TESSERA_OK) return -1;
  }
  return g_count.load();
}

const tessera_transpose N = TESSERA_NO_TRANS;

struct Operands {
  std::vector<float> a = tt::random_vec(512 * 512, 1), b = tt::random_vec(512 * 512, 2);
  std::vector<float> c = std::vector<float>(512 * 512);
};

TEST(Allocation, SteadyStateCallsAllocateNothing) {
  Operands o;
  tbb::task_arena one(1);  // one thread: every task runs on the warmed-up thread
  one.execute([&] {
    for (int64_t n : {1, 64, 300, 512}) {  // dot, wide, small-tile and blocked paths
      EXPECT_EQ(steady_allocations([&] {
                  return tessera_sgemm(N, N, n == 1 ? 1 : n, 256, 128, 1, o.a.data(), 128,
                                       o.b.data(), 256, 0, o.c.data(), 256);
                }),
                0)
          << "sgemm n = " << n;
    }
    std::vector<float> x = tt::random_vec(2 * 40000, 3), y(x.size());
    EXPECT_EQ(steady_allocations(
                  [&] { return tessera_softmax(2, 40000, x.data(), 40000, y.data(), 40000, 1); }),
              0);
    std::vector<float> enc = tt::random_vec(64 * 32, 4), keys(64 * 16), w = tt::random_vec(512, 5);
    std::vector<float> ctx(32), weights(64);
    ASSERT_EQ(tessera_additive_keys(64, 32, 16, enc.data(), w.data(), keys.data()), TESSERA_OK);
    EXPECT_EQ(steady_allocations([&] {
                return tessera_additive_attention_step(64, 32, 32, 16, enc.data(), keys.data(),
                                                       w.data(), w.data(), w.data(), ctx.data(),
                                                       weights.data());
              }),
              0);
    // The batched step: 3 states over 200 keys (two 128-key score blocks), padded lengths.
    std::vector<float> benc = tt::random_vec(3 * 200 * 32, 4),
                       bkeys = tt::random_vec(3 * 200 * 16, 5);
    std::vector<float> bctx(3 * 32), bweights(3 * 200);
    const int32_t lens[3] = {200, 0, 77};
    EXPECT_EQ(steady_allocations([&] {
                return tessera_additive_attention_batch(3, 200, 32, 32, 16, benc.data(),
                                                        bkeys.data(), lens, w.data(), w.data(),
                                                        w.data(), bctx.data(), bweights.data());
              }),
              0);
    for (int64_t q_len : {1, 96}) {  // decode (split KV) and prefill (one row tile, six key tiles)
      tessera_attention_desc d;
      ASSERT_EQ(tessera_attention_desc_init(&d, 1, 4, 2, q_len, 1500, 64, 64), TESSERA_OK);
      std::vector<float> q = tt::random_vec(size_t(4 * q_len * 64), 6);
      std::vector<float> k = tt::random_vec(2 * 1500 * 64, 7), v = k, out(q.size());
      EXPECT_EQ(steady_allocations([&] {
                  return tessera_attention(&d, q.data(), k.data(), v.data(), out.data());
                }),
                0)
          << "attention q_len = " << q_len;
    }
    // The layer without a caller workspace (it used to malloc one per call), with and without a
    // cache.
    for (const bool cached : {false, true}) {
      tessera_mha_desc d;
      ASSERT_EQ(tessera_mha_desc_init(&d, 1, 4, 4, 64, 4), TESSERA_OK);
      const std::vector<float> w = tt::random_vec(64 * 64, 8), x = tt::random_vec(4 * 64, 9);
      std::vector<float> kc(4 * 16 * 16), vc(kc.size()), out(4 * 64);
      d.w_q = d.w_k = d.w_v = d.w_o = w.data();
      if (cached) d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = 16;
      EXPECT_EQ(steady_allocations([&] {
                  return tessera_mha_forward(&d, x.data(), x.data(), out.data(), nullptr, 0);
                }),
                0)
          << "mha_forward cached = " << cached;
    }
    // The prepared layer given a workspace: its calls allocate nothing, with or without a cache,
    // for a prefill and a decode step.
    for (const bool cached : {false, true}) {
      for (const int64_t q_len : {1, 9}) {
        tessera_mha_desc d;
        ASSERT_EQ(tessera_mha_desc_init(&d, 2, q_len, q_len, 64, 4), TESSERA_OK);
        d.kv_heads = 2, d.causal = 1;
        const std::vector<float> w = tt::random_vec(64 * 64, 8), x = tt::random_vec(18 * 64, 9);
        std::vector<float> kc(2 * 2 * 16 * 16), vc(kc.size()), out(18 * 64);
        d.w_q = d.w_k = d.w_v = d.w_o = w.data();
        tessera_mha_layer* layer = nullptr;
        ASSERT_EQ(tessera_mha_create(&d, &layer), TESSERA_OK) << tessera_last_error();
        if (cached) d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = 16;
        size_t bytes = 0;
        ASSERT_EQ(tessera_mha_layer_workspace_size(layer, &d, &bytes), TESSERA_OK);
        std::vector<char> ws(bytes);
        EXPECT_EQ(steady_allocations([&] {
                    return tessera_mha_layer_forward(layer, &d, x.data(), x.data(), x.data(),
                                                     out.data(), ws.data(), ws.size());
                  }),
                  0)
            << "mha_layer_forward cached = " << cached << " q_len = " << q_len;
        tessera_mha_destroy(layer);
      }
    }
  });
}

// A decoding step whose attention cannot get its scratch, after the new keys and values went
// into the cache: TESSERA_OUT_OF_MEMORY, and the cache (its new rows too) and out as they were.
// (The rows stayed written: the cache was the one output written before the attention ran.)
TEST(Allocation, FailedLayerStepLeavesTheCacheAsItWas) {
  tessera_mha_desc d;
  ASSERT_EQ(tessera_mha_desc_init(&d, 2, 1, 1, 64, 4), TESSERA_OK);
  d.kv_heads = 2;
  const std::vector<float> w = tt::random_vec(64 * 64, 1), x = tt::random_vec(2 * 64, 2);
  const std::vector<float> b = tt::random_vec(64, 3);
  d.w_q = d.w_k = d.w_v = d.w_o = w.data();
  d.b_k = d.b_v = d.b_o = b.data();
  std::vector<float> kc = tt::random_vec(2 * 2 * 128 * 16, 4), vc = tt::random_vec(kc.size(), 5);
  d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = 128, d.cache_len = 100;
  const std::vector<float> kc0 = kc, vc0 = vc;
  std::vector<float> out(2 * 64, 42.0f);
  size_t bytes = 0;
  ASSERT_EQ(tessera_mha_workspace_size(&d, &bytes), TESSERA_OK);
  std::vector<float> ws(bytes / 4 + 1);
  std::thread([&] {  // a thread with no scratch yet: the small projections need none
    g_fail_aligned = true;
    const tessera_status st =
        tessera_mha_forward(&d, x.data(), x.data(), out.data(), ws.data(), ws.size() * 4);
    g_fail_aligned = false;
    EXPECT_EQ(st, TESSERA_OUT_OF_MEMORY) << tessera_last_error();
  })
      .join();
  EXPECT_EQ(kc, kc0) << "k_cache written by a failed call";
  EXPECT_EQ(vc, vc0) << "v_cache written by a failed call";
  for (float f : out) ASSERT_EQ(f, 42.0f) << "out written by a failed call";
  // And the same step with scratch succeeds and writes exactly the new rows.
  ASSERT_EQ(tessera_mha_forward(&d, x.data(), x.data(), out.data(), ws.data(), ws.size() * 4),
            TESSERA_OK);
  for (size_t i = 0; i < kc.size(); ++i)
    if (i / 16 % 128 != 100) ASSERT_EQ(kc[i], kc0[i]) << "a cache row other than the new one";
}

// A call on a thread that has no scratch yet, with every scratch allocation failing: an error,
// and the outputs as they were.
TEST(Allocation, FailureLeavesOutputsUntouched) {
  std::thread([] {
    tessera_attention_desc d;
    ASSERT_EQ(tessera_attention_desc_init(&d, 1, 4, 2, 300, 1500, 64, 64), TESSERA_OK);
    std::vector<float> q = tt::random_vec(4 * 300 * 64, 6), k = tt::random_vec(2 * 1500 * 64, 7);
    std::vector<float> v = k, out(q.size(), 42.0f), lse(4 * 300, 42.0f);
    d.lse = lse.data();
    std::vector<float> x = tt::random_vec(2 * 40000, 3), y(x.size(), 42.0f);
    g_fail_aligned = true;
    const tessera_status sa = tessera_attention(&d, q.data(), k.data(), v.data(), out.data());
    const tessera_status ss = tessera_softmax(2, 40000, x.data(), 40000, y.data(), 40000, 1);
    g_fail_aligned = false;
    EXPECT_EQ(sa, TESSERA_OUT_OF_MEMORY) << tessera_last_error();
    EXPECT_EQ(ss, TESSERA_OUT_OF_MEMORY) << tessera_last_error();
    for (float f : out) ASSERT_EQ(f, 42.0f) << "attention wrote O before failing";
    for (float f : lse) ASSERT_EQ(f, 42.0f) << "attention wrote lse before failing";
    for (float f : y) ASSERT_EQ(f, 42.0f) << "softmax wrote y before failing";
  }).join();
}

}  // namespace

namespace {

// Every GEMM path takes its tasks' scratch on the calling thread before it writes C: with the
// worker threads' allocations failing a product still succeeds, bit for bit, and on a thread
// without scratch whose allocations all fail it returns TESSERA_OUT_OF_MEMORY with C untouched.
// (Tasks used to allocate their own panels: a failing task left the others' columns written;
// a batch run one item per task, the other items written.)
TEST(Allocation, GemmScratchIsTakenBeforeAnyWrite) {
  struct Shape {
    int64_t m, n, k;
    bool tb;
    int threads;
    int64_t batch;
  };
  const Shape shapes[] = {
      {203, 256, 300, true, 2, 1},     // mid-size, B^T packed per task
      {1024, 1024, 256, false, 2, 1},  // column slices, each packing its own blocks
      {600, 512, 600, false, 6, 1},    // shared blocks, an A block per task
      {4, 1024, 1024, false, 2, 1},    // few rows, B streamed: sums per task
      {3, 1001, 64, false, 2, 1},      // few rows, a column tail panel per task
      {96, 96, 96, true, 2, 1},        // small, B^T packed per task
      {2, 100, 3000, false, 2, 1},     // few rows, narrow B: k chunks, a tail panel per task
      // Batches of one item per task, each a serial product with scratch of its own kind.
      {64, 64, 64, true, 2, 8},      // blocked, B^T packed
      {40, 72, 200, false, 3, 6},    // blocked, B's last panel partial
      {150, 130, 300, false, 2, 4},  // mid-size, A in place, B packed a panel at a time
      {3, 1001, 64, false, 2, 5},    // few rows, a column tail panel
      {2, 100, 3000, false, 2, 4},   // few rows, narrow B: partial sums per chunk of k
  };
  for (const Shape& s : shapes) {
    const auto a = tt::random_vec(size_t(s.batch * s.m * s.k), 1);
    const auto b = tt::random_vec(size_t(s.batch * s.k * s.n), 2);
    const int64_t ldb = s.tb ? s.k : s.n;
    const tessera_transpose tb = s.tb ? TESSERA_TRANS : TESSERA_NO_TRANS;
    auto run = [&](std::vector<float>& c) {
      return tessera_sgemm_strided_batched(TESSERA_NO_TRANS, tb, s.m, s.n, s.k, 1.0f, a.data(), s.k,
                                           s.m * s.k, b.data(), ldb, s.k * s.n, 0.5f, c.data(), s.n,
                                           s.m * s.n, s.batch);
    };
    const std::string shape = std::to_string(s.batch) + " x " + std::to_string(s.m) + "x" +
                              std::to_string(s.n) + "x" + std::to_string(s.k);
    std::vector<float> want(size_t(s.batch * s.m * s.n), 42.0f), got = want, untouched = want;
    std::thread([&] {
      tbb::task_arena(s.threads).execute([&] {
        ASSERT_EQ(run(want), TESSERA_OK);
        tessera_release_scratch();  // the workers' too: they would find it grown
        g_caller = std::this_thread::get_id();
        g_fail_workers_only = true;
        g_fail_aligned = true;
        const tessera_status st = run(got);
        g_fail_aligned = false;
        g_fail_workers_only = false;
        EXPECT_EQ(st, TESSERA_OK) << shape << ": " << tessera_last_error();
        EXPECT_EQ(got, want) << shape;
      });
    }).join();
    std::thread([&] {
      tbb::task_arena(s.threads).execute([&] {
        g_fail_aligned = true;
        const tessera_status st = run(untouched);
        g_fail_aligned = false;
        // A table whose plan for the shape needs no scratch (NEON's 12-column panels divide 72,
        // read in place) succeeds; otherwise out of memory with C as it was.
        if (st == TESSERA_OK) {
          EXPECT_EQ(untouched, want) << shape;
          return;
        }
        EXPECT_EQ(st, TESSERA_OUT_OF_MEMORY) << shape;
        for (float f : untouched) ASSERT_EQ(f, 42.0f) << shape << ": C written before failing";
      });
    }).join();
  }
}

// With a workspace bound to the calling thread, every operation's first call, its worker tasks
// included, allocates nothing: no thread has scratch of its own left (all released), so any
// scratch taken outside the workspace would be a new allocation. A workspace one line short of
// a call's peak gives TESSERA_OUT_OF_MEMORY with the output untouched (streamed softmax rows
// instead take the plain stores); one of the peak succeeds.
TEST(Allocation, BoundWorkspaceCallsAllocateNothing) {
  Operands o;
  // Rows of 4096 up to the active row's streaming-store bound, whose size is a cache's: every
  // row would be 64 MB, a long while under qemu.
  const int64_t stream_rows =
      int64_t(tessera::detail::active_tuning().softmax_stream_bytes / (4096 * 4)) + 1;
  std::vector<float> x = tt::random_vec(std::max<size_t>(size_t(stream_rows) * 4096, 2 * 40000), 3),
                     y(x.size());
  tessera_attention_desc prefill, decode;
  ASSERT_EQ(tessera_attention_desc_init(&prefill, 1, 4, 2, 96, 1500, 64, 64), TESSERA_OK);
  ASSERT_EQ(tessera_attention_desc_init(&decode, 1, 4, 2, 1, 1500, 64, 64), TESSERA_OK);
  std::vector<float> q = tt::random_vec(4 * 300 * 64, 6), k = tt::random_vec(2 * 1500 * 64, 7);
  std::vector<float> out(q.size());
  std::vector<float> enc = tt::random_vec(64 * 32, 4), keys(64 * 16), w = tt::random_vec(512, 5);
  std::vector<float> ctx(32), weights(64);
  tessera_mha_desc mha;
  ASSERT_EQ(tessera_mha_desc_init(&mha, 1, 4, 4, 64, 4), TESSERA_OK);
  mha.w_q = mha.w_k = mha.w_v = mha.w_o = o.b.data();
  std::vector<float> ws(size_t(64) << 20);  // 256 MB, far more than any call below needs
  const std::pair<const char*, std::function<tessera_status()>> calls[] = {
      {"sgemm 1x256x128",
       [&] {
         return tessera_sgemm(N, N, 1, 256, 128, 1, o.a.data(), 128, o.b.data(), 256, 0, o.c.data(),
                              256);
       }},
      {"sgemm 512^3",
       [&] {
         return tessera_sgemm(N, N, 512, 512, 512, 1, o.a.data(), 512, o.b.data(), 512, 0,
                              o.c.data(), 512);
       }},
      {"sgemm 300x256x128 B^T",
       [&] {
         return tessera_sgemm(N, TESSERA_TRANS, 300, 256, 128, 1, o.a.data(), 128, o.b.data(), 128,
                              0, o.c.data(), 256);
       }},
      {"batched 64^3 x 16",
       [&] {
         return tessera_sgemm_strided_batched(N, TESSERA_TRANS, 64, 64, 64, 1, o.a.data(), 64, 4096,
                                              o.b.data(), 64, 4096, 0, o.c.data(), 64, 4096, 16);
       }},
      {"softmax 2 x 40000",
       [&] { return tessera_softmax(2, 40000, x.data(), 40000, y.data(), 40000, 1); }},
      {"softmax 4096 columns streamed",
       [&] { return tessera_softmax(stream_rows, 4096, x.data(), 4096, y.data(), 4096, 1); }},
      {"attention prefill",
       [&] { return tessera_attention(&prefill, q.data(), k.data(), k.data(), out.data()); }},
      {"attention decode",
       [&] { return tessera_attention(&decode, q.data(), k.data(), k.data(), out.data()); }},
      {"additive",
       [&] {
         return tessera_additive_attention(64, 32, 32, 16, enc.data(), w.data(), w.data(), w.data(),
                                           w.data(), ctx.data(), weights.data());
       }},
      {"additive batch",
       [&] {
         return tessera_additive_attention_batch(1, 64, 32, 32, 16, enc.data(), keys.data(),
                                                 nullptr, w.data(), w.data(), w.data(), ctx.data(),
                                                 weights.data());
       }},
      {"mha_forward",
       [&] { return tessera_mha_forward(&mha, x.data(), x.data(), y.data(), nullptr, 0); }},
  };
  std::thread([&] {
    tbb::task_arena two(2);
    two.execute([&] {
      for (const auto& [name, call] : calls) {
        ASSERT_EQ(call(), TESSERA_OK) << name;  // TBB's own task pools, warmed
        ASSERT_EQ(tessera_release_scratch(), TESSERA_OK);
        ASSERT_EQ(tessera_bind_workspace(ws.data(), ws.size() * 4), TESSERA_OK);
        g_count = 0;
        g_counting = true;
        const tessera_status st = call();
        g_counting = false;
        const size_t peak = tessera_workspace_peak();
        EXPECT_EQ(st, TESSERA_OK) << name << ": " << tessera_last_error();
        EXPECT_EQ(g_count.load(), 0) << name << ": allocations with a workspace bound";
        if (peak == 0) continue;
        // One line short: out of memory, nothing written. Then exactly the peak.
        std::vector<float> c0 = o.c, y0 = y, out0 = out, ctx0 = ctx;
        const std::vector<float> small(peak / 4);  // peak counts 63 bytes for alignment
        ASSERT_EQ(tessera_bind_workspace(const_cast<float*>(small.data()), peak - 63 - 64),
                  TESSERA_OK);
        // Streamed softmax rows take the plain stores without their buffers, same results.
        const bool optional = std::string(name).find("streamed") != std::string::npos;
        EXPECT_EQ(call(), optional ? TESSERA_OK : TESSERA_OUT_OF_MEMORY) << name;
        if (optional) y0 = y;
        EXPECT_TRUE(o.c == c0 && y == y0 && out == out0 && ctx == ctx0)
            << name << ": written by a call that failed";
        std::vector<float> exact(peak / 4);
        ASSERT_EQ(tessera_bind_workspace(exact.data(), peak), TESSERA_OK);
        EXPECT_EQ(call(), TESSERA_OK) << name << ": " << tessera_last_error();
        ASSERT_EQ(tessera_bind_workspace(nullptr, 0), TESSERA_OK);
      }
    });
  }).join();
}

}  // namespace
