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

}  // namespace
