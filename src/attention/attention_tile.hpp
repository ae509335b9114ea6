// Fused attention's work unit, shared by its drivers (flash_attention.cpp): the geometry of a
// call, one task's tile state (attention_tile.cpp), the key loop over K/V tiles in its named
// steps (key_loop.cpp) and the structural masking of diagonal tiles (attention_masks.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "arch/kernels.hpp"
#include "runtime/arith.hpp"
#include "tessera/attention.hpp"

namespace tessera::detail::fa {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kBK = arch::kAttentionBK;  // keys per tile
// Keys per block of a decode tile's K and V: a block stays in L1 across the calls that pass it
// (8 KB of 16-bit rows at d = 128, read in place; 16 KB of float32, or of 16-bit rows widened
// into L1 where the rows are too many for the widening kernels).
constexpr int64_t kDecodeKeys = 32;

struct Geometry {
  const tessera_attention_desc& d;
  int64_t group;  // query heads per KV head
  float scale;
  bool elementwise;          // bias, mask, ALiBi or softcap: every tile needs the per-element pass
  bool prefetch_kv = false;  // the plan's (decode: K and V come from memory)
  bool prefetch_l1 = false;  // the plan's (a task's heads' page runs are short: into L1)
  int64_t page_group = 1;    // the plan's (pages whose runs a task's heads read together)
};

// A block type (q8_0, q4_0) K: the scores use the queries rounded to q8_0 on every path (the
// integer dot kernels' operand on few rows; dequantized again for the packed products).
inline bool quantized_keys(const tessera_attention_desc& d) {
  return d.k_type == TESSERA_Q8_0 || d.k_type == TESSERA_Q4_0;
}

// Few stacked rows (decode): S by dot products with K and Q read in place (Q is not packed),
// P V with V read in place.
inline bool few_rows(const arch::GemmKernels& gk, int64_t rows) { return rows <= 2 * gk.dot_rows; }

inline int64_t valid_len(const tessera_attention_desc& d, int64_t b) {
  return d.kv_lens ? d.kv_lens[b] : d.kv_len;
}

// Position of query i (see tessera_align).
inline int64_t position(const tessera_attention_desc& d, int64_t valid, int64_t i) {
  return d.align == TESSERA_ALIGN_BOTTOM_RIGHT ? i + valid - d.q_len : i;
}

// Keys [lo, hi) that query position p may see by the structural rules (length, causal, window).
inline void visible_range(const tessera_attention_desc& d, int64_t valid, int64_t p, int64_t& lo,
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
  float* kp;        // one K tile packed as K^T panels (D x NR each): keys are the SIMD lanes
  float* vp;        // a partial last V panel, zero-padded to NR columns
  float* kw;        // a f16/bf16 K tile widened to float32 (BK x D), else unused
  float* vw;        // a f16/bf16 V tile widened to float32 (BK x Dv), else unused
  float* s;         // rows x BK, scores then probabilities
  float* o;         // rows x Dv, the unnormalised output
  float* m;         // rows
  float* l;         // rows
  float* tile_m;    // rows: the running max after the current tile
  float* tile_l;    // rows: the current tile's sum of exps
  float* qd;        // a quantized K: the queries' q8_0 scales (rows x D / 32), widened
  int8_t* qq;       // and their int8 (rows x D)
  int32_t* qsum;    // and the sum of each block's int8 (rows x D / 32; few rows only)
  int64_t* extent;  // per Q panel: the current tile's keys [k0, k1) its rows may see
  int64_t* window;  // per softmax chunk of rows: the keys of the tile it reads
  uint8_t* o_live;  // per Q panel: whether its O rows hold anything yet
};

// ---- attention_masks.cpp: the diagonal tiles ------------------------------------------------

// Applies masks and score modifications to the tile S (see there).
void mask_tile(const Geometry& g, int64_t b, int64_t hk, int64_t i0, int64_t bq, int64_t j0,
               int64_t n, int64_t valid, const arch::SoftmaxKernels& sk, const int64_t* window,
               int64_t chunk, float* s, int64_t lds);

// The keys any of the task's rows can see (positions grow with i, so the block's first and last
// rows bound the union), and the tiles that hold them.
struct TaskKeys {
  int64_t valid, lo_first, hi_first, lo_last, hi_last;
  int64_t lo, end, hi;  // tiles start at lo, stop before hi; none reads past end
  // A tile every row sees whole needs no per-element pass and no extents.
  bool whole(int64_t j0, int64_t n) const {
    return j0 >= std::max(lo_first, lo_last) && j0 + n <= std::min(hi_first, hi_last);
  }
};

TaskKeys task_keys(const Geometry& g, int64_t b, int64_t i0, int64_t bq, int64_t kb, int64_t ke);

// The keys of the tile the stacked rows [r0, r1) may see by the structural rules.
void panel_extent(const tessera_attention_desc& d, int64_t valid, int64_t i0, int64_t bq,
                  int64_t r0, int64_t r1, int64_t j0, int64_t n, int64_t& k0, int64_t& k1);

// Rows per softmax chunk: whole Q panels and whole row groups of the softmax kernels.
int64_t softmax_chunk(const arch::KernelTable& kt);

// The keys [w0, w1) of the tile each chunk of rows reads (see there).
void tile_windows(const arch::KernelTable& kt, int64_t rows, int64_t n, bool whole,
                  const int64_t* extent, int64_t* window);

// The softmax step of a diagonal tile, chunk by chunk over its windows.
void diagonal_tile_rows(const arch::KernelTable& kt, int64_t rows, const int64_t* window,
                        TileState& st);

// ---- key_loop.cpp ----------------------------------------------------------------------------

// KV heads one task may take together (decode over pages that hold their heads side by side).
constexpr int64_t kMaxTaskHeads = 8;
// Pages whose runs a task's heads read as a group (AttentionPlan::page_group).
constexpr int64_t kMaxPageGroup = 8;

// The key loop over [kb, ke) for one task of `heads` KV heads from hk (one unless few rows,
// at most kMaxTaskHeads); updates st[h] (m, l, o) for rows = group x bq. k and v hold elements
// of d.k_type and d.v_type.
void key_loop(const Geometry& g, const arch::KernelTable& kt, int64_t b, int64_t hk, int64_t heads,
              int64_t i0, int64_t bq, int64_t kb, int64_t ke, const void* k, const void* v,
              TileState* st);

// ---- attention_tile.cpp: one task's state, queries and results --------------------------------

// The floats of one task's state for `rows` stacked rows, and the state laid out in them
// (`merged`: the decode merge reads every row's O, so it starts at zero).
size_t state_floats(const tessera_attention_desc& d, const arch::KernelTable& kt, int64_t rows);
void carve_state(float* p, const tessera_attention_desc& d, const arch::KernelTable& kt,
                 int64_t rows, bool merged, TileState& st);

// The task's queries where key_loop reads them.
void stage_queries(const tessera_attention_desc& d, const Geometry& g, const arch::KernelTable& kt,
                   const float* q, int64_t b, int64_t hk, int64_t i0, int64_t bq, TileState& st);

// O / l and lse for every row of a finished task.
void finish_rows(const Geometry& g, const arch::SoftmaxKernels& sk, int64_t b, int64_t hk,
                 int64_t i0, int64_t bq, const TileState& st, float* o);

}  // namespace tessera::detail::fa
