// Softmax row kernels, written once over the xsimd arch.
//
// Contract: n >= 0 contiguous floats; scale > 0 (finite). Special values are not decided here:
// the kernels return per-row (max, sum) and the driver (src/softmax/softmax.cpp) classifies the row
// (NaN anywhere -> the sum is NaN; max = +inf -> mass on the +inf entries; max = -inf -> empty).
// Every sum is reduced in an order fixed by n alone.
//
// Two ways to get (m, s) = (max_j scale x_j, sum_j exp(scale x_j - m)):
//  - online (Milakov & Gimelshein 2018): one read. Each lane keeps a running max and a sum
//    rescaled to it, the rescale paid only by blocks that raise a lane's max (so ~1 exp per
//    vector). For rows that must come from memory (softmax_stats_stream).
//  - two-pass: a max pass, then a sum-of-exp pass (1 exp per vector) that may also store the
//    exps (softmax's exp-store variant, normalised by a third, multiply-only pass). For rows
//    that stay in L1/L2 between passes, where re-reading costs less than the extra exps. Short
//    rows (up to kShortCols) take both passes four rows at a time (short_rows), which fused
//    attention's tile softmax shares (attention_tile_rows, with its running max as a floor).
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <cstdint>

#include "softmax_passes.hpp"
#include "softmax_register_rows.hpp"
#include "softmax_short_rows.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

// Rows that stay in cache, in one call: per row, max; exps stored and summed; y = exps / sum.
// Each row's normalising pass runs after the next row's exp pass, so the horizontal sum and the
// division feeding it overlap that work instead of stalling it (at 128 columns they had cost as
// much as the exps). Reports every row's (max, sum); a row whose max is not finite is not
// written, one whose sum is not a positive finite number is not normalised (the driver rewrites
// both as special rows). Rows are ldx / ldy apart; y may equal x. The next row is prefetched
// during each row's exp pass.
// With `stream` (2 n floats, 64-byte aligned; null: none) the exps go there, alternating halves,
// and the normalising pass writes y with streaming stores: for outputs headed to memory, this
// saves reading every line of y before writing it (a third of the traffic). Rows left
// unnormalised then have nothing written in y.
template <class Arch>
void softmax_rows_each(int64_t rows, int64_t n, const float* x, int64_t ldx, float scale, float* y,
                       int64_t ldy, float* out_max, float* out_sum, float* stream) {
  constexpr float kInf = -softmax_detail::kNegInf;
  const float* pending = nullptr;  // exps of the previous row, waiting for their 1/sum
  float* pending_y = nullptr;
  float pending_mul = 0.0f;
  // The previous row's normalisation: streamed out during this row's exp pass when there is one
  // (drain), otherwise on its own (finish).
  auto drain = [&] {
    return stream && pending ? ScaleStream<Arch>(n, pending, pending_mul, pending_y)
                             : ScaleStream<Arch>();
  };
  auto finish = [&] {
    if (!pending) return;
    if (stream)
      drain().finish();
    else
      affine<Arch>(n, pending, pending_mul, 0.0f, pending_y);
  };
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ldx;
    float* yr = y + r * ldy;
    float* er = stream ? stream + (r % 2) * n : yr;
    const float m = row_max<Arch>(n, xr) * scale;
    float s = std::numeric_limits<float>::quiet_NaN();
    bool drained = false;
    if (m > -kInf && m < kInf) {
      const NextRow next =
          r + 1 < rows ? NextRow{xr + ldx, stream ? nullptr : yr + ldy} : NextRow{};
      s = exp_sum_next<Arch, true>(n, xr, scale, m, er, next, drain());
      drained = stream;
    }
    out_max[r] = m;
    out_sum[r] = s;
    if (!drained) finish();
    const bool normal = s > 0.0f && s < kInf;
    pending = normal ? er : nullptr;
    pending_y = yr;
    pending_mul = normal ? 1.0f / s : 0.0f;
  }
  finish();
  if (stream) stream_fence();
}

// The cached rows' kernel by row length: rows that fit in registers there (up to 128 columns on
// AVX-512; streaming stores when `stream`), other rows up to kShortCols in the exp-store groups
// (plain stores: the streamed form one row at a time was slower for them, 262144 x 64 on AVX2
// 9.8 against 8.4 GB/s, and a short row's bits then do not depend on the size of the call),
// longer rows one at a time.
template <class Arch>
void softmax_rows_cached(int64_t rows, int64_t n, const float* x, int64_t ldx, float scale,
                         float* y, int64_t ldy, float* out_max, float* out_sum, float* stream) {
  using namespace softmax_detail;
  if (softmax_register_rows<Arch>(rows, n, x, ldx, scale, y, ldy, out_max, out_sum, stream)) return;
  if (n > kShortCols) {
    softmax_rows_each<Arch>(rows, n, x, ldx, scale, y, ldy, out_max, out_sum, stream);
    return;
  }
  short_rows<Arch, true>(rows, n, x, ldx, scale, nullptr, y, ldy, out_max, out_sum,
                         [&](int64_t r, int64_t k) {
                           for (int64_t i = r; i < r + k; ++i)
                             if (out_sum[i] > 0.0f && out_sum[i] < -kNegInf)
                               affine<Arch>(n, y + i * ldy, 1.0f / out_sum[i], 0.0f, y + i * ldy);
                         });
}

// (max, sum) of rows ldx apart: short rows in groups (two passes, four rows at a time), the
// others one at a time by the stream kernel (one read; the max pass of the two-pass form waited
// on memory with no exps to overlap: 4096 x 4096 logsumexp, 1 thread, 9 -> 21 GB/s).
template <class Arch>
void softmax_stats_rows(int64_t rows, int64_t n, const float* x, int64_t ldx, float scale,
                        float* out_max, float* out_sum) {
  using namespace softmax_detail;
  if (n <= kShortCols) {
    short_rows<Arch, true>(rows, n, x, ldx, scale, nullptr, nullptr, 0, out_max, out_sum,
                           [](int64_t, int64_t) {});
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    softmax_stats_stream<Arch>(n, x + r * ldx, scale, out_max + r, out_sum + r);
}

// Fused attention's softmax step on a score tile S (rows x n, rows lds apart; meant for tiles
// of at most kShortCols keys, as the short rows), in place: per row, m_new = m unless the tile's
// max exceeds it by more than kRescaleSlack, then m_new = that max; S = exp(S - m_new), in groups
// of rows as the short softmax rows. On return max[r] = m_new and
// sum[r] = sum_j S_j for every row whose m_new is finite; a row whose m_new is not (no key visible
// yet, +inf, NaN) has sum NaN and is left untouched for the caller. m is only read.
template <class Arch>
void attention_tile_rows(int64_t rows, int64_t n, float* s, int64_t lds, const float* m,
                         float* out_max, float* out_sum) {
  softmax_detail::short_rows<Arch, false>(rows, n, s, lds, 1.0f, m, s, lds, out_max, out_sum,
                                          [](int64_t, int64_t) {});
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
