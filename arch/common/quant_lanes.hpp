// What the key-lane dot kernels share (a key a 32-bit lane: arch/x86/quant_vnni512.hpp,
// arch/x86/quant_keys_avx2.hpp): the query's 4-byte groups, each row's offset start, and the keys'
// f16 scales gathered into one array; the query's block sums also serve ARM's dot kernels that
// take q4_0 unsigned (arch/arm/quant_neon4.hpp, quant_smmla.hpp).
#pragma once

#include "kernel_ns.hpp"

#include <cstdint>
#include <cstring>

#include "../kernels.hpp"

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
