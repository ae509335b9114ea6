// O += P V, the key loop's last step (key_loop.cpp), for each V storage type: few rows (decode)
// read V in place, its 16-bit and block types widened in registers; many rows pack V per tile.
#include <algorithm>
#include <cstdint>

#include "attention/key_steps.hpp"

namespace tessera::detail::fa {

// Few rows of one Q panel with 16-bit V: read in place by the kernels that widen it in
// registers, wide16_cols columns a call, over blocks of kDecodeKeys keys from the tile's first
// (8 KB of V at d = 128, in L1 across the block's calls; whole 256-key column strips made every
// call after the first read V from L2 or memory again). A block of short pages takes as many as
// make kDecodeKeys keys in one call (KvRows::call_keys), each call loading and storing its strip
// of O once (a call a page loaded and stored it twice as often at 16 rows).
static_assert(kDecodeKeys / 16 <= arch::kMaxB16Runs, "a block's pages (of 16 rows or more)");
void pv_in_place_16(const Task& t, const Ahead& a, int64_t j0, int64_t, int64_t, int64_t lo,
                    int64_t hi) {
  const arch::GemmKernels& gk = t.kt.gemm;
  const int64_t Dv = t.g.d.value_dim, cols = gk.wide16_cols;
  const int64_t* extent = t.st.extent;  // one Q panel: extent[0..1]
  const int t16 = t.g.d.v_type == TESSERA_BF16 ? 1 : 0;
  const int64_t e1 = std::min(hi, extent[1]);
  for (int64_t kb = lo, kn; kb < e1; kb += kn) {
    kn = t.vrows.call_keys(j0 + kb, e1 - kb, kDecodeKeys);
    const int64_t k0 = std::max(kb, extent[0]), k1 = kb + kn;  // the keys the panel sees
    if (k1 <= k0) continue;
    arch::B16Rows v;
    v.ld = t.vrows.ld;
    for (int64_t j = j0 + k0, m; j < j0 + k1; j += m, ++v.count) {  // page by page
      m = t.vrows.run(j, j0 + k1 - j);
      v.at[v.count] = t.vrows.row16(j), v.end[v.count] = j + m - (j0 + k0);
      if (t.g.prefetch_kv && !(v.ahead[v.count] = a.spread(j, m)).at) a.fetch(j, m);  // as K's
    }
    for (int64_t c0 = 0; c0 < Dv; c0 += cols, v.next_columns(cols))
      gk.wide16[t16][t.rows](k1 - k0, t.st.s + k0, kBK, 1, v, t.st.o + c0, Dv,
                             std::min(cols, Dv - c0), 1.0f, 1.0f);
  }
}

namespace {

// Few rows otherwise (decode): V read in place, once, row after row, by the wide kernels (a
// whole row of V per call: up to 8 FMA chains and one sequential stream the hardware prefetcher
// follows, where NR-column panels gave each row NV chains as long as the tile and four strided
// streams); panels of more rows by the NR-column kernel, which has chains enough. Columns past
// the last whole vector go through a zero-padded packed panel. V goes in blocks of kDecodeKeys
// keys, a block staying in L1 while the kernels pass it a strip of columns at a time (as one
// 256-key block, every strip after the first came from L2 and the first from memory).
void pv_few_rows(const Task& t, const Ahead& a, int64_t j0, int64_t, int64_t, int64_t from,
                 int64_t to) {
  const arch::GemmKernels& gk = t.kt.gemm;
  const int64_t MR = gk.mr, NR = gk.nr, Dv = t.g.d.value_dim;
  const int64_t* extent = t.st.extent;
  TileState& st = t.st;
  int64_t lo = kBK, hi = 0;
  for (int64_t ir = 0, p = 0; ir < t.rows; ir += MR, ++p)
    if (extent[2 * p + 1] > extent[2 * p])
      lo = std::min(lo, extent[2 * p]), hi = std::max(hi, extent[2 * p + 1]);
  lo = std::max(lo, from), hi = std::min(hi, to);
  for (int64_t kb = lo, ke; kb < hi; kb = ke) {
    ke = kb + t.vrows.run(j0 + kb, std::min(hi - kb, kDecodeKeys));  // within a page
    int64_t ldv;
    const float* vblock = t.vrows.tile(t.kt, j0 + kb, ke - kb, ldv);
    if (t.g.prefetch_kv)  // as pv_in_place_16
      a.fetch(j0 + kb, ke - kb);
    for (int64_t ir = 0, p = 0; ir < t.rows; ir += MR, ++p) {
      const int64_t k0 = std::max(kb, extent[2 * p]), k1 = std::min(ke, extent[2 * p + 1]);
      const int64_t r = std::min(MR, t.rows - ir);
      if (k1 <= k0) continue;
      const float* prob = st.s + ir * kBK + k0;
      const float* vsrc = vblock + (k0 - kb) * ldv;
      float* o_rows = st.o + ir * Dv;
      if (r <= arch::kMaxWideRows) {
        arch::wide_rows(gk, r, k1 - k0, prob, kBK, 1, vsrc, ldv, o_rows, Dv, Dv, 1.0f, 1.0f, st.vp);
        continue;
      }
      int64_t c0 = 0;
      for (; c0 + NR <= Dv; c0 += NR)
        gk.strided[r](k1 - k0, prob, kBK, 1, vsrc + c0, ldv, o_rows + c0, Dv, NR, 1.0f, 1.0f);
      if (c0 < Dv) {
        gk.pack_b(false, k1 - k0, Dv - c0, vsrc + c0, ldv, st.vp);
        gk.rows_bk[r](k1 - k0, prob, st.vp, o_rows + c0, Dv, Dv - c0, 1.0f, 1.0f);
      }
    }
  }
}

// Many rows: P read in place (rows kBK apart, a constant of the kernel), V packed per tile into
// NR-column panels (a copy of rows; contiguous loads that stay in L1 while every P panel
// passes). Meanwhile the next tile's next_n K rows are fetched into L2 (its K^T packing
// otherwise waited on them). A Q panel's first product stores (beta = 0) instead of adding to
// zeros, so its O is neither cleared nor read before (a panel no tile reaches is never read
// either: its rows finish with l = 0).
void pv_packed(const Task& t, const Ahead&, int64_t j0, int64_t n, int64_t next_n, int64_t,
               int64_t) {
  const arch::GemmKernels& gk = t.kt.gemm;
  const int64_t MR = gk.mr, NR = gk.nr, Dv = t.g.d.value_dim;
  const int64_t* extent = t.st.extent;
  TileState& st = t.st;
  int64_t ldv;
  const float* vtile = t.vrows.tile(t.kt, j0, n, ldv);
  SpreadPrefetch k_ahead;
  if (next_n > 0)
    k_ahead = SpreadPrefetch(t.krows, j0 + kBK, next_n, ceil_div(Dv, NR) * ceil_div(t.rows, MR));
  for (int64_t c0 = 0; c0 < Dv; c0 += NR) {
    const int64_t nr = std::min(NR, Dv - c0);
    gk.pack_b(false, n, nr, vtile + c0, ldv, st.vp);
    for (int64_t ir = 0, p = 0; ir < t.rows; ir += MR, ++p) {
      // Only the keys some row of the panel sees: P is 0 elsewhere.
      const int64_t k0 = extent[2 * p], k1 = extent[2 * p + 1];
      if (k1 <= k0) continue;
      gk.rows_bk[std::min(MR, t.rows - ir)](k1 - k0, st.s + ir * kBK + k0, st.vp + k0 * NR,
                                            st.o + ir * Dv + c0, Dv, nr, 1.0f,
                                            st.o_live[p] ? 1.0f : 0.0f);
      k_ahead.step();
    }
  }
  k_ahead.finish();
  for (int64_t p = 0; p < ceil_div(t.rows, MR); ++p)
    st.o_live[p] |= extent[2 * p + 1] > extent[2 * p];
}

// Few rows with q8_0 / q4_0 V: read in place and dequantized in registers by the table's quant
// kernels, each Q panel over the keys it sees, up to dot_rows rows a call.
void pv_quant(const Task& t, const Ahead& a, int64_t j0, int64_t, int64_t, int64_t lo, int64_t hi) {
  const arch::QuantKernels& qk = t.kt.quant;
  const int64_t MR = t.kt.gemm.mr, R = qk.dot_rows, Dv = t.g.d.value_dim;
  const int ti = t.vrows.block_index();
  const int64_t* extent = t.st.extent;
  for (int64_t ir = 0, p = 0; ir < t.rows; ir += MR, ++p) {
    const int64_t k0 = std::max(lo, extent[2 * p]), k1 = std::min(hi, extent[2 * p + 1]);
    if (k1 <= k0) continue;
    for (int64_t i = ir; i < std::min(t.rows, ir + MR); i += R) {
      const int64_t r = std::min(R, std::min(t.rows, ir + MR) - i);
      for (int64_t kb = k0, kn; kb < k1; kb += kn) {  // page by page
        kn = t.vrows.run(j0 + kb, k1 - kb);
        const bool short_call = t.g.prefetch_kv && i == ir && kn < kDecodeKeys;  // as key_dots
        qk.pv[ti][r](kn, t.st.s + i * kBK + kb, kBK, t.vrows.row8(j0 + kb), t.vrows.ld_bytes(),
                     Dv / arch::kQBlock, t.st.o + i * Dv, Dv,
                     short_call ? a.after(j0 + kb, kn, true) : a.after(j0 + kb, kn));
      }
    }
  }
}

}  // namespace

// The P V step for this task's rows and V storage type.
PvStep pv_step(const Task& t, bool few) {
  const arch::GemmKernels& gk = t.kt.gemm;
  if (!few) return pv_packed;
  if (KvRows::block(t.g.d.v_type)) return pv_quant;
  if (t.g.d.v_type != TESSERA_F32 && t.rows <= arch::kMaxWideRows && t.rows <= gk.mr)
    return pv_in_place_16;
  return pv_few_rows;
}

}  // namespace tessera::detail::fa
