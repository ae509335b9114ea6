// Fused attention's task: a block of stacked query rows against the K/V tiles of one KV head
// (the key loop), with its state carved from thread scratch, its queries staged and its rows
// finished. The design and the block sizes: flash_attention.cpp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>

#include "arch/common/prefetch.hpp"
#include "attention/attention_tile.hpp"
#include "attention/flash_attention.hpp"
#include "runtime/scratch.hpp"

namespace tessera::detail::fa {
namespace {

// The rows [0, count) of a K or V tile (len floats, ld apart), prefetched in even shares over
// `steps` calls of step(): one share after each micro-kernel call of a product, so the requests
// trickle out while the FMAs run. (Issued in one burst per row of the softmax loop, they had
// stalled on full fill buffers: 2-3% of fused attention at L = 4096, d = 128.)
// Rows, their length and the distance between them in bytes (K and V may be 16-bit).
struct SpreadPrefetch {
  const char* base = nullptr;
  int64_t ld = 0, len = 0, count = 0, share = 0, next = 0;

  SpreadPrefetch() = default;
  SpreadPrefetch(const char* b, int64_t ld_, int64_t len_, int64_t count_, int64_t steps)
      : base(b), ld(ld_), len(len_), count(count_), share((count_ + steps - 1) / steps) {}
  void step() {
    for (const int64_t e = std::min(count, next + share); next < e; ++next) fetch(next);
  }
  void finish() {
    for (; next < count; ++next) fetch(next);
  }
  void fetch(int64_t row) const {
    // cppcheck-suppress invalidPointerCast
    arch::prefetch_span<2>(reinterpret_cast<const float*>(base + row * ld), (len + 3) / 4);
  }
};

// The K or V rows of one (batch, KV head), of any element type: tiles of them as float32 rows,
// read in place, or widened into the task's buffer first (a f16/bf16 tile: one pass of the
// table's conversion kernels, so the products run on float32 as they do for float32 inputs).
struct KvRows {
  const char* base;  // row 0
  int64_t ld;        // elements between rows
  int64_t len;       // elements per row
  tessera_dtype type;
  float* widened;  // BK x len floats

