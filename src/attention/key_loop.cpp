// Fused attention's key loop: one task's stacked query rows against the K/V tiles of one KV
// head, tile by tile, in the steps flash_attention.cpp lists:
//   scores        S = scale Q K^T: dot kernels for few rows (decode), packed K^T panels else;
//                 each K storage type has its loader (KeyDots), not a branch inside the loop
//   masks         the structural extents of a diagonal tile, then bias, mask, ALiBi, softcap
//                 (attention_masks.cpp)
//   softmax       the online update of m, l and the rescale of O
//   P V           O += P V: V in place for few rows (per V storage type), packed panels else
//                 (pv_steps.cpp)
//   prefetch      the next operand's rows spread over the current product's kernel calls
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>

#include "attention/attention_tile.hpp"
#include "attention/key_steps.hpp"
#include "attention/kv_rows.hpp"

namespace tessera::detail::fa {
namespace {

// Each Q panel's key extent [k0, k1) within the tile at j0 (all of it for a whole tile),
// computed once for both products.
void tile_extents(const Task& t, const TaskKeys& keys, int64_t j0, int64_t n, bool whole) {
  const int64_t MR = t.kt.gemm.mr;
  int64_t* extent = t.st.extent;
  for (int64_t ir = 0, p = 0; ir < t.rows; ir += MR, ++p) {
    extent[2 * p] = 0, extent[2 * p + 1] = n;
    if (!whole)
      panel_extent(t.g.d, keys.valid, t.i0, t.bq, ir, std::min(t.rows, ir + MR), j0, n,
                   extent[2 * p], extent[2 * p + 1]);
  }
}

// ---- scores: S = scale Q K^T --------------------------------------------------------------------

// How one K storage type meets the dot kernels (few rows): up to `rows` query rows a call, cols[r]
// keys a call for r rows, and `block` computing S[:, jb : jb + nb] for the keys from j0 + jb.
struct KeyDots {
  int64_t rows;
  const int* cols;
  void (*block)(const Task& t, const Ahead& a, int64_t j0, int64_t jb, int64_t nb);
  // A call may take a whole tile when one call holds every row: the block-type kernels, whose
  // calls each set up the query's block sums and prefetch their own rows ahead (the float
  // kernels measured slower so, and keep the blocks).
  bool whole_tile = false;
};

// Float32 K: read in place.
void key_dots_f32(const Task& t, const Ahead& a, int64_t j0, int64_t jb, int64_t nb) {
  const arch::GemmKernels& gk = t.kt.gemm;
  const int64_t D = t.g.d.head_dim, R = gk.dot_rows;
  int64_t ldk;
  const float* kblock = t.krows.tile(t.kt, j0 + jb, nb, ldk);
  for (int64_t i = 0; i < t.rows; i += R) {
    const int64_t r = std::min(R, t.rows - i), J = gk.dot_cols[r];
    // One row reads each K row once, from memory in decode: the in-order kernel.
    const arch::GemmDotFn dot = r == 1 ? gk.dot_stream : gk.dot[r];
    float* srow = t.st.s + i * kBK + jb;
    int64_t j = 0;
    for (; j + J <= nb; j += J) {
      if (t.g.prefetch_kv && i == 0) a.fetch(j0 + jb + j, J);
      dot(D, t.st.qg + i * D, D, kblock + j * ldk, ldk, srow + j, kBK, t.g.scale, 0.0f);
    }
    for (; j < nb; ++j)
      gk.dot1[r](D, t.st.qg + i * D, D, kblock + j * ldk, ldk, srow + j, kBK, t.g.scale, 0.0f);
  }
}

// f16 / bf16 K: the dot16 kernels widen it in registers as they read it, in place.
void key_dots_16(const Task& t, const Ahead& a, int64_t j0, int64_t jb, int64_t nb) {
  const arch::GemmKernels& gk = t.kt.gemm;
  const int64_t D = t.g.d.head_dim, R = gk.dot16_rows, ldk = t.krows.ld;
  const int t16 = t.g.d.k_type == TESSERA_BF16 ? 1 : 0;
  const uint16_t* kblock = t.krows.row16(j0 + jb);
  // K from memory (the plan's prefetch_kv): the rows read kDecodeKeys rows on, wherever they lie
  // (a.spread), each by the kernel as it reads its own row; where they do not lie at a stride,
  // the rows `a` names, a call's share at a time. The hardware prefetcher alone left decode
  // waiting on memory, and a call's share issued before the call delayed its loads.
  const bool ahead = t.g.prefetch_kv;
  const arch::RowsAhead next = ahead ? a.spread(j0 + jb, nb) : arch::RowsAhead{};
  for (int64_t i = 0; i < t.rows; i += R) {
    const int64_t r = std::min(R, t.rows - i), J = gk.dot16_cols[r];
    float* srow = t.st.s + i * kBK + jb;
    int64_t j = 0;
    for (; j + J <= nb; j += J) {
      if (ahead && i == 0 && !next.at) a.fetch(j0 + jb + j, J);
      gk.dot16[t16][r](
          D, t.st.qg + i * D, D, kblock + j * ldk, ldk, srow + j, kBK, t.g.scale, 0.0f,
          i == 0 && next.at ? arch::RowsAhead{next.at + j * next.ld, next.ld} : arch::RowsAhead{});
    }
    for (; j < nb; ++j)
      gk.dot16_1[t16][r](D, t.st.qg + i * D, D, kblock + j * ldk, ldk, srow + j, kBK, t.g.scale,
                         0.0f, {});
  }
}

// q8_0 / q4_0 K: the integer dot kernels against the queries rounded to q8_0 (stage_queries),
// K read in place; two keys a step.
void key_dots_quant(const Task& t, const Ahead& a, int64_t j0, int64_t jb, int64_t nb) {
  const arch::QuantKernels& qk = t.kt.quant;
  const int64_t D = t.g.d.head_dim, blocks = D / arch::kQBlock, R = qk.dot_rows;
  const int ti = t.krows.block_index();
  const uint8_t* kblock = t.krows.row8(j0 + jb);
  // The kernels prefetch up to kDecodeKeys rows ahead, past the call only on the rows `a` says
  // follow it: calls of fewer rows (pages of 16) leave the rows `a` names (a head alone:
  // kDecodeKeys past its own, each row once, successive calls tiling the window) to this loop,
  // which hands them to the first row group's call where its kernels spread them.
  const bool short_call = t.g.prefetch_kv && nb < kDecodeKeys;
  for (int64_t i = 0; i < t.rows; i += R) {
    const int64_t r = std::min(R, t.rows - i);
    const arch::NextRows next =
        i == 0 && short_call ? a.after(j0 + jb, nb, qk.dot_spreads) : a.after(j0 + jb, nb);
    const arch::QuantRows q{
        t.st.qq + i * D,       t.st.qd + i * blocks, D, blocks, t.g.prefetch_kv, next,
        t.st.qsum + i * blocks};
    qk.dot[ti][r](q, kblock, t.krows.ld_bytes(), nb, t.st.s + i * kBK + jb, kBK, t.g.scale);
  }
}
constexpr int kQuantDotCols[arch::kMaxDotRows + 1] = {1, 2, 2, 2, 2};

KeyDots key_dots(const arch::KernelTable& kt, tessera_dtype k_type) {
  const arch::GemmKernels& gk = kt.gemm;
  if (k_type == TESSERA_F32) return {gk.dot_rows, gk.dot_cols, key_dots_f32};
  if (KvRows::block(k_type)) return {kt.quant.dot_rows, kQuantDotCols, key_dots_quant, true};
  return {gk.dot16_rows, gk.dot16_cols, key_dots_16};
}

// What head h of a task's `heads` (rows: each head's K or V rows) prefetches while it reads its
// run of page g (m rows from lo) of a group of `pages` (KvRows::page_runs): the next head's run
// of the same page (the last head's: the first head's on that page of the next group), memory
// beside its own, or where the kernels spread it, the rows `distance` on in reading order (the
// 16-bit kernels' rows, and a block type's short calls: Ahead::after). Its own run of the next
// (scattered) page, or alone its rows kDecodeKeys on, measured slower.
Ahead next_run(const Task& own, const KvRows* const* rows, int64_t heads, int64_t h, int64_t pages,
               int64_t g, int64_t lo, int64_t m) {
  const bool l1 = own.g.prefetch_l1;
  Ahead a = heads == 1      ? Ahead{rows[h], kDecodeKeys}
            : h + 1 < heads ? Ahead{rows[h + 1], 0, false, l1}
                            : Ahead{rows[0], pages * m, false, l1};
  if (own.g.prefetch_kv)
    a.order = rows, a.heads = heads, a.h = h, a.pages = pages, a.g = g, a.lo = lo, a.m = m;
  a.distance = pages > 1 ? pages * m : kDecodeKeys;
  return a;
}

// Few rows (decode): dot products along d, K read once, in blocks of kDecodeKeys keys (whole
// column groups of every dot kernel: the same calls as one pass over the tile). A block is read
// in place, the row groups after the first finding it in L1. Several heads (tasks over a page's
// heads together, a page holding their rows one head after another): page by page, each head's
// rows of the page in turn, in memory order.
void scores_few_rows(const Task* const* t, const KvRows* const* krows, int64_t heads,
                     const KeyDots& kd, int64_t j0, int64_t n) {
  const int64_t rows = t[0]->rows;
  int64_t unit = 1;
  for (int64_t r = 1; r <= std::min(kd.rows, rows); ++r) unit = std::lcm(unit, int64_t(kd.cols[r]));
  const int64_t block =
      kd.whole_tile && rows <= kd.rows ? n : std::max<int64_t>(1, kDecodeKeys / unit) * unit;
  // K read in place: a block stops at its page's end (paged K).
  const int64_t group = heads > 1 ? t[0]->g.page_group : 1;
  for (int64_t lo = 0, m, runs; lo < n; lo += runs * m) {
    runs = t[0]->krows.page_runs(j0 + lo, n - lo, group, m);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t p = 0; p < runs; ++p) {
        const int64_t from = lo + p * m;
        const Ahead a = next_run(*t[h], krows, heads, h, runs, p, j0 + from, m);
        for (int64_t jb = from, nb; jb < from + m; jb += nb) {
          nb = std::min(block, from + m - jb);
          kd.block(*t[h], a, j0, jb, nb);
        }
      }
  }
}

// Many rows: K^T packed per tile, Q packed once per task; a K panel stays in L1 while every Q
// panel passes it. This tile's V rows are fetched into L2 meanwhile (P V reads them next).
void scores_packed(const Task& t, int64_t j0, int64_t n) {
  const arch::GemmKernels& gk = t.kt.gemm;
  const tessera_attention_desc& d = t.g.d;
  const int64_t MR = gk.mr, NR = gk.nr, W = t.kt.simd_floats, D = d.head_dim;
  const int64_t* extent = t.st.extent;
  TileState& st = t.st;
  int64_t ldk;
  const float* ktile = t.krows.tile(t.kt, j0, n, ldk);
  gk.pack_b(true, D, n, ktile, ldk, st.kp);
  SpreadPrefetch v_ahead(t.vrows, j0, n, ceil_div(n, NR) * ceil_div(t.rows, MR));
  for (int64_t q = 0; q * NR < n; ++q) {
    const int64_t nr = std::min(NR, n - q * NR);
    for (int64_t ir = 0, p = 0; ir < t.rows; ir += MR, ++p) {
      // K panels no row of this Q panel can see are skipped (the mask pass writes -inf).
      if (q * NR >= extent[2 * p + 1] || q * NR + nr <= extent[2 * p]) continue;
      // A K panel whose visible keys end within its first vector (a causal diagonal's last
      // panel, half the time) takes the narrow kernel: the keys past that vector are hidden
      // from every row of the Q panel, and mask_tile writes them -inf.
      const int64_t r = std::min(MR, t.rows - ir);
      float* s_tile = st.s + ir * kBK + q * NR;
      const bool narrow = extent[2 * p + 1] - q * NR <= W && W < NR;
      const int64_t cols = narrow ? std::min(nr, W) : nr;
      if (st.q_direct)
        (narrow ? gk.strided_narrow : gk.strided)[r](D, st.q_direct + ir * st.ldq, st.ldq, 1,
                                                     st.kp + q * NR * D, NR, s_tile, kBK, cols,
                                                     t.g.scale, 0.0f);
      else
        (narrow ? gk.packed_narrow : gk.packed)[r](D, st.qp + ir * D, st.kp + q * NR * D, s_tile,
                                                   kBK, cols, t.g.scale, 0.0f);
      v_ahead.step();
    }
  }
  v_ahead.finish();
}

// ---- the online softmax update ------------------------------------------------------------------

// A row whose running max is +inf: the +inf scores take all the mass, shared equally (the limit
// the reference defines), so P is 1 on them and 0 elsewhere (NaN stays NaN: the row ends NaN), l
// counts them and O sums their V rows. Whatever the row held before its first +inf is dropped
// (a NaN in l is kept). O(w) work, with the same P V product as any tile.
void infinite_scores(int64_t w, float* srow, int64_t r, int64_t Dv, TileState& st) {
  if (st.m[r] != kInf && !std::isnan(st.l[r])) {
    st.l[r] = 0.0f;
    std::memset(st.o + r * Dv, 0, sizeof(float) * size_t(Dv));
  }
  float count = 0.0f;
  for (int64_t j = 0; j < w; ++j) {
    const float s = srow[j];
    srow[j] = s == kInf ? 1.0f : std::isnan(s) ? s : 0.0f;
    count += srow[j];
  }
  st.l[r] += count;
  st.m[r] = kInf;
}

// P = exp(S - m_new) for the rows whose new max is finite, in groups of rows (one row's
// max-exp-sum chain alone leaves the FMA ports idle); the others (nothing visible yet, a +inf or
// NaN score) row by row. Then l and m, and O rescaled where the max moved.
void softmax_update(const Task& t, int64_t n, bool whole, int64_t chunk) {
  const arch::SoftmaxKernels& sk = t.kt.softmax;
  const int64_t Dv = t.g.d.value_dim;
  TileState& st = t.st;
  const int64_t* window = st.window;
  if (whole)
    sk.attention_rows(t.rows, n, st.s, kBK, st.m, st.tile_m, st.tile_l);
  else
    diagonal_tile_rows(t.kt, t.rows, window, st);
  for (int64_t r = 0; r < t.rows; ++r) {
    // Only the row's window holds its scores.
    const int64_t w0 = window[2 * (r / chunk)], w = window[2 * (r / chunk) + 1] - w0;
    float* srow = st.s + r * kBK + w0;
    const float m_old = st.m[r];
    float m_new = st.tile_m[r], sum = st.tile_l[r];
    if (!std::isfinite(m_new)) {
      // A NaN score makes the row NaN. The vector max need not return NaN (x86's max gives its
      // other operand), and a row of only NaN scores was once taken for an empty one: this rare
      // branch looks for NaN itself.
      const float tile_max = sk.max(w, srow);
      bool nan = std::isnan(tile_max);
      for (int64_t j = 0; j < w && !nan; ++j) nan = std::isnan(srow[j]);
      if (nan) {
        st.l[r] = std::numeric_limits<float>::quiet_NaN();
        std::memset(srow, 0, sizeof(float) * size_t(w));
        continue;
      }
      m_new = std::max(m_old, tile_max);
      if (m_new == -kInf) {  // nothing visible yet
        std::memset(srow, 0, sizeof(float) * size_t(w));
        continue;
      }
      if (m_new == kInf) {
        infinite_scores(w, srow, r, Dv, st);
        continue;
      }
      sum = sk.exp_sum(w, srow, 1.0f, m_new, srow);
    }
    // Rescale what was accumulated against the old max (nothing yet while it was -inf: the
    // row's O and l are still the zeros carve_state wrote).
    if (m_new > m_old && m_old != -kInf) {
      const float c = std::exp(m_old - m_new);
      st.l[r] *= c;
      sk.affine(Dv, st.o + r * Dv, c, 0.0f, st.o + r * Dv);
    }
    st.l[r] += sum;
    st.m[r] = m_new;
  }
}

}  // namespace

