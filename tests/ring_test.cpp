// The layer's ring cache (StreamingLLM: ring_keep pinned rows and a ring of the latest tokens):
// decode steps far past the capacity against reference::mha_forward over the full history with
// the equivalent keep-mask (key j seen by the query at p where j <= p and j < keep or
// j > p - window), rotary positions counting on; chunked prefill into a ring with slack; the
// options a ring rules out, rejected with nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/layers.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"

namespace {

using tessera::Status;
namespace ref = tessera::reference;

// A layer with a ring, the tokens it has seen, and the full history's K/V rows as the reference
// computes them (projections in double rounded to float, rotated, then stored as the cache type).
struct RingRun {
  int64_t M = 32, Hq = 4, Hk = 2, D = 16, keep, window, cap;
  tessera_dtype ct;
  tessera::MhaDesc d;
  std::vector<float> wq, wk, wv, wo, tokens;
  std::vector<char> kc, vc;   // the ring
  std::vector<float> hk, hv;  // the full history, [position][kv head][D], float32 values

  RingRun(int64_t keep_, int64_t window_, int64_t slack, tessera_dtype type, int64_t max_len,
          int64_t head_dim)
      : D(head_dim), keep(keep_), window(window_), cap(keep_ + window_ + slack), ct(type) {
    M = 2 * head_dim;
    EXPECT_EQ(tessera::mha_desc_init(d, 1, 1, 1, M, Hq), Status::ok);
    d.kv_heads = Hk, d.head_dim = d.value_dim = D, d.causal = 1;
    wq = tt::random_vec(size_t(M * Hq * D), 1, -0.3f, 0.3f);
    wk = tt::random_vec(size_t(M * Hk * D), 2, -0.3f, 0.3f);
    wv = tt::random_vec(size_t(M * Hk * D), 3, -0.3f, 0.3f);
    wo = tt::random_vec(size_t(Hq * D * M), 4, -0.3f, 0.3f);
    d.w_q = wq.data(), d.w_k = wk.data(), d.w_v = wv.data(), d.w_o = wo.data();
    d.rope.style = TESSERA_ROPE_NEOX;
    kc.assign(size_t(Hk * cap) * ref::storage_bytes(ct, D), 0), vc = kc;
    d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = cap, d.cache_type = ct;
    d.ring_window = window, d.ring_keep = keep;
    hk.reserve(size_t(Hk * max_len * D)), hv.reserve(hk.capacity());
  }
  float stored(float x) const {
    return ct == TESSERA_F16 ? ref::f16_to_f32(ref::f32_to_f16(x)) : x;
  }
  // The reference's rows of the new tokens, appended to the history (as stored in the cache).
  void extend_history(const float* x, int64_t n) {
    const int64_t seen = int64_t(hk.size()) / (Hk * D);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < Hk; ++h) {
        float krow[64], vrow[64];
        for (int64_t c = 0; c < D; ++c) {
          double sk = 0, sv = 0;
          for (int64_t i = 0; i < M; ++i) {
            sk += double(x[t * M + i]) * wk[size_t(i * Hk * D + h * D + c)];
            sv += double(x[t * M + i]) * wv[size_t(i * Hk * D + h * D + c)];
          }
          krow[c] = float(sk), vrow[c] = float(sv);
        }
        ref::rope_row(d.rope, D, double(seen + t), krow);
        for (int64_t c = 0; c < D; ++c)  // rounded as the cache stores them
          hk.push_back(stored(krow[c])), hv.push_back(stored(vrow[c]));
      }
  }
  // The reference's output for the n tokens at [seen, seen + n) over the full history.
  std::vector<float> reference(const float* x, int64_t n, int64_t seen) {
    tessera::MhaDesc r = d;
    r.ring_window = r.ring_keep = 0;
    r.q_len = r.kv_len = n, r.cache_len = seen, r.cache_capacity = seen + n;
    // The history as the cache's type (its values already rounded to it: stored exactly).
    const size_t bytes = ref::storage_bytes(ct, 1);
    std::vector<char> k(size_t(Hk * (seen + n) * D) * bytes), v(k.size());
    for (int64_t h = 0; h < Hk; ++h)
      for (int64_t p = 0; p < seen; ++p)
        for (int64_t c = 0; c < D; ++c) {
          const int64_t to = (h * (seen + n) + p) * D + c, from = (p * Hk + h) * D + c;
          ref::store_element(ct, k.data(), to, hk[size_t(from)]);
          ref::store_element(ct, v.data(), to, hv[size_t(from)]);
        }
    r.k_cache = k.data(), r.v_cache = v.data();
    std::vector<uint8_t> mask(size_t(n * (seen + n)));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < seen + n; ++j) {
        const int64_t p = seen + i;
        mask[size_t(i * (seen + n) + j)] = j <= p && (j < keep || j > p - window);
      }
    r.mask = mask.data();
    r.mask_stride[0] = r.mask_stride[1] = 0, r.mask_stride[2] = seen + n, r.mask_stride[3] = 1;
    r.causal = 0;
    std::vector<float> out(size_t(n * M));
    ref::mha_forward(r, x, x, out.data());
    return out;
  }
  // The layer's call for n new tokens after `seen`.
  std::vector<float> step(const float* x, int64_t n, int64_t seen) {
    d.q_len = d.kv_len = n, d.cache_len = seen;
    std::vector<float> out(size_t(n * M), tt::kNaN);
    EXPECT_EQ(tessera::mha_forward(d, x, x, out.data()), Status::ok) << tessera::last_error();
    return out;
  }
};

