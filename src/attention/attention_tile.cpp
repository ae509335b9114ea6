// Fused attention's task around its key loop (key_loop.cpp): its state carved from thread
// scratch, its queries staged and its rows finished. The design and the block sizes:
// flash_attention.cpp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "attention/attention_tile.hpp"
#include "attention/hadamard.hpp"
#include "runtime/check.hpp"

namespace tessera::detail::fa {
namespace {

void load_queries(const tessera_attention_desc& d, const Geometry& g, const float* q, int64_t b,
                  int64_t hk, int64_t i0, int64_t bq, float* qg) {
  for (int64_t r = 0; r < g.group * bq; ++r) {
    const int64_t h = hk * g.group + r / bq, i = i0 + r % bq;
    std::memcpy(qg + r * d.head_dim, q + b * d.q_stride[0] + h * d.q_stride[1] + i * d.q_stride[2],
                sizeof(float) * size_t(d.head_dim));
  }
}

// The floats of each buffer of a task's state, in carve order (see TileState); each rounded
// to 16 floats so that every one starts 64-byte aligned. The last five hold integers (the
// quantized queries' bytes first).
constexpr int kStateBuffers = 17, kFloatBuffers = 13;
void state_sizes(const tessera_attention_desc& d, const arch::KernelTable& kt, int64_t rows,
                 int64_t* sizes) {
  const int64_t D = d.head_dim, Dv = d.value_dim, MR = kt.gemm.mr, NR = kt.gemm.nr;
  const int64_t panels = (rows + MR - 1) / MR, chunks = ceil_div(rows, softmax_chunk(kt));
  const int64_t bk_padded = (kBK + NR - 1) / NR * NR;
  // (Paged float32 K/V: a tile that spans pages is gathered there.)
  const int64_t kw = d.k_type == TESSERA_F32 && !d.block_table ? 0 : kBK * D;
  const int64_t vw = d.v_type == TESSERA_F32 && !d.block_table ? 0 : kBK * Dv;
  // A quantized K: the queries as q8_0 rows, their scales (floats) and int8 (a quarter float
  // each).
  const bool qk = quantized_keys(d);
  auto r16 = [](int64_t f) { return (f + 15) / 16 * 16; };
  const int64_t f[kStateBuffers] = {rows * D,
                                    panels * MR * D,
                                    D * bk_padded,
                                    kBK * NR,
                                    kw,
                                    vw,
                                    rows * kBK,
                                    rows * Dv,
                                    rows,
                                    rows,
                                    rows,
                                    rows,
                                    qk ? rows * D / arch::kQBlock : 0,
                                    qk ? ceil_div(rows * D, 4) + rows * D / arch::kQBlock : 0,
                                    4 * panels,
                                    4 * chunks,
                                    panels};
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
  float** slots[kFloatBuffers] = {&st.qg, &st.qp, &st.kp, &st.vp,     &st.kw,     &st.vw, &st.s,
                                  &st.o,  &st.m,  &st.l,  &st.tile_m, &st.tile_l, &st.qd};
  for (int i = 0; i < kFloatBuffers; ++i) {
    *slots[i] = p;
    p += sizes[i];
  }
  st.qq = reinterpret_cast<int8_t*>(p);
  // cppcheck-suppress invalidPointerCast
  st.qsum = reinterpret_cast<int32_t*>(p + ceil_div(rows * d.head_dim, 4));
  p += sizes[kFloatBuffers];
  // cppcheck-suppress invalidPointerCast
  st.extent = reinterpret_cast<int64_t*>(p);
  p += sizes[kFloatBuffers + 1];
  // cppcheck-suppress invalidPointerCast
  st.window = reinterpret_cast<int64_t*>(p);
  p += sizes[kFloatBuffers + 2];
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
void stage_queries(const tessera_attention_desc& d, const Geometry& g, const arch::KernelTable& kt,
                   const float* q, int64_t b, int64_t hk, int64_t i0, int64_t bq, TileState& st) {
  const arch::GemmKernels& gk = kt.gemm;
  const int64_t rows = g.group * bq, D = d.head_dim;
  st.q_direct = nullptr;
  if (d.hadamard || quantized_keys(d)) {
    // Rotated keys: the queries rotated the same way (H q . H k = q . k). A block-type K: the
    // queries rounded to q8_0 (after the rotation), the integer dot kernels' operand (few rows),
    // and dequantized back for the packed products, so that every path scores the same queries.
    load_queries(d, g, q, b, hk, i0, bq, st.qg);
    if (d.hadamard) hadamard_rows(rows, D, d.hadamard, st.qg, D, st.qg, D);
    if (!quantized_keys(d)) {
      if (!few_rows(gk, rows)) gk.pack_a(false, rows, D, st.qg, D, st.qp);
      return;
    }
    kt.quant.quantize_rows(rows, D, st.qg, D, st.qq, st.qd);
    const int64_t blocks = D / arch::kQBlock;
    if (few_rows(gk, rows)) {  // the dot kernels' block sums, once for every call
      for (int64_t x = 0; x < rows * blocks; ++x) st.qsum[x] = block_sum(st.qq + x * arch::kQBlock);
      return;
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < D; ++c)
        st.qg[r * D + c] = st.qd[r * blocks + c / arch::kQBlock] * float(st.qq[r * D + c]);
    gk.pack_a(false, rows, D, st.qg, D, st.qp);
    return;
  }
  if (few_rows(gk, rows)) {
    load_queries(d, g, q, b, hk, i0, bq, st.qg);
  } else if (g.group == 1 && d.kv_len <= kBK) {
    // One K tile: each Q panel meets the packed K^T once per K panel, and packing Q cost more
    // than reading it in place. With more tiles the packed copy pays for itself.
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
    float l = st.l[r], m = st.m[r], f = 1.0f;
    const float sink = d.sinks ? d.sinks[h] : -kInf;
    if (l > 0.0f || std::isnan(l)) {
      // A sink: one more term of the denominator, exp(sink - m') with m' the larger maximum
      // (the sum so far rescaled by f = exp(m - m')); none where +inf scores hold all the mass.
      if (sink > -kInf && m < kInf) {
        const float mm = std::max(m, sink);
        f = std::exp(m - mm), l = l * f + std::exp(sink - mm), m = mm;
      }
      sk.affine(Dv, st.o + r * Dv, f / l, 0.0f, orow);
      // Rotated values: the output row rotated back (H is its own inverse).
      if (d.hadamard_v) hadamard_rows(1, Dv, d.hadamard, orow, Dv, orow, Dv);
      if (lse) *lse = m + std::log(l);
    } else {  // no visible key: zeros, and lse the sink's alone
      for (int64_t c = 0; c < Dv; ++c) orow[c] = 0.0f;
      if (lse) *lse = sink;
    }
  }
}

// The keys a task's rows see, and its tiles (TaskKeys).
TaskKeys task_keys(const Geometry& g, int64_t b, int64_t i0, int64_t bq, int64_t kb, int64_t ke) {
  const tessera_attention_desc& d = g.d;
  TaskKeys t;
  t.valid = valid_len(d, b);
  visible_range(d, t.valid, position(d, t.valid, i0), t.lo_first, t.hi_first);
  visible_range(d, t.valid, position(d, t.valid, i0 + bq - 1), t.lo_last, t.hi_last);
  // Tiles sit at kb + t BK whatever the block, and end at min(ke, valid): a row's sums then go
  // through the same tiles, of the same lengths, however the rows are blocked (the block count
  // follows the thread count; the vector sums' order depends on a tile's length). Tiles outside
  // [lo, hi) are invisible to every row of the block and skipped.
  t.lo = kb + (std::max(kb, std::min(t.lo_first, t.lo_last)) - kb) / kBK * kBK;
  t.end = std::min(ke, t.valid);
  // A window can start past the valid keys (visible_range then gives an empty [lo, lo)): no
  // tile past `end` is visited, where it once made an empty tile and a division by zero.
  t.hi = std::min(t.end, std::max(t.hi_first, t.hi_last));
  return t;
}

}  // namespace tessera::detail::fa
