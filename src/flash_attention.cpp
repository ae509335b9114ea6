// Fused attention: softmax(scale Q K^T + masks) V without the q_len x kv_len score matrix.
//
// Work unit (one task): a batch b, a KV head hk, and a block of query positions [i0, i0 + BQ)
// for every query head of hk's group, stacked as rows = group x BQ. The loop over key tiles of
// BK keys then reads each K/V tile once for the whole group (GQA/MQA read K/V once per group,
// not per head) and runs, per tile:
//   S = scale Q K^T           the GEMM kernels (K^T packed per tile: keys are the SIMD lanes;
//                             few rows use the dot kernel, K read in place)
//   masks                     only on tiles that are not fully visible, or with bias, mask,
//                             ALiBi or softcap; invisible tiles are skipped before the GEMM
//   m_new = max(m, rowmax S), lazily: m stays while rowmax S <= m + 4 (softmax.hpp,
//   kRescaleSlack); P = exp(S - m_new); l = l exp(m - m_new) + rowsum P
//   O = O exp(m - m_new) + P V   (the rescale only when m moved)
// and at the end O / l, lse = m + log l (a row with no visible key: zeros and -inf).
//
// Block sizes: BK = 256 keys and about 512 stacked rows: the S/P tile (512 x 256 x 4 B =
// 512 KB), a K and a V tile (256 x d x 4 B: 128 KB each at d = 128) and the O accumulator
// (256 KB) share a 2 MB L2. Rows were chosen by measurement (AVX-512, 1 thread): at L = 4096,
// d = 128, 64 rows 99 GFLOP/s, 128 rows 107, 256 rows 118, 512 and 1024 rows equal to 256;
// at L = 512-2048 512 rows beat 256 by 2-6% (L = 512 was 3 blocks of 182 rows, packing every
// K and V tile 3 times per head), 1024 no further. The per-tile packing of K^T and V is what
// taller blocks amortise.
//
// Decode (q_len <= 8): too few query rows to feed the threads, so the keys are split into fixed
// chunks of kDecodeChunk positions (flash-decoding); each chunk yields (m, l, O) partials merged
// in chunk order. Chunking depends only on kv_len, never on the thread count: results are
// bitwise identical for any number of threads, on both paths.
#include "flash_attention.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "../arch/common/prefetch.hpp"
#include "dispatch.hpp"
#include "error.hpp"
#include "gemm_driver.hpp"
#include "scratch.hpp"
#include "tessera/reference.hpp"
#include "tessera/softmax.hpp"

