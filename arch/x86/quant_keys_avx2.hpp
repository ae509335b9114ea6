// The q4_0 dot kernel of the avx2 table for 2-4 query rows (QuantDotFn's contract,
// arch/kernels.hpp), by intrinsics: xsimd 8.1 has no vpmaddubsw.
//
// Eight keys a step, one a 32-bit lane: each key block's 16 bytes are transposed in registers
// into 4 vectors (dword i of the 8 keys), whose low and high nibbles are the key's values 4i..4i+3
// and 16+4i..16+4i+3, stored as n = k + 8. vpmaddubsw multiplies them (unsigned) by 4 query bytes
// broadcast (signed): a 16-bit lane adds 2 products, and the 8 dword groups of a block add in
// 16 bits (16 products of at most 15 x 127: 30480, no saturation) before one vpmaddwd makes the
// key's exact block sum of n q; -8 sum q then gives sum k q. The float work is one conversion and
// one FMA per block, row and 8 keys, and the scores leave as one vector per row; the kernel the
// table builds from QuantAvx2 spends per key and row a sign, a conversion, an FMA and a
// horizontal sum besides. A last group of fewer than 8 keys repeats its last key in the missing
// lanes (read, never stored), so every key is summed alike wherever it falls in the call.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "../common/prefetch.hpp"
#include "../common/quant_lanes.hpp"
#include "../kernels.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

namespace avx2_keys {

constexpr int kKeys = 8;         // keys a step, one a lane
constexpr int kPassBlocks = 16;  // blocks a pass: the query's offset starts on the stack

// Block `off` of the 8 keys rows[c] as 8 vectors of nibbles: vector i lane c holds the key's
// values 4i..4i+3 (i < 4: low nibbles; else high nibbles of dword i - 4). Loads pair keys (m, m +
// 4), so that two unpack levels leave the lanes in key order.
inline void transpose_nibbles(const uint8_t* const* rows, int64_t off, __m256i* t) {
  __m256i x[4];
  for (int m = 0; m < 4; ++m)
    x[m] = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[m] + off))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[m + 4] + off)), 1);
  const __m256i t0 = _mm256_unpacklo_epi32(x[0], x[1]), t1 = _mm256_unpackhi_epi32(x[0], x[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(x[2], x[3]), t3 = _mm256_unpackhi_epi32(x[2], x[3]);
  const __m256i u[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                        _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_and_si256(u[i], m4);
    t[i + 4] = _mm256_and_si256(_mm256_srli_epi16(u[i], 4), m4);
  }
}

}  // namespace avx2_keys

template <int R>
void quant_dot_q4_avx2_keys(const QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n, float* s,
                            int64_t lds, float alpha) {
  using namespace avx2_keys;
  constexpr int64_t BS = kQBlockBytes[1];
  const int64_t blocks = q.blocks, groups = (n + kKeys - 1) / kKeys;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b0 = 0; b0 < blocks; b0 += kPassBlocks) {
    const int64_t nb = std::min<int64_t>(kPassBlocks, blocks - b0);
    const bool first = b0 == 0;
    int32_t start[R][kPassBlocks];
    offset_starts(q, b0, nb, 8, start);
    for (int64_t j = 0; j < n; j += kKeys) {
      const int nk = int(std::min<int64_t>(kKeys, n - j));
      const uint8_t* rows[kKeys];
      for (int c = 0; c < kKeys; ++c) rows[c] = k + (j + std::min(c, nk - 1)) * ldk;
      __m256 acc[R];
      for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t off = (b0 + b) * BS;
        if (q.next.spread_rows > 0)  // the caller's later rows: a share each block of a group
          prefetch_share(q.next.spread, q.next.spread_rows, ldk, blocks * BS,
                         b0 * groups + j / kKeys * nb + b, blocks * groups, q.next.spread_l1);
        __m256i t[8];
        transpose_nibbles(rows, off + 2, t);
        alignas(16) uint16_t h[kKeys];
        load_scales(rows, off, h);
        const __m256 dk = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const int8_t* qb = q.qs + r * q.ld + (b0 + b) * kQBlock;
          __m256i e = _mm256_maddubs_epi16(t[0], _mm256_set1_epi32(load_i32(qb)));
          __m256i o = _mm256_maddubs_epi16(t[1], _mm256_set1_epi32(load_i32(qb + 4)));
          for (int i = 2; i < 8; i += 2) {
            e = _mm256_add_epi16(
                e, _mm256_maddubs_epi16(t[i], _mm256_set1_epi32(load_i32(qb + 4 * i))));
            o = _mm256_add_epi16(
                o, _mm256_maddubs_epi16(t[i + 1], _mm256_set1_epi32(load_i32(qb + 4 * i + 4))));
          }
          const __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(e, o), ones),
                                                _mm256_set1_epi32(start[r][b]));
          const __m256 sc = _mm256_mul_ps(_mm256_set1_ps(q.d[r * blocks + b0 + b]), dk);
          acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), sc, acc[r]);
        }
      }
      const __m256i lane = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
      const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(nk), lane);
      for (int r = 0; r < R; ++r) {
        float* out = s + r * lds + j;
        __m256 v = _mm256_mul_ps(_mm256_set1_ps(alpha), acc[r]);
        if (!first) v = _mm256_add_ps(_mm256_maskload_ps(out, keep), v);
        _mm256_maskstore_ps(out, keep, v);
      }
    }
  }
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
