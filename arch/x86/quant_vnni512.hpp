// The integer dot kernel of the avx512_vnni table on zmm (QuantDotFn's contract,
// arch/kernels.hpp), by intrinsics: xsimd 8.1 has no vpdpbusd.
//
// Sixteen keys a step, one a lane: each key block's 32 bytes are transposed in registers into 8
// vectors, vector i holding bytes 4i..4i+3 of all 16 keys, and each row's vpdpbusd takes its 4
// query bytes as a broadcast operand. A lane then holds its key's exact block sum, so the float
// work is one conversion and one FMA per block, row and 16 keys (no horizontal sums), and the
// scores leave as one vector per row. vpdpbusd multiplies unsigned by signed bytes: the key goes
// in unsigned with an offset (q8_0: k + 128, one xor; q4_0: its nibbles n = k + 8 as stored) and
// the query signed; the offset's share, -off * (the block's sum of q), starts each sum, so the
// lanes hold sum q k exactly (|k + 128| <= 255, |q| <= 127: 32 products and the start within
// int32). The keys' scales come by scalar loads into one array. A last group of fewer than 16 keys
// repeats its last key in the missing lanes (read, never stored), so that every key is summed alike
// wherever it falls in the call.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../common/prefetch.hpp"
#include "../common/quant_lanes.hpp"
#include "../kernels.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

namespace vnni512 {

constexpr int kKeys = 16;        // keys a step, one a lane
constexpr int kPassBlocks = 16;  // blocks a pass: the query's offset starts on the stack

// Block b of the 16 keys rows[c] as 8 vectors of unsigned bytes, vector i lane c = the key's
// values 4i..4i+3 (+ the offset). Loads pair keys (m, m + 4) and (m + 8, m + 12) a vector, so that
// the three shuffle levels of an 8 x 8 dword transpose leave the lanes in key order.
template <int T>
inline void transpose_keys(const uint8_t* const* rows, int64_t off, __m512i* t) {
  __m512i z[8];
  for (int m = 0; m < 8; ++m) {
    const int a = m < 4 ? m : m + 4, c = a + 4;
    if constexpr (T == 0) {
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[a] + off));
      const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[c] + off));
      z[m] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                              _mm512_set1_epi8(-128));
    } else {
      // [a's 16 bytes | c's], then low nibbles (values 0-15) and high (16-31) of each
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[a] + off));
      const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[c] + off));
      const __m256i xy = _mm256_inserti128_si256(_mm256_castsi128_si256(x), y, 1);
      const __m256i m4 = _mm256_set1_epi8(15);
      const __m512i lh = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(xy, m4)),
                                            _mm256_and_si256(_mm256_srli_epi16(xy, 4), m4), 1);
      // [a 0-15, c 0-15, a 16-31, c 16-31] -> [a 0-31 | c 0-31]
      z[m] = _mm512_shuffle_i64x2(lh, lh, _MM_SHUFFLE(3, 1, 2, 0));
    }
  }
  __m512i u[8];
  for (int h = 0; h < 2; ++h) {
    const __m512i* zz = z + 4 * h;
    const __m512i t0 = _mm512_unpacklo_epi32(zz[0], zz[1]),
                  t1 = _mm512_unpackhi_epi32(zz[0], zz[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(zz[2], zz[3]),
                  t3 = _mm512_unpackhi_epi32(zz[2], zz[3]);
    u[4 * h + 0] = _mm512_unpacklo_epi64(t0, t2), u[4 * h + 1] = _mm512_unpackhi_epi64(t0, t2);
    u[4 * h + 2] = _mm512_unpacklo_epi64(t1, t3), u[4 * h + 3] = _mm512_unpackhi_epi64(t1, t3);
  }
  // u[i] (i < 4) = [keys 0-3 dword i | keys 0-3 dword i + 4 | keys 4-7 i | keys 4-7 i + 4], u[4 +
  // i] the same for keys 8-15
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(u[i], u[4 + i], _MM_SHUFFLE(2, 0, 2, 0));
    t[i + 4] = _mm512_shuffle_i32x4(u[i], u[4 + i], _MM_SHUFFLE(3, 1, 3, 1));
  }
}

// The transposed loads touch 16 rows' lines at once, in an order the hardware prefetcher does not
// follow: each group prefetches the rows two groups ahead (past the call's end: QuantRows::next,
// the next tile's or page's rows in decode), so they arrive while this group's work runs.
constexpr int64_t kAhead = 2;

// ---- one row: a key at a time, two blocks a vector ----

constexpr int kPairs = 4;  // block pairs of the query held per pass: 256 values