namespace tessera::detail {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kBK = arch::kAttentionBK;
constexpr int64_t kRowsPerTile = 512;
constexpr int64_t kDecodeChunk = 512;
constexpr int64_t kDecodeMaxQ = 8;

struct Geometry {
  const tessera_attention_desc& d;
  int64_t group;  // query heads per KV head
  float scale;
  bool elementwise;  // bias, mask, ALiBi or softcap: every tile needs the per-element pass
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Few stacked rows (decode): S by dot products with K and Q read in place (Q is not packed),
// P V with V read in place.
bool few_rows(const arch::GemmKernels& gk, int64_t rows) { return rows <= 2 * gk.dot_rows; }

int64_t valid_len(const tessera_attention_desc& d, int64_t b) {
  return d.kv_lens ? d.kv_lens[b] : d.kv_len;
}

// Position of query i (see tessera_align).
int64_t position(const tessera_attention_desc& d, int64_t valid, int64_t i) {
  return d.align == TESSERA_ALIGN_BOTTOM_RIGHT ? i + valid - d.q_len : i;
}

// Keys [lo, hi) that query position p may see by the structural rules (length, causal, window).
void visible_range(const tessera_attention_desc& d, int64_t valid, int64_t p, int64_t& lo,
                   int64_t& hi) {
  lo = 0;
  hi = valid;
  if (d.causal) hi = std::min(hi, p + 1);
  if (d.window_left >= 0) lo = std::max(lo, p - d.window_left);
  if (d.window_right >= 0) hi = std::min(hi, p + d.window_right + 1);
  if (hi < lo) hi = lo;
}

// Per-task state for `rows` stacked query rows.
struct TileState {
  float* qg;              // rows x D, the stacked queries
  float* qp;              // the same, packed once into MR-row panels (the S GEMM's A operand)
  const float* q_direct;  // or null: the queries read in place, rows ldq apart (one K tile)
  int64_t ldq;
  float* kp;       // one K tile packed as K^T panels (D x NR each): keys are the SIMD lanes
  float* vp;       // a partial last V panel, zero-padded to NR columns
  float* s;        // rows x BK, scores then probabilities
  float* o;        // rows x Dv, the unnormalised output
  float* m;        // rows
  float* l;        // rows
  float* special;  // rows: 1 if a +inf score was seen (finished exactly at the end)
  float* tile_m;   // rows: the running max after the current tile
  float* tile_l;   // rows: the current tile's sum of exps
};

// Applies masks and score modifications to the tile S[rows x n] for keys [j0, j0 + n), within
// each row's window (tile_windows: the keys the softmax step and P V read; the rest of the row
// is left as it is).
void mask_tile(const Geometry& g, int64_t b, int64_t hk, int64_t i0, int64_t bq, int64_t j0,
               int64_t n, int64_t valid, const arch::SoftmaxKernels& sk, const int64_t* window,
               int64_t chunk, float* s, int64_t lds) {
  const tessera_attention_desc& d = g.d;
  for (int64_t r = 0; r < g.group * bq; ++r) {
    const int64_t w0 = window[2 * (r / chunk)], w1 = window[2 * (r / chunk) + 1];
    const int64_t h = hk * g.group + r / bq, i = i0 + r % bq;
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
    for (int64_t c = vis_lo; c < vis_hi; ++c) {
      const int64_t j = j0 + c;
      float x = row[c];
      if (d.alibi_slopes) x += slope * float(j - p);
      if (bias) x += bias[j * d.bias_stride[3]];
      if (mask && mask[j * d.mask_stride[3]] == 0) x = -kInf;
      row[c] = x;
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

// Asks for the lines of n floats at p to be brought into L2. (Always inlined: see
// arch/common/prefetch.hpp.)
TESSERA_ALWAYS_INLINE void prefetch_row(const float* p, int64_t n) {
  for (int64_t j = 0; j < n; j += 16) __builtin_prefetch(p + j, 0, 2);
  __builtin_prefetch(p + n - 1, 0, 2);
}

// O += P V for few rows (decode): V is read in place, once, row after row, by the wide
// kernels (GemmKernels::wide; panels of more rows by the NR-column kernel, which has chains
// enough): with NR columns a single query row had NV FMA chains, each as
// long as the tile, and the four NR panels of d = 128 read V as four strided streams that
// needed software prefetching; a whole row of V (up to 8 vectors) per call gives 8 chains and
// one sequential stream the hardware prefetcher follows. Measured (AVX-512, 1 thread,
// interleaved, medians): decode 32 heads x d = 128, kv 512 (in L3) 28.0 -> 36.7 GFLOP/s, kv
// 4096 11.9 -> 15.1, kv 32768 11.9 -> 14.2. Columns past the last whole vector (head dims that
// are not a multiple of W) go through a zero-padded packed panel.
void pv_few_rows(const arch::GemmKernels& gk, const tessera_attention_desc& d, int64_t rows,
                 const float* vtile, const int64_t* extent, TileState& st) {
  const int64_t MR = gk.mr, NR = gk.nr, Dv = d.value_dim, ldv = d.v_stride[2];
  for (int64_t ir = 0, t = 0; ir < rows; ir += MR, ++t) {
    const int64_t k0 = extent[2 * t], k1 = extent[2 * t + 1];
    const int64_t r = std::min(MR, rows - ir);
    if (k1 <= k0) continue;
    const float* p = st.s + ir * kBK + k0;
    const float* vsrc = vtile + k0 * ldv;
    float* o_rows = st.o + ir * Dv;
    if (r <= arch::kMaxWideRows) {
      gemm_wide_rows(gk, r, k1 - k0, p, kBK, 1, vsrc, ldv, o_rows, Dv, Dv, 1.0f, 1.0f, st.vp);
      continue;
    }
    int64_t c0 = 0;
    for (; c0 + NR <= Dv; c0 += NR)
      gk.strided[r](k1 - k0, p, kBK, 1, vsrc + c0, ldv, o_rows + c0, Dv, NR, 1.0f, 1.0f);
    if (c0 < Dv) {
      gk.pack_b(false, k1 - k0, Dv - c0, vsrc + c0, ldv, st.vp);
      gk.rows_bk[r](k1 - k0, p, st.vp, o_rows + c0, Dv, Dv - c0, 1.0f, 1.0f);
    }
  }
}

// The rows [0, count) of a K or V tile (len floats, ld apart), prefetched in even shares over
// `steps` calls of step(): one share after each micro-kernel call of a product, so the requests
// trickle out while the FMAs run. (Issued in one burst per row of the softmax loop, they had
// stalled on full fill buffers: 2-3% of fused attention at L = 4096, d = 128.)
struct SpreadPrefetch {
  const float* base = nullptr;
  int64_t ld = 0, len = 0, count = 0, share = 0, next = 0;

  SpreadPrefetch() = default;
  SpreadPrefetch(const float* b, int64_t ld_, int64_t len_, int64_t count_, int64_t steps)
      : base(b), ld(ld_), len(len_), count(count_), share((count_ + steps - 1) / steps) {}
  void step() {
    for (const int64_t e = std::min(count, next + share); next < e; ++next)
      prefetch_row(base + next * ld, len);
  }
  void finish() {
    for (; next < count; ++next) prefetch_row(base + next * ld, len);
  }
};

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

// The key loop over [kb, ke) for one task; updates st (m, l, o) for rows = group x bq.
void key_loop(const Geometry& g, const arch::KernelTable& kt, int64_t b, int64_t hk, int64_t i0,
              int64_t bq, int64_t kb, int64_t ke, const float* k, const float* v, TileState& st) {
  const tessera_attention_desc& d = g.d;
  const int64_t rows = g.group * bq, D = d.head_dim, Dv = d.value_dim;
  const int64_t valid = valid_len(d, b);
  // The keys any of these rows can see (positions grow with i, so the block's first and last
  // rows bound the union).
  int64_t lo_first, hi_first, lo_last, hi_last;
  visible_range(d, valid, position(d, valid, i0), lo_first, hi_first);
  visible_range(d, valid, position(d, valid, i0 + bq - 1), lo_last, hi_last);
  // Tiles sit at kb + t BK whatever the block, and end at min(ke, valid): a row's sums then go
  // through the same tiles, of the same lengths, however the rows are blocked (the block count
  // follows the thread count; the vector sums' order depends on a tile's length). Tiles outside
  // [lo, hi) are invisible to every row of the block and skipped.
  const int64_t lo = kb + (std::max(kb, std::min(lo_first, lo_last)) - kb) / kBK * kBK;
  const int64_t hi = std::min(ke, std::max(hi_first, hi_last));
  const int64_t end = std::min(ke, valid);
  const float* kbase = k + b * d.k_stride[0] + hk * d.k_stride[1];
  const float* vbase = v + b * d.v_stride[0] + hk * d.v_stride[1];
  const arch::SoftmaxKernels& sk = kt.softmax;

  const arch::GemmKernels& gk = kt.gemm;
  const int64_t MR = gk.mr, NR = gk.nr, W = kt.simd_floats;
  // Per Q panel key extents of the current tile; grows once per thread, then reused.
  thread_local std::vector<int64_t> extent;
  extent.resize(size_t(2 * ((rows + MR - 1) / MR)));
  // Per chunk of rows (softmax_chunk): the keys of the current tile it reads (tile_windows).
  const int64_t chunk = softmax_chunk(kt);
  thread_local std::vector<int64_t> window;
  window.resize(size_t(2 * ((rows + chunk - 1) / chunk)));
  // Per Q panel: whether its O rows hold anything yet. The first P V product of a panel stores
  // (beta = 0) instead of adding to zeros, so O is neither cleared nor read for it (a panel no
  // tile reaches is never read either: its rows finish with l = 0). L = 256, 1 thread: the
  // memset and the first product's loads of O were ~2% of the call.
  thread_local std::vector<uint8_t> o_live;
  o_live.assign(size_t((rows + MR - 1) / MR), 0);
  for (int64_t j0 = lo; j0 < hi; j0 += kBK) {
    const int64_t n = std::min(kBK, end - j0);
    // A tile every row sees whole needs no per-element pass and no extents. Otherwise (a
    // diagonal tile) each Q panel's key extent [k0, k1) is computed once, for both products.
    const bool whole = j0 >= std::max(lo_first, lo_last) && j0 + n <= std::min(hi_first, hi_last);
    for (int64_t ir = 0, t = 0; ir < rows; ir += MR, ++t) {
      extent[2 * t] = 0, extent[2 * t + 1] = n;
      if (!whole)
        panel_extent(d, valid, i0, bq, ir, std::min(rows, ir + MR), j0, n, extent[2 * t],
                     extent[2 * t + 1]);
    }
    // S = scale Q K^T: K^T packed per tile, Q packed once per task; a K panel stays in L1
    // while every Q panel passes it.
    const float* ktile = kbase + j0 * d.k_stride[2];
    if (few_rows(gk, rows)) {
      // Few rows (decode): dot products along d, K read in place, once.
      const int64_t R = gk.dot_rows, ldk = d.k_stride[2];
      for (int64_t i = 0; i < rows; i += R) {
        const int64_t r = std::min(R, rows - i), J = gk.dot_cols[r];
        // One row reads each K row once, from memory in decode: the in-order kernel.
        const arch::GemmDotFn dot = r == 1 ? gk.dot_stream : gk.dot[r];
        int64_t j = 0;
        for (; j + J <= n; j += J)
          dot(D, st.qg + i * D, D, ktile + j * ldk, ldk, st.s + i * kBK + j, kBK, g.scale, 0.0f);
        for (; j < n; ++j)
          gk.dot1[r](D, st.qg + i * D, D, ktile + j * ldk, ldk, st.s + i * kBK + j, kBK, g.scale,
                     0.0f);
      }
    } else {
      gk.pack_b(true, D, n, ktile, d.k_stride[2], st.kp);
      // This tile's V rows, fetched into L2 while S is computed (P V reads them next).
      SpreadPrefetch v_ahead(vbase + j0 * d.v_stride[2], d.v_stride[2], Dv, n,
                             ceil_div(n, NR) * ceil_div(rows, MR));
      for (int64_t q = 0; q * NR < n; ++q) {
        const int64_t nr = std::min(NR, n - q * NR);
        for (int64_t ir = 0, t = 0; ir < rows; ir += MR, ++t) {
          // K panels no row of this Q panel can see are skipped (the mask pass writes -inf).
          if (q * NR >= extent[2 * t + 1] || q * NR + nr <= extent[2 * t]) continue;
          // A K panel whose visible keys end within its first vector (a causal diagonal's last
          // panel, half the time) takes the narrow kernel: the keys past that vector are hidden
          // from every row of the Q panel, and mask_tile writes them -inf.
          const int64_t r = std::min(MR, rows - ir);
          float* s_tile = st.s + ir * kBK + q * NR;
          const bool narrow = extent[2 * t + 1] - q * NR <= W && W < NR;
          const int64_t cols = narrow ? std::min(nr, W) : nr;
          if (st.q_direct)
            (narrow ? gk.strided_narrow : gk.strided)[r](D, st.q_direct + ir * st.ldq, st.ldq, 1,
                                                         st.kp + q * NR * D, NR, s_tile, kBK, cols,
                                                         g.scale, 0.0f);
          else
            (narrow ? gk.packed_narrow : gk.packed)[r](D, st.qp + ir * D, st.kp + q * NR * D,
                                                       s_tile, kBK, cols, g.scale, 0.0f);
          v_ahead.step();
        }
      }
      v_ahead.finish();
    }
    tile_windows(kt, rows, n, whole, extent.data(), window.data());
    if (g.elementwise || !whole)
      mask_tile(g, b, hk, i0, bq, j0, n, valid, sk, window.data(), chunk, st.s, kBK);

    // P = exp(S - m_new) for the rows whose new max is finite, in groups of rows (one row's
    // max-exp-sum chain alone leaves the FMA ports idle); the others (nothing visible yet, a
    // +inf or NaN score) row by row below.
    if (whole)
      sk.attention_rows(rows, n, st.s, kBK, st.m, st.tile_m, st.tile_l);
    else
      diagonal_tile_rows(kt, rows, window.data(), st);
    for (int64_t r = 0; r < rows; ++r) {
      // Only the row's window holds its scores.
      const int64_t w0 = window[2 * (r / chunk)], w = window[2 * (r / chunk) + 1] - w0;
      float* srow = st.s + r * kBK + w0;
      const float m_old = st.m[r];
      float m_new = st.tile_m[r], sum = st.tile_l[r];
      if (!std::isfinite(m_new)) {
        const float tile_max = sk.max(w, srow);
        m_new = std::isnan(tile_max) ? m_old : std::max(m_old, tile_max);
        if (m_new == kInf) st.special[r] = 1.0f;
        if (m_new == -kInf || m_new == kInf) {  // nothing visible yet, or a special row
          std::memset(srow, 0, sizeof(float) * size_t(w));
          continue;
        }
        sum = sk.exp_sum(w, srow, 1.0f, m_new, srow);
      }
      // Rescale what was accumulated against the old max (nothing yet while it was -inf: the
      // row's O and l are still the zeros make_state wrote).
      if (m_new > m_old && m_old != -kInf) {
        const float c = std::exp(m_old - m_new);
        st.l[r] *= c;
        sk.affine(Dv, st.o + r * Dv, c, 0.0f, st.o + r * Dv);
      }
      st.l[r] += sum;
      st.m[r] = m_new;
    }
    if (few_rows(gk, rows)) {
      pv_few_rows(gk, d, rows, vbase + j0 * d.v_stride[2], extent.data(), st);
      continue;
    }
    // O += P V: P read in place (rows kBK apart, a constant of the kernel), V packed per tile
    // into NR-column panels (a copy of rows; contiguous loads that stay in L1 while every P
    // panel passes). Meanwhile the next tile's K rows are fetched into L2 (its K^T packing
    // otherwise waited on them: ~6% of the time at L = 4096, d = 128).
    const int64_t next_n = std::min(kBK, std::min(hi, end) - (j0 + kBK));
    SpreadPrefetch k_ahead;
    if (next_n > 0)
      k_ahead = SpreadPrefetch(kbase + (j0 + kBK) * d.k_stride[2], d.k_stride[2], D, next_n,
                               ceil_div(Dv, NR) * ceil_div(rows, MR));
    for (int64_t c0 = 0; c0 < Dv; c0 += NR) {
      const int64_t nr = std::min(NR, Dv - c0);
      gk.pack_b(false, n, nr, vbase + j0 * d.v_stride[2] + c0, d.v_stride[2], st.vp);
      for (int64_t ir = 0, t = 0; ir < rows; ir += MR, ++t) {
        // Only the keys some row of the panel sees: P is 0 elsewhere.
        const int64_t k0 = extent[2 * t], k1 = extent[2 * t + 1];
        if (k1 <= k0) continue;
        gk.rows_bk[std::min(MR, rows - ir)](k1 - k0, st.s + ir * kBK + k0, st.vp + k0 * NR,
                                            st.o + ir * Dv + c0, Dv, nr, 1.0f,
                                            o_live[size_t(t)] ? 1.0f : 0.0f);
        k_ahead.step();
      }
    }
    k_ahead.finish();
    for (size_t t = 0; t < o_live.size(); ++t) o_live[t] |= extent[2 * t + 1] > extent[2 * t];
  }
}

// Carves a task's state out of this thread's scratch; nullptr state on allocation failure.
bool make_state(const tessera_attention_desc& d, const arch::GemmKernels& gk, int64_t rows,
                bool merged, TileState& st) {
  const int64_t D = d.head_dim, Dv = d.value_dim, MR = gk.mr, NR = gk.nr;
  const int64_t panels_rows = (rows + MR - 1) / MR * MR;
  const int64_t bk_padded = (kBK + NR - 1) / NR * NR;
  // Each buffer rounded to 16 floats so every one starts 64-byte aligned.
  auto r16 = [](int64_t f) { return (f + 15) / 16 * 16; };
  const int64_t sizes[] = {r16(rows * D),      r16(panels_rows * D),
                           r16(D * bk_padded), r16(kBK * NR),
                           r16(rows * kBK),    r16(rows * Dv),
                           r16(rows),          r16(rows),
                           r16(rows),          r16(rows),
                           r16(rows)};
  int64_t total = 0;
  for (int64_t z : sizes) total += z;
  float* p = thread_scratch(ScratchSlot::attention).floats(size_t(total));
  if (!p) return false;
  float** slots[] = {&st.qg, &st.qp, &st.kp,      &st.vp,     &st.s,     &st.o,
                     &st.m,  &st.l,  &st.special, &st.tile_m, &st.tile_l};
  for (int i = 0; i < 11; ++i) {
    *slots[i] = p;
    p += sizes[i];
  }
  for (int64_t r = 0; r < rows; ++r) st.m[r] = -kInf, st.l[r] = 0.0f, st.special[r] = 0.0f;
  // The packed path writes each Q panel's O with its first product (beta = 0, key_loop) and
  // finish_rows reads only rows that saw a key; the few-row path accumulates into zeros, and
  // the decode merge (`merged`) reads every row's O, seen or not (0 x garbage could be NaN).
  if (merged || few_rows(gk, rows)) std::memset(st.o, 0, sizeof(float) * size_t(rows * Dv));
  return true;
}

void load_queries(const tessera_attention_desc& d, const Geometry& g, const float* q, int64_t b,
                  int64_t hk, int64_t i0, int64_t bq, float* qg) {
  for (int64_t r = 0; r < g.group * bq; ++r) {
    const int64_t h = hk * g.group + r / bq, i = i0 + r % bq;
    std::memcpy(qg + r * d.head_dim, q + b * d.q_stride[0] + h * d.q_stride[1] + i * d.q_stride[2],
                sizeof(float) * size_t(d.head_dim));
  }
}

// The task's queries where key_loop reads them: stacked in qg for the few-row (dot) path, else
// packed into MR-row panels in qp. Each head's rows are packed straight from Q (rows q_stride[2]
// apart) when its block starts on a panel boundary; otherwise (a group whose blocks straddle
// panels) through the stacked copy.
void stage_queries(const tessera_attention_desc& d, const Geometry& g, const arch::GemmKernels& gk,
                   const float* q, int64_t b, int64_t hk, int64_t i0, int64_t bq, TileState& st) {
  const int64_t rows = g.group * bq, D = d.head_dim;
  st.q_direct = nullptr;
  if (few_rows(gk, rows)) {
    load_queries(d, g, q, b, hk, i0, bq, st.qg);
  } else if (g.group == 1 && d.kv_len <= kBK) {
    // One K tile: each Q panel meets the packed K^T once per K panel, and packing Q cost more
    // than reading it in place (L = 256, d = 128, 1 thread: 3% of the call).
    st.q_direct = q + b * d.q_stride[0] + hk * d.q_stride[1] + i0 * d.q_stride[2];
    st.ldq = d.q_stride[2];
  } else if (g.group == 1 || bq % gk.mr == 0) {
    for (int64_t h = 0; h < g.group; ++h)
      gk.pack_a(false, bq, D,
                q + b * d.q_stride[0] + (hk * g.group + h) * d.q_stride[1] + i0 * d.q_stride[2],
                d.q_stride[2], st.qp + h * bq * D);
  } else {
    load_queries(d, g, q, b, hk, i0, bq, st.qg);
    gk.pack_a(false, rows, D, st.qg, D, st.qp);
  }
}

// O / l and lse for every row of a finished task.
void finish_rows(const Geometry& g, const arch::SoftmaxKernels& sk, int64_t b, int64_t hk,
                 int64_t i0, int64_t bq, const TileState& st, const float* q, const float* k,
                 const float* v, float* o) {
  const tessera_attention_desc& d = g.d;
  const int64_t Dv = d.value_dim;
  for (int64_t r = 0; r < g.group * bq; ++r) {
    const int64_t h = hk * g.group + r / bq, i = i0 + r % bq;
    float* orow = o + b * d.o_stride[0] + h * d.o_stride[1] + i * d.o_stride[2];
    float* lse = d.lse ? d.lse + (b * d.q_heads + h) * d.q_len + i : nullptr;
    if (st.special[r] != 0.0f) {
      attention_row_exact(d, b, h, i, q, k, v, orow, lse);
      continue;
    }
    const float l = st.l[r];
    if (l > 0.0f || std::isnan(l)) {
      sk.affine(Dv, st.o + r * Dv, 1.0f / l, 0.0f, orow);
      if (lse) *lse = st.m[r] + std::log(l);
    } else {
      for (int64_t c = 0; c < Dv; ++c) orow[c] = 0.0f;
      if (lse) *lse = -kInf;
    }
  }
}

Status prefill(const Geometry& g, const arch::KernelTable& kt, const float* q, const float* k,
               const float* v, float* o) {
  const tessera_attention_desc& d = g.d;
  // About kRowsPerTile stacked rows, a whole number of MR panels where the group allows (512 rows
  // with MR = 14 would leave an 8-row panel running at 8/14 of the kernel's rate).
  // The blocks are then evened out (256 query rows were one block of 252 and one of 4: a task
  // that packed every K tile for 4 rows), still a whole number of MR panels.
  const int64_t MR = kt.gemm.mr;
  const int64_t target = std::max<int64_t>(MR, kRowsPerTile / MR * MR);
  const int64_t bq_max = std::max<int64_t>(1, target / g.group);
  const int64_t unit = MR / std::gcd(MR, g.group);  // bq multiple of this: rows multiple of MR
  // (Up to a quarter over the target stays one block: 256 query rows as 2 blocks packed every
  // K and V tile twice.)
  int64_t blocks = d.q_len <= bq_max + bq_max / 4 ? 1 : ceil_div(d.q_len, bq_max);
  // At least a task per thread when the batch and heads alone do not give that many.
  const int64_t threads = tbb::this_task_arena::max_concurrency();
  blocks =
      std::max(blocks, std::min(ceil_div(threads, d.batch * d.kv_heads), ceil_div(d.q_len, unit)));
  int64_t bq = ceil_div(d.q_len, blocks);
  if (blocks > 1) bq = std::min(bq_max, ceil_div(bq, unit) * unit);
  const int64_t q_blocks = ceil_div(d.q_len, bq);
  const int64_t tasks = d.batch * d.kv_heads * q_blocks;
  std::atomic<bool> oom{false};
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, tasks, 1),
        [&](const tbb::blocked_range<int64_t>& r) {
          for (int64_t t = r.begin(); t < r.end(); ++t) {
            // Latest query blocks first: under causal masks they are the longest tasks.
            const int64_t qb = q_blocks - 1 - t % q_blocks;
            const int64_t hk = (t / q_blocks) % d.kv_heads, b = t / (q_blocks * d.kv_heads);
            const int64_t i0 = qb * bq, n = std::min(bq, d.q_len - i0);
            TileState st;
            if (!make_state(d, kt.gemm, g.group * n, false, st)) {
              oom = true;
              return;
            }
            stage_queries(d, g, kt.gemm, q, b, hk, i0, n, st);
            key_loop(g, kt, b, hk, i0, n, 0, d.kv_len, k, v, st);
            finish_rows(g, kt.softmax, b, hk, i0, n, st, q, k, v, o);
          }
        },
        tbb::simple_partitioner());
  });
  return oom ? fail(Status::out_of_memory, "cannot allocate the attention tile state") : Status::ok;
}

Status decode(const Geometry& g, const arch::KernelTable& kt, const float* q, const float* k,
              const float* v, float* o) {
  const tessera_attention_desc& d = g.d;
  const int64_t rows = g.group * d.q_len, Dv = d.value_dim;
  const int64_t chunks = std::max<int64_t>(1, (d.kv_len + kDecodeChunk - 1) / kDecodeChunk);
  const int64_t units = d.batch * d.kv_heads;
  // Partials per (unit, chunk): rows x (m, l, special, O[Dv]), in the calling thread's scratch
  // (reused across calls; the tasks below use their own threads' attention slots).
  const int64_t stride = rows * (3 + Dv);
  float* partial =
      thread_scratch(ScratchSlot::decode_partials).floats(size_t(units * chunks * stride));
  if (!partial) return fail(Status::out_of_memory, "cannot allocate the decode partials");
  std::atomic<bool> oom{false};
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, units * chunks, 1),
        [&](const tbb::blocked_range<int64_t>& r) {
          for (int64_t t = r.begin(); t < r.end(); ++t) {
            const int64_t unit = t / chunks, c = t % chunks;
            const int64_t b = unit / d.kv_heads, hk = unit % d.kv_heads;
            TileState st;
            if (!make_state(d, kt.gemm, rows, true, st)) {
              oom = true;
              return;
            }
            stage_queries(d, g, kt.gemm, q, b, hk, 0, d.q_len, st);
            key_loop(g, kt, b, hk, 0, d.q_len, c * kDecodeChunk,
                     std::min(d.kv_len, (c + 1) * kDecodeChunk), k, v, st);
            float* out = partial + t * stride;
            for (int64_t i = 0; i < rows; ++i) {
              out[i * (3 + Dv)] = st.m[i];
              out[i * (3 + Dv) + 1] = st.l[i];
              out[i * (3 + Dv) + 2] = st.special[i];
              std::memcpy(out + i * (3 + Dv) + 3, st.o + i * Dv, sizeof(float) * size_t(Dv));
            }
          }
        },
        tbb::simple_partitioner());
  });
  if (oom) return fail(Status::out_of_memory, "cannot allocate the attention tile state");
  // Merge the chunks of each unit in chunk order. Isolated like the first pass: the calling
  // thread holds the partials in its scratch and must not pick up an unrelated call meanwhile.
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(int64_t(0), units, [&](int64_t unit) {
      const int64_t b = unit / d.kv_heads, hk = unit % d.kv_heads;
      // O accumulators, then m, l and the special flags of every row.
      float* acc = thread_scratch(ScratchSlot::decode_merge).floats(size_t(rows * (Dv + 3)));
      if (!acc) {
        oom = true;
        return;
      }
      TileState st;
      st.o = acc, st.m = acc + rows * Dv, st.l = st.m + rows, st.special = st.l + rows;
      for (int64_t c = 0; c < chunks; ++c) {
        const float* part = partial + (unit * chunks + c) * stride;
        for (int64_t i = 0; i < rows; ++i) {
          const float* pi = part + i * (3 + Dv);
          const OnlineSoftmaxState s{pi[0], pi[1]};
          if (c == 0) {
            st.m[i] = s.max, st.l[i] = s.sum, st.special[i] = pi[2];
            std::memcpy(st.o + i * Dv, pi + 3, sizeof(float) * size_t(Dv));
            continue;
          }
          if (pi[2] != 0.0f) st.special[i] = 1.0f;
          OnlineSoftmaxState merged{st.m[i], st.l[i]};
          merge_partial_output(merged, st.o + i * Dv, s, pi + 3, Dv);
          st.m[i] = merged.max, st.l[i] = merged.sum;
        }
      }
      finish_rows(g, kt.softmax, b, hk, 0, d.q_len, st, q, k, v, o);
    });
  });
  if (oom) return fail(Status::out_of_memory, "cannot allocate the decode merge state");
  return Status::ok;
}

}  // namespace