// The key loop over [kb, ke) for one task of `heads` KV heads from hk (one unless few rows);
// updates st[h] (m, l, o) for rows = group x bq.
void key_loop(const Geometry& g, const arch::KernelTable& kt, int64_t b, int64_t hk, int64_t heads,
              int64_t i0, int64_t bq, int64_t kb, int64_t ke, const void* k, const void* v,
              TileState* st) {
  const tessera_attention_desc& d = g.d;
  const TaskKeys keys = task_keys(g, b, i0, bq, kb, ke);
  if (keys.hi <= keys.lo) return;  // no key visible to any row (k and v may be NULL then)
  const int64_t rows = g.group * bq;
  // Prefetches run to the sequence's end, past this task's keys, as they did before the helper:
  // the next task of a split decode (on this thread, as often as not) reads them next.
  std::optional<KvRows> krows[kMaxTaskHeads], vrows[kMaxTaskHeads];
  std::optional<Task> task[kMaxTaskHeads];
  const Task* tp[kMaxTaskHeads];
  const KvRows *kp[kMaxTaskHeads], *vp[kMaxTaskHeads];
  for (int64_t h = 0; h < heads; ++h) {
    kp[h] =
        &krows[h].emplace(d, k, d.k_type, d.k_stride, b, hk + h, d.head_dim, st[h].kw, keys.valid);
    vp[h] =
        &vrows[h].emplace(d, v, d.v_type, d.v_stride, b, hk + h, d.value_dim, st[h].vw, keys.valid);
    tp[h] = &task[h].emplace(Task{g, kt, b, hk + h, i0, bq, rows, *krows[h], *vrows[h], st[h]});
    std::memset(st[h].o_live, 0, size_t(ceil_div(rows, kt.gemm.mr)));
  }
  const Task& t = *task[0];  // (heads >= 1)
  const bool few = few_rows(kt.gemm, rows);
  const KeyDots kd = key_dots(kt, d.k_type);
  const PvStep pv = pv_step(t, few);
  const int64_t chunk = softmax_chunk(kt);  // rows per softmax chunk (tile_windows)
  for (int64_t j0 = keys.lo; j0 < keys.hi; j0 += kBK) {
    const int64_t n = std::min(kBK, keys.end - j0);
    const int64_t next_n = std::min(kBK, std::min(keys.hi, keys.end) - (j0 + kBK));
    const bool whole = keys.whole(j0, n);
    for (int64_t h = 0; h < heads; ++h) tile_extents(*tp[h], keys, j0, n, whole);
    if (few)
      scores_few_rows(tp, kp, heads, kd, j0, n);
    else
      scores_packed(t, j0, n);
    for (int64_t h = 0; h < heads; ++h) {
      TileState& sh = st[h];
      tile_windows(kt, rows, n, whole, sh.extent, sh.window);
      if (g.elementwise || !whole)
        mask_tile(g, b, hk + h, i0, bq, j0, n, keys.valid, kt.softmax, sh.window, chunk, sh.s, kBK);
      softmax_update(*tp[h], n, whole, chunk);
    }
    if (heads == 1) {
      pv(t, next_run(t, vp, 1, 0, 1, 0, j0, n), j0, n, next_n, 0, n);
      continue;
    }
    // A group of pages at a time, every head's rows of each page in turn (as the scores): a
    // head's keys still go in order. 16-bit V: a head's runs of the group in one step, the
    // group at least a call's pages (KvRows::call_keys), so that the calls are a head alone's.
    const bool in_place = pv == pv_in_place_16;
    for (int64_t lo = 0, m, runs; lo < n; lo += runs * m) {
      const int64_t call = in_place ? t.vrows.call_pages(j0 + lo, n - lo, kDecodeKeys) : 1;
      runs = t.vrows.page_runs(j0 + lo, n - lo, std::max(g.page_group, call), m);
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t p = 0; p < (in_place ? 1 : runs); ++p) {
          const int64_t from = lo + p * m;
          pv(*tp[h], next_run(*tp[h], vp, heads, h, runs, p, j0 + from, m), j0, n, next_n, from,
             in_place ? lo + runs * m : from + m);
        }
    }
  }
}

}  // namespace tessera::detail::fa