inline uint16_t u16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// The key's blocks b and b + 1 (`two`; else b alone, the upper half zero) as unsigned bytes.
template <int T>
inline __m512i key_pair(const uint8_t* blk, bool two) {
  constexpr int64_t BS = kQBlockBytes[T];
  if constexpr (T == 0) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
    const __m256i hi = two ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + BS + 2))
                           : _mm256_set1_epi8(-128);  // zero after the offset
    return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                            _mm512_set1_epi8(-128));
  } else {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m128i b =
        two ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + BS + 2)) : _mm_setzero_si128();
    const __m256i ab = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
    const __m256i m = _mm256_set1_epi8(15);
    const __m512i lh = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(ab, m)),
                                          _mm256_and_si256(_mm256_srli_epi16(ab, 4), m), 1);
    // [a low nibbles, b low, a high, b high] -> [a: values 0-15, 16-31, b: 0-15, 16-31]
    return _mm512_shuffle_i64x2(lh, lh, _MM_SHUFFLE(3, 1, 2, 0));
  }
}

// The key's two block scales, each across its half: [d_b x 8, d_b+1 x 8] (0 for a missing b + 1).
template <int T>
inline __m512 pair_scales(const uint8_t* blk, bool two) {
  constexpr int64_t BS = kQBlockBytes[T];
  const uint32_t h = uint32_t(u16(blk)) | (two ? uint32_t(u16(blk + BS)) << 16 : 0u);
  const __m128 d = _mm_cvtph_ps(_mm_cvtsi32_si128(int(h)));
  const __m512i halves = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(d));
}

// The sums of four vectors' lanes, in one vector's lanes 0-3.
inline __m128 sum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  // 256-bit halves folded, two vectors at a time: [a0 8 | a1 8], [a2 8 | a3 8]
  const __m512 x01 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(a0, a1, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 x23 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(a2, a3, _MM_SHUFFLE(3, 2, 3, 2)));
  // 128-bit lanes folded: [a0 4 | a1 4 | a2 4 | a3 4]
  const __m512 y = _mm512_add_ps(_mm512_shuffle_f32x4(x01, x23, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(x01, x23, _MM_SHUFFLE(3, 1, 3, 1)));
  // within each 128-bit lane: its 4 values summed into every element
  const __m512 z = _mm512_add_ps(y, _mm512_permute_ps(y, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m512 w = _mm512_add_ps(z, _mm512_permute_ps(z, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m512i firsts = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(firsts, w));
}

}  // namespace vnni512

// One query row (a GEMV, or decode without GQA): a key at a time, its blocks in pairs a vector, and
// four keys' sums reduced by one transposing tree; the transposed kernel below would spend its
// transposition on one row only.
template <int T, int R>
void quant_dot_vnni512_key_rows(const QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n,
                                float* s, int64_t lds, float alpha) {
  using namespace vnni512;
  constexpr int64_t BS = kQBlockBytes[T];
  const int64_t blocks = q.blocks;
  for (int64_t b0 = 0; b0 < blocks; b0 += 2 * kPairs) {
    const int64_t nb = std::min<int64_t>(2 * kPairs, blocks - b0), np = (nb + 1) / 2;
    const bool first = b0 == 0;
    // The query side of this pass: q, the offset's start and dq per block pair and row.
    __m512i qv[kPairs][R], start[kPairs][R];
    __m512 dq[kPairs][R];
    for (int64_t p = 0; p < np; ++p) {
      const bool two = 2 * p + 1 < nb;
      for (int r = 0; r < R; ++r) {
        const int8_t* qp = q.qs + r * q.ld + (b0 + 2 * p) * kQBlock;
        qv[p][r] = _mm512_maskz_loadu_epi8(two ? ~__mmask64(0) : __mmask64(0xFFFFFFFFu), qp);
        const __m512i sums =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), qv[p][r]);
        start[p][r] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                       _mm512_slli_epi32(sums, T == 0 ? 7 : 3));  // -off sum q
        const float* dp = q.d + r * blocks + b0 + 2 * p;
        dq[p][r] = _mm512_insertf32x8(_mm512_set1_ps(dp[0]), _mm256_set1_ps(two ? dp[1] : 0.0f), 1);
      }
    }
    // Four keys a step; the last step's missing keys are zero vectors in the same tree, so that
    // every key's blocks are summed in the same order wherever the call's tiles begin.
    const auto key = [&](int64_t j, __m512* acc) {
      for (int64_t p = 0; p < np; ++p) {
        const bool two = 2 * p + 1 < nb;
        const uint8_t* blk = k + j * ldk + (b0 + 2 * p) * BS;
        const __m512i kv = key_pair<T>(blk, two);
        const __m512 dk = pair_scales<T>(blk, two);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m512i t = _mm512_dpbusd_epi32(start[p][r], kv, qv[p][r]);
          acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(dq[p][r], dk), acc[r]);
        }
      }
    };
    const auto store = [&](int64_t j, int nk, __m512(*acc)[R]) {
      for (int r = 0; r < R; ++r) {
        float sums[4];
        _mm_storeu_ps(sums, sum4(acc[0][r], acc[1][r], acc[2][r], acc[3][r]));
        for (int c = 0; c < nk; ++c) {
          float* out = s + r * lds + j + c;
          *out = first ? alpha * sums[c] : *out + alpha * sums[c];
        }
      }
    };
    // The caller's later rows: a share each step of the first pass.
    const auto spread = [&](int64_t j) {
      if (first && q.next.spread_rows > 0)
        prefetch_share(q.next.spread, q.next.spread_rows, ldk, blocks * BS, j / 4, (n + 3) / 4,
                       q.next.spread_l1);
    };
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      spread(j);
      __m512 acc[4][R];
      for (int c = 0; c < 4; ++c)
        for (int r = 0; r < R; ++r) acc[c][r] = _mm512_setzero_ps();
      key(j, acc[0]), key(j + 1, acc[1]), key(j + 2, acc[2]), key(j + 3, acc[3]);
      store(j, 4, acc);
    }
    if (j < n) {
      spread(j);
      __m512 acc[4][R];
      for (int c = 0; c < 4; ++c)
        for (int r = 0; r < R; ++r) acc[c][r] = _mm512_setzero_ps();
      for (int c = 0; c < n - j; ++c) key(j + c, acc[c]);
      store(j, int(n - j), acc);
    }
  }
}