void attention_row_exact(const tessera_attention_desc& d, int64_t b, int64_t h, int64_t i,
                         const float* q, const float* k, const float* v, float* o_row, float* lse) {
  // The reference on the (b, h) slice: every tensor pointer moved to that slice, so the slice is
  // batch 0, head 0 of a one-head problem (q_len is kept: bottom-right positions depend on it).
  const int64_t hk = h / (d.q_heads / d.kv_heads);
  tessera_attention_desc r = d;
  r.batch = r.q_heads = r.kv_heads = 1;
  r.kv_lens = d.kv_lens ? d.kv_lens + b : nullptr;
  r.alibi_slopes = d.alibi_slopes ? d.alibi_slopes + h : nullptr;
  r.bias = d.bias ? d.bias + b * d.bias_stride[0] + h * d.bias_stride[1] : nullptr;
  r.mask = d.mask ? d.mask + b * d.mask_stride[0] + h * d.mask_stride[1] : nullptr;
  std::vector<float> out(size_t(d.q_len * d.value_dim)), l(size_t(d.q_len));
  r.o_stride[0] = r.o_stride[1] = d.q_len * d.value_dim, r.o_stride[2] = d.value_dim;
  r.lse = l.data();
  reference::attention(r, q + b * d.q_stride[0] + h * d.q_stride[1],
                       k + b * d.k_stride[0] + hk * d.k_stride[1],
                       v + b * d.v_stride[0] + hk * d.v_stride[1], out.data());
  std::memcpy(o_row, out.data() + i * d.value_dim, sizeof(float) * size_t(d.value_dim));
  if (lse) *lse = l[size_t(i)];
}

Status flash_attention(const tessera_attention_desc& d, const float* q, const float* k,
                       const float* v, float* o) {
  const arch::KernelTable& kt = active_table();
  Geometry g{
      d, d.q_heads / d.kv_heads, d.scale != 0.0f ? d.scale : 1.0f / std::sqrt(float(d.head_dim)),
      d.bias != nullptr || d.mask != nullptr || d.alibi_slopes != nullptr || d.softcap > 0.0f};
  if (d.q_len <= kDecodeMaxQ && d.kv_len > kDecodeChunk) return decode(g, kt, q, k, v, o);
  return prefill(g, kt, q, k, v, o);
}

}  // namespace tessera::detail
