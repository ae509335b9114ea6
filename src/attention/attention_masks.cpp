// Fused attention's diagonal tiles: the tiles that some query rows see only in part (causal,
// window, kv_lens) or that carry element-wise masks. What each row of such a tile sees, the keys
// each chunk of rows reads, and the softmax step over them.
#include <algorithm>
#include <cstdint>
#include <numeric>

#include "attention/attention_tile.hpp"

namespace tessera::detail::fa {

namespace {

// Whether every row of one head's rows [ra, rb) (positions growing with the row) sees all of the
// keys [w0, w1) of the tile at j0 by the structural rules: both bounds of visible_range grow with
// the position, so the first row has the lowest upper bound and the last the highest lower bound.
bool segment_sees_all(const tessera_attention_desc& d, int64_t valid, int64_t ia, int64_t ib,
                      int64_t j0, int64_t w0, int64_t w1) {
  if (w1 <= w0) return true;
  int64_t lo, hi, unused;
  visible_range(d, valid, position(d, valid, ia), unused, hi);
  visible_range(d, valid, position(d, valid, ib), lo, unused);
  return lo <= j0 + w0 && hi >= j0 + w1;
}

}  // namespace

// Applies masks and score modifications to the tile S[rows x n] for keys [j0, j0 + n), within
// each row's window (tile_windows: the keys the softmax step and P V read; the rest of the row
// is left as it is). Rows go by chunk (one window) and, within it, by head; with structural
// masks only, a head's rows that all see the whole window are skipped together (L = 512, d = 64,
// causal, 1 thread: the tile that rows 256-511 see whole still cost them a row each, and the
// pass was 3.5% of the call).
void mask_tile(const Geometry& g, int64_t b, int64_t hk, int64_t i0, int64_t bq, int64_t j0,
               int64_t n, int64_t valid, const arch::SoftmaxKernels& sk, const int64_t* window,
               int64_t chunk, float* s, int64_t lds) {
  const tessera_attention_desc& d = g.d;
  const int64_t rows = g.group * bq;
  for (int64_t c0 = 0, c = 0; c0 < rows; c0 += chunk, ++c) {
    const int64_t c1 = std::min(rows, c0 + chunk), w0 = window[2 * c], w1 = window[2 * c + 1];
    for (int64_t ra = c0; ra < c1;) {
      const int64_t head = ra / bq, rb = std::min(c1, (head + 1) * bq);
      const int64_t h = hk * g.group + head, ia = i0 + ra - head * bq;
      if (!g.elementwise && segment_sees_all(d, valid, ia, ia + (rb - 1 - ra), j0, w0, w1)) {
        ra = rb;
        continue;
      }
      for (int64_t r = ra, i = ia; r < rb; ++r, ++i) {
        float* row = s + r * lds;
        if (d.softcap > 0.0f) {
          sk.affine(n, row, 1.0f / d.softcap, 0.0f, row);
          sk.tanh(n, row, row);
          sk.affine(n, row, d.softcap, 0.0f, row);
        }
        const int64_t p = position(d, valid, i);
        int64_t lo, hi;
        visible_range(d, valid, p, lo, hi);
        // Structural visibility is a range per row: hide what lies outside it wholesale.
        const int64_t vis_lo = std::clamp(lo - j0, int64_t(0), n),
                      vis_hi = std::clamp(hi - j0, vis_lo, n);
        std::fill(row + w0, row + std::clamp(vis_lo, w0, w1), -kInf);
        std::fill(row + std::clamp(vis_hi, w0, w1), row + w1, -kInf);
        if (!d.alibi_slopes && !d.bias && !d.mask) continue;
        const float slope = d.alibi_slopes ? d.alibi_slopes[h] : 0.0f;
        const float* bias =
            d.bias ? d.bias + b * d.bias_stride[0] + h * d.bias_stride[1] + i * d.bias_stride[2]
                   : nullptr;
        const uint8_t* mask =
            d.mask ? d.mask + b * d.mask_stride[0] + h * d.mask_stride[1] + i * d.mask_stride[2]
                   : nullptr;
        for (int64_t cc = vis_lo; cc < vis_hi; ++cc) {
          const int64_t j = j0 + cc;
          float x = row[cc];
          if (d.alibi_slopes) x += slope * float(j - p);
          if (bias) x += bias[j * d.bias_stride[3]];
          if (mask && mask[j * d.mask_stride[3]] == 0) x = -kInf;
          row[cc] = x;
        }
      }
      ra = rb;
    }
  }
}

// The keys [k0, k1) of the tile [j0, j0 + n) that any of stacked rows [r0, r1) may see by the
// structural rules (relative to j0). Rows of one head have increasing positions, so a head's
// first and last rows in the panel bound its union; a panel spans at most two heads' blocks.
void panel_extent(const tessera_attention_desc& d, int64_t valid, int64_t i0, int64_t bq,
                  int64_t r0, int64_t r1, int64_t j0, int64_t n, int64_t& k0, int64_t& k1) {
  // Both bounds of visible_range grow with the position, so the hull of the panel's ranges is
  // [lo(min position), hi(max position)) (rows with empty ranges included: still a hull).
  int64_t imin = INT64_MAX, imax = INT64_MIN;
  for (int64_t r : {r0, r1 - 1, (r0 / bq + 1) * bq - 1, (r0 / bq + 1) * bq}) {
    if (r < r0 || r >= r1) continue;
    imin = std::min(imin, r % bq);
    imax = std::max(imax, r % bq);
  }
  int64_t lo, unused, hi;
  visible_range(d, valid, position(d, valid, i0 + imin), lo, unused);
  visible_range(d, valid, position(d, valid, i0 + imax), unused, hi);
  k0 = std::clamp(lo - j0, int64_t(0), n);
  k1 = std::clamp(hi - j0, k0, n);
}

// Rows per softmax chunk: whole Q panels and whole row groups of the softmax kernels.
int64_t softmax_chunk(const arch::KernelTable& kt) {
  return std::max<int64_t>(1, std::lcm(int64_t(kt.gemm.mr), int64_t(arch::kSoftmaxRowGroup)));
}

// The keys [w0, w1) of the tile that each chunk of rows (softmax_chunk) reads: all n of a tile
// every row sees whole; on a tile some rows see only in part (a diagonal tile), the keys its
// panels' extents cover, widened to whole vectors from the row start (empty when they cover
// none). Only there does mask_tile hide keys, the softmax step run and P V read (its panel's
// extent lies inside): a causal diagonal tile hides about half its keys, which the masking and
// the exps otherwise paid for (L = 256, d = 64, 1 thread: the -inf fill alone was 6% of the call).
// The results are those of the whole width, bit for bit, whatever the chunking (which follows the
// blocking, and so the thread count): a key left out is hidden from its row, so its exp is +0,
// which leaves its lane's sum as it is (as -inf leaves its lane's max), and each key kept meets
// the same lane and the same running sum, the window starting on a vector boundary of the row.
void tile_windows(const arch::KernelTable& kt, int64_t rows, int64_t n, bool whole,
                  const int64_t* extent, int64_t* window) {
  const int64_t MR = kt.gemm.mr, W = kt.simd_floats, chunk = softmax_chunk(kt);
  for (int64_t c0 = 0, c = 0; c0 < rows; c0 += chunk, ++c) {
    int64_t k0 = n, k1 = 0;
    for (int64_t t = c0 / MR; t * MR < std::min(rows, c0 + chunk); ++t)
      if (extent[2 * t + 1] > extent[2 * t]) {
        k0 = std::min(k0, extent[2 * t]);
        k1 = std::max(k1, extent[2 * t + 1]);
      }
    window[2 * c] = whole ? 0 : k1 > k0 ? k0 / W * W : 0;
    window[2 * c + 1] = whole ? n : k1 > k0 ? std::min(n, ceil_div(k1, W) * W) : 0;
  }
}

// The softmax step of a diagonal tile, chunk by chunk over its windows. Rows of a chunk whose
// window is empty get what the whole width gives an all-hidden row: their running max with a
// sum of 0 (NaN while that max is -inf: nothing seen yet, finished by key_loop).
void diagonal_tile_rows(const arch::KernelTable& kt, int64_t rows, const int64_t* window,
                        TileState& st) {
  const int64_t chunk = softmax_chunk(kt);
  for (int64_t c0 = 0, c = 0; c0 < rows; c0 += chunk, ++c) {
    const int64_t c1 = std::min(rows, c0 + chunk), w0 = window[2 * c], w1 = window[2 * c + 1];
    if (w1 > w0) {
      kt.softmax.attention_rows(c1 - c0, w1 - w0, st.s + c0 * kBK + w0, kBK, st.m + c0,
                                st.tile_m + c0, st.tile_l + c0);
      continue;
    }
    for (int64_t r = c0; r < c1; ++r) {
      st.tile_m[r] = st.m[r];
      st.tile_l[r] = st.m[r] > -kInf ? 0.0f : std::numeric_limits<float>::quiet_NaN();
    }
  }
}

}  // namespace tessera::detail::fa