template <int T, int R>
void quant_dot_vnni512(const QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n, float* s,
                       int64_t lds, float alpha) {
  using namespace vnni512;
  constexpr int64_t BS = kQBlockBytes[T];
  const int64_t blocks = q.blocks, groups = (n + kKeys - 1) / kKeys;
  for (int64_t b0 = 0; b0 < blocks; b0 += kPassBlocks) {
    const int64_t nb = std::min<int64_t>(kPassBlocks, blocks - b0);
    const bool first = b0 == 0;
    int32_t start[R][kPassBlocks];
    offset_starts(q, b0, nb, T == 0 ? 128 : 8, start);
    for (int64_t j = 0; j < n; j += kKeys) {
      const int nk = int(std::min<int64_t>(kKeys, n - j));
      const uint8_t* rows[kKeys];
      for (int c = 0; c < kKeys; ++c) rows[c] = k + (j + std::min(c, nk - 1)) * ldk;
      const uint8_t* after = q.next.rows > 0 ? q.next.at + b0 * BS : nullptr;
      if (q.streamed)  // from memory: into L2 measured faster; from the cache, into L1
        prefetch_call_rows<2>(k + b0 * BS, j + kAhead * kKeys, kKeys, n, after, q.next.rows, ldk,
                              nb * BS);
      else
        prefetch_call_rows<3>(k + b0 * BS, j + kAhead * kKeys, kKeys, n, after, q.next.rows, ldk,
                              nb * BS);
      __m512 acc[R];
      for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t off = (b0 + b) * BS;
        if (q.next.spread_rows > 0)  // the caller's later rows: a share each block of a group
          prefetch_share(q.next.spread, q.next.spread_rows, ldk, blocks * BS,
                         b0 * groups + j / kKeys * nb + b, blocks * groups, q.next.spread_l1);
        __m512i t[8];
        transpose_keys<T>(rows, off + 2, t);
        alignas(32) uint16_t h[kKeys];
        load_scales(rows, off, h);
        const __m512 dk = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const int8_t* qb = q.qs + r * q.ld + (b0 + b) * kQBlock;
          // two chains of four: the vpdpbusd latency hidden across rows and chains
          __m512i e = _mm512_set1_epi32(start[r][b]), o = _mm512_setzero_si512();
          for (int i = 0; i < 8; i += 2) {
            e = _mm512_dpbusd_epi32(e, t[i], _mm512_set1_epi32(load_i32(qb + 4 * i)));
            o = _mm512_dpbusd_epi32(o, t[i + 1], _mm512_set1_epi32(load_i32(qb + 4 * i + 4)));
          }
          const __m512 sc = _mm512_mul_ps(_mm512_set1_ps(q.d[r * blocks + b0 + b]), dk);
          acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(e, o)), sc, acc[r]);
        }
      }
      const __mmask16 keep = __mmask16((1u << nk) - 1);
      for (int r = 0; r < R; ++r) {
        float* out = s + r * lds + j;
        __m512 v = _mm512_mul_ps(_mm512_set1_ps(alpha), acc[r]);
        if (!first) v = _mm512_add_ps(_mm512_maskz_loadu_ps(keep, out), v);
        _mm512_mask_storeu_ps(out, keep, v);
      }
    }
  }
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
