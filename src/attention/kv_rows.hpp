// The K and V rows fused attention reads, of any storage type, and the schedule that prefetches
// them: the loaders of the key loop (key_loop.cpp). A new K/V storage type adds its rows here and
// its dot loader there, not a branch inside the loop.
#pragma once

#include <algorithm>
#include <cstdint>

#include "arch/common/prefetch.hpp"
#include "arch/kernels.hpp"
#include "tessera/attention.hpp"

namespace tessera::detail::fa {

// ---- the prefetch schedule ----------------------------------------------------------------------

// The rows [0, count) of a K or V tile (len bytes, ld bytes apart), prefetched in even shares
// over `steps` calls of step(): one share after each micro-kernel call of a product, so the
// requests trickle out while the FMAs run (issued in one burst per row of the softmax loop,
// they stalled on full fill buffers).
struct KvRows;
struct SpreadPrefetch {
  const char* base = nullptr;     // the tile's first row, the next ld bytes on
  const KvRows* paged = nullptr;  // or, through a block table, row j0 + r of these
  int64_t j0 = 0, ld = 0, len = 0, count = 0, share = 0, next = 0;

  SpreadPrefetch() = default;
  SpreadPrefetch(const KvRows& r, int64_t j0_, int64_t count_, int64_t steps);
  void step() {
    for (const int64_t e = std::min(count, next + share); next < e; ++next) fetch(next);
  }
  void finish() {
    for (; next < count; ++next) fetch(next);
  }
  void fetch(int64_t row) const;
};

// ---- K and V rows of any storage type -----------------------------------------------------------

// The K or V rows of one (batch, KV head): tiles of them as float32 rows, read in place, or
// widened into the task's buffer first (a f16/bf16 tile: one pass of the table's conversion
// kernels; a q8_0/q4_0 tile: its dequantization; the products then run on float32 as they do
// for float32 inputs). Strides count values; a block type's are whole blocks.
// Paged (a block table): row j is row j % page of page table[j / page]. Rows stay ld apart only
// within a page: the readers that take rows in place stop their blocks at the page's end (run),
// and a tile that spans pages comes as float32 rows gathered page by page.
struct KvRows {
  const char* base;  // row 0 (paged: row 0 of page 0 of the pool, at this head)
  int64_t ld;        // values between rows
  int64_t len;       // values per row
  tessera_dtype type;
  float* widened;                  // BK x len floats
  const int32_t* table = nullptr;  // paged: this batch's pages
  int64_t page = 0, page_ld = 0;   // rows per page, values between pages
  int page_shift = -1;             // log2(page) where a power of two: no division per row
  int64_t end = 0;                 // the sequence's rows [0, end): prefetches stop there

