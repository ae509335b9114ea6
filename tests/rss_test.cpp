// The layer's ring cache: the peak over 20,000 decode steps is the first 2,000 steps' peak.
// Attention's memory does not grow with the sequence: the peak resident set of a fresh process
// (VmHWM) after calls at L = 1024, 4096 and 16384 (prefill and decode) stays within a few MB of
// what the inputs take, where a materialised score matrix would be 1 GiB at 16384. A process of
// its own, so that no other test's peak hides the growth; not under the sanitizers.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace {

long peak_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

TEST(Memory, AttentionPeakRssFlatFrom1024To16384) {
  const int64_t max_len = 16384, d = 64;
  // Inputs for the largest call, touched, before the baseline.
  std::vector<float> q(size_t(max_len * d), 0.01f), k(q), v(q), o(q);
  for (size_t i = 0; i < q.size(); ++i) q[i] = k[i] = v[i] = float(i % 97) * 0.01f;
  const long base = peak_kb();
  ASSERT_GT(base, 0);
  for (int64_t q_len : {int64_t(0), int64_t(1)}) {  // 0: prefill (q_len = L), 1: decode
    for (int64_t L : {1024, 4096, 16384}) {
      tessera_attention_desc desc;
      ASSERT_EQ(tessera_attention_desc_init(&desc, 1, 1, 1, q_len ? 1 : L, L, d, d), TESSERA_OK);
      desc.causal = 1;
      desc.align = TESSERA_ALIGN_BOTTOM_RIGHT;
      ASSERT_EQ(tessera_attention(&desc, q.data(), k.data(), v.data(), o.data()), TESSERA_OK);
      const long grown = peak_kb() - base;
      std::printf("%s L = %5lld: peak RSS %ld KB above the inputs\n", q_len ? "decode " : "prefill",
                  (long long)L, grown);
      EXPECT_LT(grown, 32 * 1024) << "L = " << L;  // the score matrix alone: 1 GiB at 16384
    }
  }
}

// A ring cache decodes forever in the memory of its capacity: 20,000 steps with window 1024 and
// 4 pinned rows leave the peak RSS where the first 2,000 left it (within 256 KB).
TEST(Memory, RingCacheDecodeStaysFlatOver20000Steps) {
  const int64_t M = 256, heads = 4, kv_heads = 2, hd = 64, keep = 4, window = 1024;
  tessera_mha_desc d;
  ASSERT_EQ(tessera_mha_desc_init(&d, 1, 1, 1, M, heads), TESSERA_OK);
  d.kv_heads = kv_heads, d.causal = 1;
  std::vector<float> wq(size_t(M * M), 0.01f), wkv(size_t(M * kv_heads * hd), 0.01f), wo(wq);
  std::vector<float> kc(static_cast<size_t>(kv_heads * (keep + window) * hd)), vc(kc);
  std::vector<float> x(static_cast<size_t>(M)), out(x);
  d.w_q = wq.data(), d.w_k = d.w_v = wkv.data(), d.w_o = wo.data();
  d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = keep + window;
  d.ring_window = window, d.ring_keep = keep;
  d.rope.style = TESSERA_ROPE_NEOX;
  long after_2000 = 0;
  for (int64_t p = 0; p < 20000; ++p) {
    for (int64_t i = 0; i < M; ++i) x[size_t(i)] = float((p * 31 + i) % 17) * 0.1f;
    d.cache_len = p;
    ASSERT_EQ(tessera_mha_forward(&d, x.data(), x.data(), out.data(), nullptr, 0), TESSERA_OK)
        << tessera_last_error();
    if (p == 1999) after_2000 = peak_kb();
  }
  const long grown = peak_kb() - after_2000;
  std::printf("ring decode: peak RSS %ld KB after 2,000 steps, +%ld KB after 20,000\n", after_2000,
              grown);
  EXPECT_LT(grown, 256);
}

}  // namespace