// Decode one token a step far past the capacity (window 1024, keep 4: 20,000 steps natively),
// the output checked against the full history at steps around every wrap and spread over the run.
TEST(RingCache, DecodeFarPastTheCapacityAgainstTheFullHistory) {
#if defined(__x86_64__) || defined(_M_X64)
  const int64_t steps = 20000, window = 1024;
#else  // (under qemu: the same wraps, fewer steps)
  const int64_t steps = 2500, window = 256;
#endif
  const int64_t keep = 4;
  RingRun run(keep, window, 0, TESSERA_F32, steps, 16);
  int checked = 0;
  for (int64_t p = 0; p < steps; ++p) {
    const auto x = tt::random_vec(size_t(run.M), uint32_t(1000 + p));
    run.extend_history(x.data(), 1);
    const auto got = run.step(x.data(), 1, p);
    const int64_t r = (p - keep) % window;
    const bool check = p < 8 || r < 3 || r > window - 3 || p % 997 == 0 || p == steps - 1;
    if (!check) continue;
    const auto want = run.reference(x.data(), 1, p);
    ASSERT_LE(tt::rel_err(got, want), 1e-5) << "position " << p;
    ++checked;
  }
  std::printf("ring: %lld steps, window %lld, keep %lld: %d steps checked\n", (long long)steps,
              (long long)window, (long long)keep, checked);
}

class Ring : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(Ring);

// A ring with slack (4 rows past the window): a prompt prefilled in chunks of up to 5 tokens,
// then single tokens, every call against the full history; f32 and f16 rows.
TEST_P(Ring, ChunkedPrefillThenDecodeAgainstTheFullHistory) {
  for (const tessera_dtype ct : {TESSERA_F32, TESSERA_F16}) {
    SCOPED_TRACE(testing::Message() << "cache " << ct);
    RingRun run(3, 16, 4, ct, 200, 32);
    int64_t seen = 0;
    const int64_t chunks[] = {5, 5, 3, 1, 5, 2, 1, 1, 4, 5, 5, 5, 1, 1, 1, 3, 5, 1};
    for (int round = 0; round < 3; ++round)
      for (const int64_t n : chunks) {
        const auto x = tt::random_vec(size_t(n * run.M), uint32_t(50 + seen));
        run.extend_history(x.data(), n);
        const auto got = run.step(x.data(), n, seen);
        const auto want = run.reference(x.data(), n, seen);
        ASSERT_LE(tt::rel_err(got, want), ct == TESSERA_F32 ? 1e-5 : 2e-3) << "at " << seen;
        seen += n;
      }
  }
}

TEST(RingCacheApi, RejectsWhatARingRulesOutAndWritesNothing) {
  RingRun run(2, 8, 0, TESSERA_F32, 4, 8);
  std::vector<float> x(size_t(4 * run.M), 1.0f), out(x.size(), 7.0f);
  const std::vector<char> ring = run.kc;
  const float slopes[4] = {1, 1, 1, 1};
  const int32_t lens[1] = {1};
  struct Bad {
    const char* name;
    void (*set)(tessera::MhaDesc&, const void*, const void*);
  };
  const Bad bads[] = {
      {"desc->ring_window",
       [](tessera::MhaDesc& b, const void*, const void*) { b.ring_window = -1; }},
      {"desc->ring_keep", [](tessera::MhaDesc& b, const void*, const void*) { b.ring_keep = -1; }},
      {"desc->cache_capacity",
       [](tessera::MhaDesc& b, const void*, const void*) { b.ring_window = 9; }},
      {"desc->kv_len",
       [](tessera::MhaDesc& b, const void*, const void*) { b.q_len = b.kv_len = 2; }},
      {"desc->q_len",
       [](tessera::MhaDesc& b, const void*, const void*) { b.kv_len = 1, b.q_len = 2; }},
      {"desc->causal", [](tessera::MhaDesc& b, const void*, const void*) { b.causal = 0; }},
      {"desc->window_left",
       [](tessera::MhaDesc& b, const void*, const void*) { b.window_left = 4; }},
      {"desc->alibi_slopes", [](tessera::MhaDesc& b, const void* s,
                                const void*) { b.alibi_slopes = static_cast<const float*>(s); }},
      {"desc->kv_lens", [](tessera::MhaDesc& b, const void*,
                           const void* l) { b.kv_lens = static_cast<const int32_t*>(l); }},
  };
  for (const Bad& b : bads) {
    tessera::MhaDesc bd = run.d;
    bd.q_len = bd.kv_len = 1, bd.cache_len = 30;
    b.set(bd, slopes, lens);
    EXPECT_EQ(tessera::mha_forward(bd, x.data(), x.data(), out.data()), Status::invalid_argument)
        << b.name;
    EXPECT_NE(std::string(tessera::last_error()).find(b.name), std::string::npos)
        << tessera::last_error();
    for (float o : out) ASSERT_EQ(o, 7.0f);
    ASSERT_EQ(run.kc, ring);
  }
  tessera::MhaDesc no_cache = run.d;
  no_cache.k_cache = no_cache.v_cache = nullptr;
  EXPECT_EQ(tessera::mha_forward(no_cache, x.data(), x.data(), out.data()),
            Status::invalid_argument);
  EXPECT_NE(std::string(tessera::last_error()).find("ring_window"), std::string::npos);
}

}  // namespace
