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

namespace ring_test {

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
  bool block() const { return ct == TESSERA_Q8_0 || ct == TESSERA_Q4_0; }
  // A row of D values as the cache stores them (a block type's dequantized: quantizing those
  // values again gives the same blocks).
  void store_row(float* row) const {
    if (block()) {
      std::vector<uint8_t> q(ref::storage_bytes(ct, D));
      ref::quantize(ct, D, row, q.data());
      ref::dequantize(ct, D, q.data(), row);
    } else if (ct == TESSERA_F16) {
      for (int64_t c = 0; c < D; ++c) row[c] = ref::f16_to_f32(ref::f32_to_f16(row[c]));
    }
  }
  // The reference's rows of the new tokens, appended to the history (as stored in the cache).
  void extend_history(const float* x, int64_t n) {
    const int64_t seen = int64_t(hk.size()) / (Hk * D);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < Hk; ++h) {
        float krow[64], vrow[64];  // D <= 64
        for (int64_t c = 0; c < D; ++c) {
          double sk = 0, sv = 0;
          for (int64_t i = 0; i < M; ++i) {
            sk += double(x[t * M + i]) * wk[size_t(i * Hk * D + h * D + c)];
            sv += double(x[t * M + i]) * wv[size_t(i * Hk * D + h * D + c)];
          }
          krow[c] = float(sk), vrow[c] = float(sv);
        }
        ref::rope_row(d.rope, D, double(seen + t), krow);
        store_row(krow), store_row(vrow);  // rounded as the cache stores them
        hk.insert(hk.end(), krow, krow + D), hv.insert(hv.end(), vrow, vrow + D);
      }
  }
  // The rows the layer stored for positions [seen, seen + n) against the history's (the
  // reference's): each value within a rounding of the type (float32 projections may land either
  // side of a rounding point). The history then takes the layer's rows, so that a later step's
  // reference reads what the ring holds; returns how many values rounded the other way.
  int64_t take_stored_rows(int64_t seen, int64_t n) {
    const size_t row_bytes = ref::storage_bytes(ct, D);
    int64_t differ = 0;
    for (int64_t p = seen; p < seen + n; ++p)
      for (int64_t h = 0; h < Hk; ++h) {
        const int64_t slot = p < keep ? p : keep + (p - keep) % (cap - keep);
        for (const bool v_side : {false, true}) {
          const char* row = (v_side ? vc : kc).data() + size_t(h * cap + slot) * row_bytes;
          float* want = &(v_side ? hv : hk)[size_t((p * Hk + h) * D)];
          std::vector<float> got(static_cast<size_t>(D));
          if (block())
            ref::dequantize(ct, D, row, got.data());
          else
            for (int64_t c = 0; c < D; ++c) got[size_t(c)] = ref::element(ct, row, c);
          double amax = 0;
          for (int64_t c = 0; c < D; ++c) amax = std::max(amax, double(std::fabs(want[c])));
          const double tol = ct == TESSERA_F32    ? 1e-5 * amax
                             : ct == TESSERA_F16  ? 0x1p-10 * amax
                             : ct == TESSERA_Q8_0 ? 1.2 * amax / 127
                                                  : 1.2 * amax / 8;
          for (int64_t c = 0; c < D; ++c) {
            EXPECT_LE(std::fabs(got[size_t(c)] - want[c]), tol)
                << "position " << p << " head " << h << (v_side ? " value " : " key ") << c;
            differ += got[size_t(c)] != want[c];
            want[c] = got[size_t(c)];
          }
        }
      }
    return differ;
  }
  // The output's tolerance: the float32 arithmetic's, and one rounding of the type where a new
  // row rounded the other way from the reference's.
  double tolerance(int64_t differ) const {
    const double rounding = ct == TESSERA_F32    ? 0.0
                            : ct == TESSERA_F16  ? 0x1p-10
                            : ct == TESSERA_Q8_0 ? 1.0 / 127
                                                 : 1.0 / 8;
    return 1e-5 + (differ > 0 ? rounding : 0.0);
  }
  // The reference's output for the n tokens at [seen, seen + n) over the full history.
  std::vector<float> reference(const float* x, int64_t n, int64_t seen) {
    tessera::MhaDesc r = d;
    r.ring_window = r.ring_keep = 0;
    r.q_len = r.kv_len = n, r.cache_len = seen, r.cache_capacity = seen + n;
    // The history as the cache's type (its values already rounded to it: stored exactly).
    const size_t row_bytes = ref::storage_bytes(ct, D);
    std::vector<char> k(size_t(Hk * (seen + n)) * row_bytes), v(k.size());
    for (int64_t h = 0; h < Hk; ++h)
      for (int64_t p = 0; p < seen; ++p) {
        const size_t to = size_t(h * (seen + n) + p) * row_bytes, from = size_t((p * Hk + h) * D);
        if (block()) {
          ref::quantize(ct, D, &hk[from], k.data() + to);
          ref::quantize(ct, D, &hv[from], v.data() + to);
          continue;
        }
        for (int64_t c = 0; c < D; ++c) {
          ref::store_element(ct, k.data() + to, c, hk[from + size_t(c)]);
          ref::store_element(ct, v.data() + to, c, hv[from + size_t(c)]);
        }
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
// the output checked against the full history at steps around every wrap and spread over the
// run; f32 rows, and q8_0 and q4_0 blocks (rows of 34 and 18 bytes a block: 2,500 steps of a
// window of 256, 800 of 128 under qemu and the sanitizers), each stored row checked against the
// reference's as it is appended.
TEST(RingCache, DecodeFarPastTheCapacityAgainstTheFullHistory) {
#if (defined(__x86_64__) || defined(_M_X64)) && !defined(TESSERA_LIGHT_SWEEPS)
  const bool native = true;
#else  // (under qemu and the sanitizers: the same wraps, fewer steps)
  const bool native = false;
#endif
  const int64_t keep = 4;
  std::vector<tessera_dtype> types = {TESSERA_F32};
  if (tt::block_types_built()) types.push_back(TESSERA_Q8_0), types.push_back(TESSERA_Q4_0);
  for (const tessera_dtype ct : types) {
    // The block types' reference requantizes the history at each check: ten wraps of a
    // shorter window (six under qemu and the sanitizers).
    const bool f32 = ct == TESSERA_F32;
    const int64_t steps = native ? (f32 ? 20000 : 2500) : (f32 ? 2500 : 800);
    const int64_t window = native ? (f32 ? 1024 : 256) : (f32 ? 256 : 128);
    RingRun run(keep, window, 0, ct, steps, ct == TESSERA_F32 ? 16 : 32);
    int checked = 0;
    double worst = 0;
    for (int64_t p = 0; p < steps; ++p) {
      const auto x = tt::random_vec(size_t(run.M), uint32_t(1000 + p));
      run.extend_history(x.data(), 1);
      const auto got = run.step(x.data(), 1, p);
      const int64_t differ = run.take_stored_rows(p, 1);
      ASSERT_FALSE(HasFailure()) << "cache " << ct;
      const int64_t r = (p - keep) % window;
      const bool check = p < 8 || r < 3 || r > window - 3 || p % 997 == 0 || p == steps - 1;
      if (!check) continue;
      const auto want = run.reference(x.data(), 1, p);
      worst = std::max(worst, tt::rel_err(got, want));
      ASSERT_LE(tt::rel_err(got, want), run.tolerance(differ))
          << "cache " << ct << " position " << p << ", " << differ << " values rounded otherwise";
      ++checked;
    }
    std::printf("ring %s: %lld steps, window %lld, keep %lld: %d steps checked, worst %.2e\n",
                ct == TESSERA_F32    ? "f32"
                : ct == TESSERA_Q8_0 ? "q8_0"
                                     : "q4_0",
                (long long)steps, (long long)window, (long long)keep, checked, worst);
  }
}

class Ring : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(Ring);

// A ring with slack (4 rows past the window): a prompt prefilled in chunks of up to 5 tokens,
// then single tokens, every call against the full history; every cache type.
TEST_P(Ring, ChunkedPrefillThenDecodeAgainstTheFullHistory) {
  std::vector<tessera_dtype> types = {TESSERA_F32, TESSERA_F16};
  if (tt::block_types_built()) types.push_back(TESSERA_Q8_0), types.push_back(TESSERA_Q4_0);
  for (const tessera_dtype ct : types) {
    SCOPED_TRACE(testing::Message() << "cache " << ct);
    RingRun run(3, 16, 4, ct, 200, 32);
    int64_t seen = 0;
    double worst = 0;
    const int64_t chunks[] = {5, 5, 3, 1, 5, 2, 1, 1, 4, 5, 5, 5, 1, 1, 1, 3, 5, 1};
    for (int round = 0; round < 3; ++round)
      for (const int64_t n : chunks) {
        const auto x = tt::random_vec(size_t(n * run.M), uint32_t(50 + seen));
        run.extend_history(x.data(), n);
        const auto got = run.step(x.data(), n, seen);
        const int64_t differ = run.take_stored_rows(seen, n);
        ASSERT_FALSE(HasFailure());
        const auto want = run.reference(x.data(), n, seen);
        worst = std::max(worst, tt::rel_err(got, want));
        ASSERT_LE(tt::rel_err(got, want), run.tolerance(differ))
            << "at " << seen << ", " << differ << " values rounded otherwise";
        seen += n;
      }
    std::printf("[ %s ] ring cache %d: worst %.2e\n", GetParam().c_str(), int(ct), worst);
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

}  // namespace ring_test
