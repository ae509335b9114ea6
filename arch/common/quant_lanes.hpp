// What the key-lane dot kernels share (a key a 32-bit lane: arch/x86/quant_vnni512.hpp,
// arch/x86/quant_keys_avx2.hpp): the query's 4-byte groups, each row's offset start, and the keys'
// f16 scales gathered into one array; the query's block sums also serve ARM's dot kernels that
// take q4_0 unsigned (arch/arm/quant_neon4.hpp, quant_smmla.hpp). And what the GEMV kernels
// share (arch/x86/quant_gemv_vnni512.hpp, quant_gemv_avx2.hpp, arch/arm/quant_gemv_sdot.hpp): a
// key's run of f16 scales four to a word, and the stream's prefetch.
#pragma once

#include "kernel_ns.hpp"

#include <cstdint>
#include <cstring>

#include "../kernels.hpp"
#include "prefetch.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

// Four query bytes as one int32 (the kernels broadcast it).
inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// h[c] = the f16 scale of the block at byte `off` of key row rows[c], c < N (scalar loads: a
// vector gather was no faster, and needed 32-bit offsets).
template <int N>
inline void load_scales(const uint8_t* const* rows, int64_t off, uint16_t (&h)[N]) {
  for (int c = 0; c < N; ++c) std::memcpy(&h[c], rows[c] + off, 2);
}

// The f16 scale of the block at blk (its first two bytes).
inline uint16_t scale_bits(const uint8_t* blk) {
  uint16_t h;
  std::memcpy(&h, blk, 2);
  return h;
}

// The f16 scales of the four blocks of type T from blk on, block i in bits 16 i.. 16 i + 15: four
// to a general register, so that a vector takes them by one insert where a lane insert per scale
// took four.
template <int T>
inline uint64_t scale_word(const uint8_t* blk) {
  uint64_t x = 0;
  for (int i = 0; i < 4; ++i) x |= uint64_t(scale_bits(blk + i * kQBlockBytes[T])) << (16 * i);
  return x;
}

// A GEMV kernel's stream (bytes [0, len) of blk) prefetched into L2 two 4 KB pages ahead, within
// the call's rows (before `end`): weights as stored usually lie in 4 KB pages (a mapped file), at
// whose ends the hardware's L2 prefetcher stops; nearer distances (2-4 KB) gained nothing on x86.
// (The packed tile's weights, in huge pages, lost to the same prefetch.)
inline constexpr int64_t kGemvAhead = 8192;
TESSERA_ALWAYS_INLINE void prefetch_gemv_ahead(const uint8_t* blk, int64_t len,
                                               const uint8_t* end) {
  if (blk + kGemvAhead >= end) return;
  for (int64_t l = 0; l < len; l += 64) __builtin_prefetch(blk + kGemvAhead + l, 0, 2);
}

// The sum of row r's int8 in block b: q.sums where the caller took them, else summed here.
inline int32_t row_block_sum(const QuantRows& q, int r, int64_t b) {
  if (q.sums) return q.sums[r * q.blocks + b];
  const int8_t* qb = q.qs + r * q.ld + b * kQBlock;
  int32_t sum = 0;
  for (int i = 0; i < kQBlock; ++i) sum += qb[i];
  return sum;
}

// start[r][b] = -off (the sum of row r's block b0 + b) for b < nb: the share of the keys' offset
// (q8_0: 128, q4_0: 8) that the kernels' unsigned keys add, taken out once per call.
template <int R, int kPass>
void offset_starts(const QuantRows& q, int64_t b0, int64_t nb, int32_t off,
                   int32_t (&start)[R][kPass]) {
  for (int r = 0; r < R; ++r)
    for (int64_t b = 0; b < nb; ++b) start[r][b] = -off * row_block_sum(q, r, b0 + b);
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
