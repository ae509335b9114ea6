// Validation of a tessera_mha_desc and its arrays, shared by the one-shot layer and the prepared
// one; and the workspace layout both carve.
#pragma once

#include "runtime/check.hpp"
#include "tessera/layers.hpp"

namespace tessera::detail {

// Element counts of every array the layer reads or writes, each a checked product.
struct MhaCounts {
  int64_t x_q = 0, x_kv = 0, out = 0;
  int64_t w_q = 0, w_k = 0, w_v = 0, w_o = 0;  // weights
  int64_t qd = 0, kd = 0, vd = 0;              // projection widths: heads x dim (bias lengths)
  int64_t cache_k = 0, cache_v = 0;
  int64_t bias = 0, mask = 0, lse = 0;  // spans of the attention options
  // Workspace buffers: the projections of Q, K and V, attention's output and lse; with a cache,
  // a copy of the cache rows the call overwrites (floats enough for their bytes), put back if
  // it fails.
  int64_t q = 0, kv_k = 0, kv_v = 0, o = 0, save_k = 0, save_v = 0;
  int64_t ring_mask = 0;   // a ring cache's keep-mask (floats enough for its bytes)
  int64_t paged_lens = 0;  // a paged cache's kv_lens (batch int32)
};

// The attention the layer runs: shapes, options, BSHD strides over the workspace's projections
// (or the cache's), element types.
tessera_attention_desc mha_attention_desc(const MhaDesc& d);

// Checks desc (weights = false: a prepared layer's call, whose weight pointers are not read) and
// fills the counts.
Status check_mha(const MhaDesc& d, bool weights, MhaCounts& c);

// The workspace's bytes, or 0 when they do not fit in size_t (32-bit targets).
size_t mha_workspace_bytes(const MhaCounts& c);

// No output (out, lse, the caches, the workspace) may share memory with another argument;
// inputs (x_q, x_k, x_v, weights, options) may share memory with each other.
Status check_mha_aliasing(const MhaDesc& d, const MhaCounts& c, const float* x_q, const float* x_k,
                          const float* x_v, const float* out, const void* workspace,
                          size_t workspace_bytes);

}  // namespace tessera::detail