  KvRows(const tessera_attention_desc& d, const void* p, tessera_dtype t, const int64_t* stride,
         int64_t b, int64_t hk, int64_t len_, float* w, int64_t end_)
      : base(static_cast<const char*>(p) +
             bytes(t, (d.block_table ? 0 : b * stride[0]) + hk * stride[1])),
        ld(stride[2]),
        len(len_),
        type(t),
        widened(w),
        end(end_) {
    if (d.block_table) {
      table = d.block_table + b * d.block_table_stride, page = d.page_size, page_ld = stride[0];
      if ((page & (page - 1)) == 0) page_shift = __builtin_ctzll(uint64_t(page));
    }
  }
  // The page of row j and the row within it.
  int64_t page_of(int64_t j) const { return page_shift >= 0 ? j >> page_shift : j / page; }
  int64_t in_page(int64_t j) const { return page_shift >= 0 ? j & (page - 1) : j % page; }
  // The bytes of n values (n whole blocks for a block type).
  static int64_t bytes(tessera_dtype t, int64_t n) {
    switch (t) {
      case TESSERA_F32:
        return 4 * n;
      case TESSERA_Q8_0:
        return n / arch::kQBlock * arch::kQBlockBytes[0];
      case TESSERA_Q4_0:
        return n / arch::kQBlock * arch::kQBlockBytes[1];
      default:
        return 2 * n;
    }
  }
  static bool block(tessera_dtype t) { return t == TESSERA_Q8_0 || t == TESSERA_Q4_0; }
  // The kernel tables' index of a block type: 0 q8_0, 1 q4_0.
  int block_index() const { return type == TESSERA_Q4_0 ? 1 : 0; }
  // The rows from j to the end of its page, and on through the pages that follow it in memory
  // (each page's first row ld after the last one's: a head-major pool handed out in order), so
  // that the readers' calls span them as one (as many as asked without pages).
  int64_t run(int64_t j, int64_t n) const {
    if (!table) return n;
    int64_t m = page - in_page(j);
    for (int64_t p = page_of(j); m < n && table[p + 1] * page_ld == table[p] * page_ld + page * ld;
         ++p)
      m += page;
    return std::min(n, m);
  }
  // The page runs a task's heads read from row j (n rows on) before the next ones: up to
  // `pages` runs of one length m, each head's run of each of them in turn, so that several
  // scattered pages stream at once (AttentionPlan::page_group); else the one run at j. A page
  // that follows the one before it in the pool ends the group: a page at a time then reads the
  // pool in memory order (grouped, a pool handed out in order read 20% slower on one thread).
  int64_t page_runs(int64_t j, int64_t n, int64_t pages, int64_t& m) const {
    m = run(j, n);
    int64_t count = 1;
    for (int64_t at = j + m; count < pages && count * m < n && run(at, n - count * m) == m;
         at += m, ++count)
      if (table[page_of(at)] == table[page_of(at - m)] + 1) break;
    return count;
  }
  // The keys from j (n on) of one call of a sum over keys of up to `keys`: that many of one
  // page's run, or the runs of as many pages as make them (page_runs, so a page that follows the
  // one before it in the pool ends them). From a tile's first key, whatever the readers' order,
  // every page group (page_runs, pages a multiple of these) starts a call: sums that do not
  // depend on how tasks take heads.
  int64_t call_keys(int64_t j, int64_t n, int64_t keys) const {
    n = std::min(n, keys);
    int64_t m;
    const int64_t pages = page_runs(j, n, call_pages(j, n, keys), m);
    return pages * m;
  }
  // The pages such a call from j takes at most: one where a page's run holds `keys`.
  int64_t call_pages(int64_t j, int64_t n, int64_t keys) const {
    return std::max<int64_t>(1, keys / run(j, std::min(n, keys)));  // (run walks n rows on)
  }
  const char* row(int64_t j) const {
    if (table) return base + bytes(type, table[page_of(j)] * page_ld + in_page(j) * ld);
    return base + bytes(type, j * ld);
  }
  // Rows [j, j + n) into L2 (kLocality 2) or L1 (3), each at its own address (on whatever page
  // it sits; none at or past `end`): the next rows of a decode reading K/V from memory (the
  // plan's prefetch_kv), issued a call's rows at a time so that they arrive while the current
  // block's calls run. Always inlined: out of line, GCC 12 deletes the call
  // (arch/common/prefetch.hpp).
  template <int kLocality>
  TESSERA_ALWAYS_INLINE void prefetch(int64_t j, int64_t n) const {
    const int64_t e = std::min(end, j + n);
    for (int64_t r = j, m; r < e; r += m) {
      m = run(r, e - r);
      // Rows back to back: each line of their span once (row by row, a q8_0 row's 136 bytes
      // took four prefetches for about two lines of its own).
      const int64_t lb = ld_bytes(), rb = row_bytes();
      if (lb == rb)
        arch::prefetch_rows_ahead<kLocality>(row(r), 0, 1, 0, m * rb);
      else
        arch::prefetch_rows_ahead<kLocality>(row(r), 0, m, lb, rb);
    }
  }
  // Where the rows from j on lie, for the prefetches of a kernel whose call ends before j: as
  // many as run on from j's page, up to kAfterRows (none at or past `end`).
  static constexpr int64_t kAfterRows = 64;  // (the kernels prefetch a group of 32 ahead)
  arch::NextRows after(int64_t j) const {
    if (j >= end) return {};
    return {row8(j), run(j, std::min(end - j, kAfterRows))};
  }
  int64_t ld_bytes() const { return bytes(type, ld); }
  int64_t row_bytes() const { return bytes(type, len); }
  // cppcheck-suppress invalidPointerCast
  const uint16_t* row16(int64_t j) const { return reinterpret_cast<const uint16_t*>(row(j)); }
  // cppcheck-suppress invalidPointerCast
  const uint8_t* row8(int64_t j) const { return reinterpret_cast<const uint8_t*>(row(j)); }
  // Rows [j0, j0 + n) as float32, ld_out floats apart.
  const float* tile(const arch::KernelTable& kt, int64_t j0, int64_t n, int64_t& ld_out) const {
    if (run(j0, n) < n) {  // across pages: each page's rows as a tile of their own
      widen(kt, j0, n, widened);
      ld_out = len;
      return widened;
    }
    return tile_in_page(kt, j0, n, ld_out, widened);
  }
  // Rows [j0, j0 + n) as float32 rows in `out`, len floats apart, page by page.
  void widen(const arch::KernelTable& kt, int64_t j0, int64_t n, float* out) const {
    for (int64_t r = 0, m; r < n; r += m) {
      m = run(j0 + r, n - r);
      int64_t ld_piece;
      const float* piece = tile_in_page(kt, j0 + r, m, ld_piece, out + r * len);
      if (piece != out + r * len)
        for (int64_t i = 0; i < m; ++i) std::copy_n(piece + i * ld_piece, len, out + (r + i) * len);
    }
  }
  // Rows [j0, j0 + n) of one page, widened into `out` unless float32.
  const float* tile_in_page(const arch::KernelTable& kt, int64_t j0, int64_t n, int64_t& ld_out,
                            float* out) const {
    if (type == TESSERA_F32) {
      ld_out = ld;
      // cppcheck-suppress invalidPointerCast
      return reinterpret_cast<const float*>(row(j0));
    }
    ld_out = len;
    if (block(type)) {
      const auto dequantize = kt.quant.dequantize[block_index()];
      if (ld == len)
        dequantize(n * len, row8(j0), out);
      else
        for (int64_t r = 0; r < n; ++r) dequantize(len, row8(j0 + r), out + r * len);
      return out;
    }
    const auto widen = type == TESSERA_F16 ? kt.convert.f16_to_f32 : kt.convert.bf16_to_f32;
    const uint16_t* h = row16(j0);
    if (ld == len)
      widen(n * len, h, out);
    else
      for (int64_t r = 0; r < n; ++r) widen(len, h + r * ld, out + r * len);
    return out;
  }
};

// The rows a step prefetches while it reads rows [j, j + n) of a head: a head alone, its own
// from j + kDecodeKeys on (and the kernels' rows past a call, those after it); a page's heads
// together, the next run in reading order, rows j + shift on of `rows` (next_run).
struct Ahead {
  const KvRows* rows;
  int64_t shift;
  bool own = true;  // rows are the head's own: past a call come the rows right after it
  bool l1 = false;  // into L1 (the plan's prefetch_l1: short runs), else L2
  // The order a task reads its heads' rows in: a group of `pages` runs of m rows each, from the
  // group's first row; head 0's run of every page of the group, then head 1's, ..., then the
  // next group's (taken to follow on, as long); this is head h's run of page g, from row lo. A
  // head alone: heads = 1, pages = 1, any m. Null order: no rows to spread.
  const KvRows* const* order = nullptr;
  int64_t heads = 1, h = 0, pages = 1, g = 0, lo = 0, m = 1, distance = 0;
  // The rows read `distance` rows after [j, j + n) in that order, for the kernels that prefetch
  // one alongside each of their own (arch::RowsAhead), wherever they lie; none where they are
  // not n rows at a stride (a page boundary) or run past the sequence.
  arch::RowsAhead spread(int64_t j, int64_t n) const {
    if (!order) return {};
    const int64_t i = j - lo + distance, run = h * pages + g + i / m, per_group = heads * pages;
    const int64_t group = run / per_group, in_group = run % per_group;
    const KvRows& r = *order[in_group / pages];
    const int64_t row = lo - g * m + (group * pages + in_group % pages) * m + i % m;
    if (row + n > r.end || r.run(row, n) < n) return {};
    return {r.row8(row), r.ld_bytes()};
  }
  TESSERA_ALWAYS_INLINE void fetch(int64_t j, int64_t n) const {
    if (l1)
      rows->prefetch<3>(j + shift, n);
    else
      rows->prefetch<2>(j + shift, n);
  }
  // Where the rows that follow a kernel's call over [j, j + n) lie, for its own prefetches; and
  // for a short call (fewer rows than the kernels prefetch ahead: pages of 16), the rows read
  // `distance` on in reading order (spread), handed to a kernel that spreads NextRows::spread
  // over its loop (`spreads`) or fetched now. The next run alone (a page's next head, 2 KB of
  // q8_0 on) arrived late: its loads waited on memory. Where those rows do not lie at a stride,
  // the first run of the rows fetch(j, n) names goes instead, the same way.
  arch::NextRows after(int64_t j, int64_t n) const {
    return own ? rows->after(j + n) : rows->after(j + shift);
  }
  TESSERA_ALWAYS_INLINE arch::NextRows after(int64_t j, int64_t n, bool spreads) const {
    arch::NextRows next = after(j, n);
    if (const arch::RowsAhead far = spread(j, n); far.at) {
      if (spreads)
        next.spread = far.at, next.spread_rows = n, next.spread_l1 = l1;
      else  // all now: the one share of one step
        arch::prefetch_share(far.at, n, far.ld, rows->row_bytes(), 0, 1, l1);
      return next;
    }
    int64_t handed = 0;
    if (spreads && j + shift < rows->end) {
      handed = rows->run(j + shift, std::min(n, rows->end - (j + shift)));
      next.spread = rows->row8(j + shift), next.spread_rows = handed, next.spread_l1 = l1;
    }
    if (handed < n) fetch(j + handed, n - handed);
    return next;
  }
};

inline SpreadPrefetch::SpreadPrefetch(const KvRows& r, int64_t j0_, int64_t count_, int64_t steps)
    : base(r.row(j0_)),
      paged(r.table ? &r : nullptr),
      j0(j0_),
      ld(r.ld_bytes()),
      len(r.row_bytes()),
      count(count_),
      share((count_ + steps - 1) / steps) {}

inline void SpreadPrefetch::fetch(int64_t row) const {
  const char* p = paged ? paged->row(j0 + row) : base + row * ld;
  // cppcheck-suppress invalidPointerCast
  arch::prefetch_span<2>(reinterpret_cast<const float*>(p), (len + 3) / 4);
}

}  // namespace tessera::detail::fa