  KvRows(const void* p, tessera_dtype t, const int64_t* stride, int64_t b, int64_t hk, int64_t len_,
         float* w)
      : base(static_cast<const char*>(p) + (b * stride[0] + hk * stride[1]) * bytes(t)),
        ld(stride[2]),
        len(len_),
        type(t),
        widened(w) {}
  static int64_t bytes(tessera_dtype t) { return t == TESSERA_F32 ? 4 : 2; }
  const char* row(int64_t j) const { return base + j * ld * bytes(type); }
  int64_t ld_bytes() const { return ld * bytes(type); }
  // Rows [j0, j0 + n) as float32, ld_out floats apart.
  const float* tile(const arch::ConvertKernels& cv, int64_t j0, int64_t n, int64_t& ld_out) const {
    if (type == TESSERA_F32) {
      ld_out = ld;
      // cppcheck-suppress invalidPointerCast
      return reinterpret_cast<const float*>(row(j0));
    }
    const auto widen = type == TESSERA_F16 ? cv.f16_to_f32 : cv.bf16_to_f32;
    // cppcheck-suppress invalidPointerCast
    const auto* h = reinterpret_cast<const uint16_t*>(row(j0));
    if (ld == len)
      widen(n * len, h, widened);
    else
      for (int64_t r = 0; r < n; ++r) widen(len, h + r * ld, widened + r * len);
    ld_out = len;
    return widened;
  }
};

// O += P V for few rows (decode): V is read in place, once, row after row, by the wide
// kernels (GemmKernels::wide; panels of more rows by the NR-column kernel, which has chains
// enough): with NR columns a single query row had NV FMA chains, each as
// long as the tile, and the four NR panels of d = 128 read V as four strided streams that
// needed software prefetching; a whole row of V (up to 8 vectors) per call gives 8 chains and
// one sequential stream the hardware prefetcher follows. Measured (AVX-512, 1 thread,
// interleaved, medians): decode 32 heads x d = 128, kv 512 (in L3) 28.0 -> 36.7 GFLOP/s, kv
// 4096 11.9 -> 15.1, kv 32768 11.9 -> 14.2. Columns past the last whole vector (head dims that
// are not a multiple of W) go through a zero-padded packed panel.
// V goes in blocks of kDecodeKeys keys: a block (16 KB of float32 at d = 128, or a 16-bit one
// read in place or widened) stays in L1 while the wide kernels pass it a strip of columns at a
// time; as one 256-key block (128 KB), every strip after the first came from L2 and the first
// from memory row by row.
void pv_few_rows(const arch::KernelTable& kt, const tessera_attention_desc& d, int64_t rows,
                 const KvRows& vrows, int64_t j0, const int64_t* extent, TileState& st) {
  const arch::GemmKernels& gk = kt.gemm;
  const int64_t MR = gk.mr, NR = gk.nr, Dv = d.value_dim;
  int64_t lo = kBK, hi = 0;
  for (int64_t ir = 0, t = 0; ir < rows; ir += MR, ++t)
    if (extent[2 * t + 1] > extent[2 * t])
      lo = std::min(lo, extent[2 * t]), hi = std::max(hi, extent[2 * t + 1]);
  if (d.v_type != TESSERA_F32 && rows <= arch::kMaxWideRows && rows <= MR) {
    // One Q panel (its extent is extent[0..1]). 16-bit V read in place by the kernels that
    // widen it in registers, wide16_cols columns a call, over blocks of kDecodeKeys keys (8 KB
    // of V at d = 128, in L1 across the block's calls; whole 256-key column strips made every
    // call after the first read V from L2 or memory again: 5x slower).
    const int t16 = d.v_type == TESSERA_BF16 ? 1 : 0;
    const int64_t cols = gk.wide16_cols;
    for (int64_t kb = extent[0]; kb < extent[1]; kb += kDecodeKeys) {
      const int64_t kn = std::min(kDecodeKeys, extent[1] - kb);
      // cppcheck-suppress invalidPointerCast
      const auto* vsrc = reinterpret_cast<const uint16_t*>(vrows.row(j0 + kb));
      for (int64_t c0 = 0; c0 < Dv; c0 += cols)
        gk.wide16[t16][rows](kn, st.s + kb, kBK, 1, vsrc + c0, vrows.ld, st.o + c0, Dv,
                             std::min(cols, Dv - c0), 1.0f, 1.0f);
    }
    return;
  }
  const int64_t block = kDecodeKeys;
  for (int64_t kb = lo; kb < hi; kb += block) {
    const int64_t ke = std::min(hi, kb + block);
    int64_t ldv;
    const float* vblock = vrows.tile(kt.convert, j0 + kb, ke - kb, ldv);
    for (int64_t ir = 0, t = 0; ir < rows; ir += MR, ++t) {
      const int64_t k0 = std::max(kb, extent[2 * t]), k1 = std::min(ke, extent[2 * t + 1]);
      const int64_t r = std::min(MR, rows - ir);
      if (k1 <= k0) continue;
      const float* p = st.s + ir * kBK + k0;
      const float* vsrc = vblock + (k0 - kb) * ldv;
      float* o_rows = st.o + ir * Dv;
      if (r <= arch::kMaxWideRows) {
        arch::wide_rows(gk, r, k1 - k0, p, kBK, 1, vsrc, ldv, o_rows, Dv, Dv, 1.0f, 1.0f, st.vp);
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
}

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

void load_queries(const tessera_attention_desc& d, const Geometry& g, const float* q, int64_t b,
                  int64_t hk, int64_t i0, int64_t bq, float* qg) {
  for (int64_t r = 0; r < g.group * bq; ++r) {
    const int64_t h = hk * g.group + r / bq, i = i0 + r % bq;
    std::memcpy(qg + r * d.head_dim, q + b * d.q_stride[0] + h * d.q_stride[1] + i * d.q_stride[2],
                sizeof(float) * size_t(d.head_dim));
  }
}

}  // namespace

// The key loop over [kb, ke) for one task; updates st (m, l, o) for rows = group x bq.
void key_loop(const Geometry& g, const arch::KernelTable& kt, int64_t b, int64_t hk, int64_t i0,
              int64_t bq, int64_t kb, int64_t ke, const void* k, const void* v, TileState& st) {
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
  const int64_t end = std::min(ke, valid);
  // A window can start past the valid keys (visible_range then gives an empty [lo, lo)): no
  // tile past `end` is visited, where it once made an empty tile and a division by zero.
  const int64_t hi = std::min(end, std::max(hi_first, hi_last));
  if (hi <= lo) return;  // no key visible to any row (k and v may be NULL when kv_len = 0)
  const KvRows krows(k, d.k_type, d.k_stride, b, hk, D, st.kw);
  const KvRows vrows(v, d.v_type, d.v_stride, b, hk, Dv, st.vw);
  const arch::SoftmaxKernels& sk = kt.softmax;

  const arch::GemmKernels& gk = kt.gemm;
  const int64_t MR = gk.mr, NR = gk.nr, W = kt.simd_floats;
  // Per Q panel key extents of the current tile.
  int64_t* extent = st.extent;
  // Per chunk of rows (softmax_chunk): the keys of the current tile it reads (tile_windows).
  const int64_t chunk = softmax_chunk(kt);
  int64_t* window = st.window;
  // Per Q panel: whether its O rows hold anything yet. The first P V product of a panel stores
  // (beta = 0) instead of adding to zeros, so O is neither cleared nor read for it (a panel no
  // tile reaches is never read either: its rows finish with l = 0). L = 256, 1 thread: the
  // memset and the first product's loads of O were ~2% of the call.
  uint8_t* o_live = st.o_live;
  const int64_t panels = (rows + MR - 1) / MR;
  std::memset(o_live, 0, size_t(panels));
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
    if (few_rows(gk, rows)) {
      // Few rows (decode): dot products along d, K read once, in blocks of kDecodeKeys keys
      // (whole column groups of every dot kernel: the same calls as one pass over the tile).
      // A block is read in place (16-bit rows widened in registers by the dot16 kernels), the
      // row groups after the first finding it in L1.
      const bool k16 = d.k_type != TESSERA_F32;
      const int64_t R = k16 ? gk.dot16_rows : gk.dot_rows;
      const int* cols = k16 ? gk.dot16_cols : gk.dot_cols;
      int64_t unit = 1;
      for (int64_t r = 1; r <= std::min(R, rows); ++r) unit = std::lcm(unit, int64_t(cols[r]));
      const int64_t block = std::max<int64_t>(1, kDecodeKeys / unit) * unit;
      for (int64_t jb = 0; jb < n; jb += block) {
        const int64_t nb = std::min(block, n - jb);
        if (k16) {
          // 16-bit K: the dot kernels widen it in registers as they read it, in place.
          const int t16 = d.k_type == TESSERA_BF16 ? 1 : 0;
          // cppcheck-suppress invalidPointerCast
          const auto* kblock = reinterpret_cast<const uint16_t*>(krows.row(j0 + jb));
          const int64_t ldk = krows.ld;
          for (int64_t i = 0; i < rows; i += R) {
            const int64_t r = std::min(R, rows - i), J = cols[r];
            float* srow = st.s + i * kBK + jb;
            int64_t j = 0;
            for (; j + J <= nb; j += J)
              gk.dot16[t16][r](D, st.qg + i * D, D, kblock + j * ldk, ldk, srow + j, kBK, g.scale,
                               0.0f);
            for (; j < nb; ++j)
              gk.dot16_1[t16][r](D, st.qg + i * D, D, kblock + j * ldk, ldk, srow + j, kBK, g.scale,
                                 0.0f);
          }
          continue;
        }
        int64_t ldk;
        const float* kblock = krows.tile(kt.convert, j0 + jb, nb, ldk);
        for (int64_t i = 0; i < rows; i += R) {
          const int64_t r = std::min(R, rows - i), J = gk.dot_cols[r];
          // One row reads each K row once, from memory in decode: the in-order kernel.
          const arch::GemmDotFn dot = r == 1 ? gk.dot_stream : gk.dot[r];
          float* srow = st.s + i * kBK + jb;
          int64_t j = 0;
          for (; j + J <= nb; j += J)
            dot(D, st.qg + i * D, D, kblock + j * ldk, ldk, srow + j, kBK, g.scale, 0.0f);
          for (; j < nb; ++j)
            gk.dot1[r](D, st.qg + i * D, D, kblock + j * ldk, ldk, srow + j, kBK, g.scale, 0.0f);
        }
      }
    } else {
      int64_t ldk;
      const float* ktile = krows.tile(kt.convert, j0, n, ldk);
      gk.pack_b(true, D, n, ktile, ldk, st.kp);
      // This tile's V rows, fetched into L2 while S is computed (P V reads them next).
      SpreadPrefetch v_ahead(vrows.row(j0), vrows.ld_bytes(), Dv * KvRows::bytes(d.v_type), n,
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
    tile_windows(kt, rows, n, whole, extent, window);
    if (g.elementwise || !whole)
      mask_tile(g, b, hk, i0, bq, j0, n, valid, sk, window, chunk, st.s, kBK);

    // P = exp(S - m_new) for the rows whose new max is finite, in groups of rows (one row's
    // max-exp-sum chain alone leaves the FMA ports idle); the others (nothing visible yet, a
    // +inf or NaN score) row by row below.
    if (whole)
      sk.attention_rows(rows, n, st.s, kBK, st.m, st.tile_m, st.tile_l);
    else
      diagonal_tile_rows(kt, rows, window, st);
    for (int64_t r = 0; r < rows; ++r) {
      // Only the row's window holds its scores.
      const int64_t w0 = window[2 * (r / chunk)], w = window[2 * (r / chunk) + 1] - w0;
      float* srow = st.s + r * kBK + w0;
      const float m_old = st.m[r];
      float m_new = st.tile_m[r], sum = st.tile_l[r];
      if (!std::isfinite(m_new)) {
        // A NaN score makes the row NaN. The vector max need not return NaN (x86's max gives
        // its other operand), and a row of only NaN scores was once taken for an empty one:
        // this rare branch looks for NaN itself.
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
    if (few_rows(gk, rows)) {
      pv_few_rows(kt, d, rows, vrows, j0, extent, st);
      continue;
    }
    int64_t ldv;
    const float* vtile = vrows.tile(kt.convert, j0, n, ldv);
    // O += P V: P read in place (rows kBK apart, a constant of the kernel), V packed per tile
    // into NR-column panels (a copy of rows; contiguous loads that stay in L1 while every P
    // panel passes). Meanwhile the next tile's K rows are fetched into L2 (its K^T packing
    // otherwise waited on them: ~6% of the time at L = 4096, d = 128).
    const int64_t next_n = std::min(kBK, std::min(hi, end) - (j0 + kBK));
    SpreadPrefetch k_ahead;
    if (next_n > 0)
      k_ahead = SpreadPrefetch(krows.row(j0 + kBK), krows.ld_bytes(), D * KvRows::bytes(d.k_type),
                               next_n, ceil_div(Dv, NR) * ceil_div(rows, MR));
    for (int64_t c0 = 0; c0 < Dv; c0 += NR) {
      const int64_t nr = std::min(NR, Dv - c0);
      gk.pack_b(false, n, nr, vtile + c0, ldv, st.vp);
      for (int64_t ir = 0, t = 0; ir < rows; ir += MR, ++t) {
        // Only the keys some row of the panel sees: P is 0 elsewhere.
        const int64_t k0 = extent[2 * t], k1 = extent[2 * t + 1];
        if (k1 <= k0) continue;
        gk.rows_bk[std::min(MR, rows - ir)](k1 - k0, st.s + ir * kBK + k0, st.vp + k0 * NR,
                                            st.o + ir * Dv + c0, Dv, nr, 1.0f,
                                            o_live[t] ? 1.0f : 0.0f);
        k_ahead.step();
      }
    }
    k_ahead.finish();
    for (int64_t t = 0; t < panels; ++t) o_live[t] |= extent[2 * t + 1] > extent[2 * t];
  }
}

namespace {

// The floats of each buffer of a task's state, in carve order (see TileState); each rounded
// to 16 floats so that every one starts 64-byte aligned. The last three hold integers.
constexpr int kStateBuffers = 15, kFloatBuffers = 12;
void state_sizes(const tessera_attention_desc& d, const arch::KernelTable& kt, int64_t rows,
                 int64_t* sizes) {
  const int64_t D = d.head_dim, Dv = d.value_dim, MR = kt.gemm.mr, NR = kt.gemm.nr;
  const int64_t panels = (rows + MR - 1) / MR, chunks = ceil_div(rows, softmax_chunk(kt));
  const int64_t bk_padded = (kBK + NR - 1) / NR * NR;
  const int64_t kw = d.k_type == TESSERA_F32 ? 0 : kBK * D;
  const int64_t vw = d.v_type == TESSERA_F32 ? 0 : kBK * Dv;
  auto r16 = [](int64_t f) { return (f + 15) / 16 * 16; };
  const int64_t f[kStateBuffers] = {
      rows * D,   panels * MR * D, D * bk_padded, kBK * NR, kw,   vw,
      rows * kBK, rows * Dv,       rows,          rows,     rows, rows,
      4 * panels, 4 * chunks,      panels};
  for (int i = 0; i < kStateBuffers; ++i) sizes[i] = r16(f[i]);
}

}  // namespace

size_t state_floats(const tessera_attention_desc& d, const arch::KernelTable& kt, int64_t rows) {
  int64_t sizes[kStateBuffers];
  state_sizes(d, kt, rows, sizes);
  size_t total = 0;
  for (int64_t z : sizes) total += size_t(z);
  return total;
}

void carve_state(float* p, const tessera_attention_desc& d, const arch::KernelTable& kt,
                 int64_t rows, bool merged, TileState& st) {
  const int64_t Dv = d.value_dim;
  int64_t sizes[kStateBuffers];
  state_sizes(d, kt, rows, sizes);
  float** slots[kFloatBuffers] = {&st.qg, &st.qp, &st.kp, &st.vp, &st.kw,     &st.vw,
                                  &st.s,  &st.o,  &st.m,  &st.l,  &st.tile_m, &st.tile_l};
  for (int i = 0; i < kFloatBuffers; ++i) {
    *slots[i] = p;
    p += sizes[i];
  }
  // cppcheck-suppress invalidPointerCast
  st.extent = reinterpret_cast<int64_t*>(p);
  p += sizes[kFloatBuffers];
  // cppcheck-suppress invalidPointerCast
  st.window = reinterpret_cast<int64_t*>(p);
  p += sizes[kFloatBuffers + 1];
  st.o_live = reinterpret_cast<uint8_t*>(p);
  for (int64_t r = 0; r < rows; ++r) st.m[r] = -kInf, st.l[r] = 0.0f;
  // The packed path writes each Q panel's O with its first product (beta = 0, key_loop) and
  // finish_rows reads only rows that saw a key; the few-row path accumulates into zeros, and
  // the decode merge (`merged`) reads every row's O, seen or not (0 x garbage could be NaN).
  if (merged || few_rows(kt.gemm, rows)) std::memset(st.o, 0, sizeof(float) * size_t(rows * Dv));
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
    // than reading it in place (L = 256, d = 128, 1 thread: 3% of the call). With more tiles
    // the packed copy pays for itself: read in place for every tile count, L = 512-2048 (d =
    // 64 and 128, causal or not, 1 thread, alternated medians) moved -2% to +1%.
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
                 int64_t i0, int64_t bq, const TileState& st, float* o) {
  const tessera_attention_desc& d = g.d;
  const int64_t Dv = d.value_dim;
  for (int64_t r = 0; r < g.group * bq; ++r) {
    const int64_t h = hk * g.group + r / bq, i = i0 + r % bq;
    float* orow = o + b * d.o_stride[0] + h * d.o_stride[1] + i * d.o_stride[2];
    float* lse = d.lse ? d.lse + (b * d.q_heads + h) * d.q_len + i : nullptr;
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

}  // namespace tessera::detail::fa
