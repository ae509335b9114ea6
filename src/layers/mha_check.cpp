// Checks of the multi-head attention layer's descriptor and arrays (mha_check.hpp).
#include "layers/mha_check.hpp"

#include "attention/attention_check.hpp"
#include "attention/rope.hpp"
#include "layers/mha_paged.hpp"
#include "layers/mha_ring.hpp"
#include "runtime/arith.hpp"
#include "runtime/dispatch.hpp"

namespace tessera::detail {
namespace {

DType cache_type(const MhaDesc& d) { return DType(d.cache_type); }

Status counts_of(const MhaDesc& d, MhaCounts& c) {
  TESSERA_CHECK(checked_count("desc->q_heads", {d.q_heads, d.head_dim}, c.qd));
  TESSERA_CHECK(checked_count("desc->kv_heads", {d.kv_heads, d.head_dim}, c.kd));
  TESSERA_CHECK(checked_count("desc->kv_heads", {d.kv_heads, d.value_dim}, c.vd));
  TESSERA_CHECK(checked_count("desc->w_q", {d.q_in_dim, c.qd}, c.w_q));
  TESSERA_CHECK(checked_count("desc->w_k", {d.kv_in_dim, c.kd}, c.w_k));
  TESSERA_CHECK(checked_count("desc->w_v", {d.kv_in_dim, c.vd}, c.w_v));
  TESSERA_CHECK(checked_count("desc->w_o", {d.q_heads, d.value_dim, d.out_dim}, c.w_o));
  TESSERA_CHECK(checked_count("x_q", {d.batch, d.q_len, d.q_in_dim}, c.x_q));
  TESSERA_CHECK(checked_count("x_kv", {d.batch, d.kv_len, d.kv_in_dim}, c.x_kv));
  TESSERA_CHECK(checked_count("out", {d.batch, d.q_len, d.out_dim}, c.out));
  TESSERA_CHECK(checked_count("desc->q_len", {d.batch, d.q_len, c.qd}, c.q));
  TESSERA_CHECK(checked_count("desc->q_len", {d.batch, d.q_len, d.q_heads, d.value_dim}, c.o));
  if (d.lse) TESSERA_CHECK(checked_count("desc->lse", {d.batch, d.q_heads, d.q_len}, c.lse));
  // One sequence's extents, the attention's batch strides: in range even when batch is 0.
  int64_t per_sequence;
  TESSERA_CHECK(checked_count("desc->q_len", {d.q_len, d.q_heads, d.head_dim}, per_sequence));
  TESSERA_CHECK(checked_count("desc->q_len", {d.q_len, d.q_heads, d.value_dim}, per_sequence));
  TESSERA_CHECK(checked_count("desc->kv_len", {d.kv_len, c.kd}, per_sequence));
  TESSERA_CHECK(checked_count("desc->kv_len", {d.kv_len, c.vd}, per_sequence));
  if (paged_on(d)) {  // the pool: heads x pages x page_size rows
    TESSERA_CHECK(checked_count("desc->num_pages", {d.num_pages, d.page_size, c.kd}, c.cache_k));
    TESSERA_CHECK(checked_count("desc->num_pages", {d.num_pages, d.page_size, c.vd}, c.cache_v));
    c.paged_lens = d.batch;
  } else if (d.k_cache) {
    TESSERA_CHECK(checked_count("desc->cache_capacity", {d.cache_capacity, c.kd}, per_sequence));
    TESSERA_CHECK(checked_count("desc->cache_capacity", {d.cache_capacity, c.vd}, per_sequence));
    TESSERA_CHECK(
        checked_count("desc->cache_capacity", {d.batch, d.cache_capacity, c.kd}, c.cache_k));
    TESSERA_CHECK(
        checked_count("desc->cache_capacity", {d.batch, d.cache_capacity, c.vd}, c.cache_v));
  }
  TESSERA_CHECK(checked_count("desc->kv_len", {d.batch, d.kv_len, c.kd}, c.kv_k));
  TESSERA_CHECK(checked_count("desc->kv_len", {d.batch, d.kv_len, c.vd}, c.kv_v));
  if (d.k_cache) {  // the saved rows' bytes, in floats
    c.save_k = (storage_bytes(cache_type(d), c.kv_k) + 3) / 4;
    c.save_v = (storage_bytes(cache_type(d), c.kv_v) + 3) / 4;
  }
  if (ring_on(d)) {
    int64_t bytes;
    TESSERA_CHECK(checked_count("desc->cache_capacity", {d.q_len, d.cache_capacity}, bytes));
    c.ring_mask = (ring_mask_bytes(d) + 3) / 4;
  }
  if (mha_workspace_bytes(c) == 0)
    return fail(Status::invalid_argument,
                "desc: the workspace (%lld + %lld floats and more) does not fit in size_t",
                (long long)c.q, (long long)c.o);
  return Status::ok;
}

Status check_layer_fields(const MhaDesc& d) {
  TESSERA_CHECK(check_positive("desc->q_in_dim", d.q_in_dim));
  TESSERA_CHECK(check_positive("desc->kv_in_dim", d.kv_in_dim));
  TESSERA_CHECK(check_positive("desc->out_dim", d.out_dim));
  TESSERA_CHECK(check_positive("desc->q_heads", d.q_heads));
  TESSERA_CHECK(check_positive("desc->kv_heads", d.kv_heads));
  TESSERA_CHECK(check_positive("desc->head_dim", d.head_dim));
  TESSERA_CHECK(check_positive("desc->value_dim", d.value_dim));
  if (d.q_heads % d.kv_heads != 0)
    return fail(Status::invalid_argument,
                "desc->q_heads = %lld is not a multiple of kv_heads = %lld", (long long)d.q_heads,
                (long long)d.kv_heads);
  const DType wt = DType(d.weight_type);
  TESSERA_CHECK(check_storage_type("desc->weight_type", wt));
  if (!is_block(wt)) return Status::ok;
  // Block-type weights are stored out x in, their blocks along in (tessera.h).
  TESSERA_CHECK(check_block_kernels("desc->weight_type", wt, active_table()));
  TESSERA_CHECK(check_blocks("desc->q_in_dim", d.q_in_dim, wt));
  TESSERA_CHECK(check_blocks("desc->kv_in_dim", d.kv_in_dim, wt));
  return check_blocks("desc->q_heads * value_dim", d.q_heads * d.value_dim, wt);
}

// Rotary embeddings: the queries are the new tokens, each at a position below 2^53.
Status check_mha_rope(const MhaDesc& d) {
  TESSERA_CHECK(check_rope("desc->", d.rope, d.head_dim));
  if (d.rope.style == TESSERA_ROPE_NONE) return Status::ok;
  if (d.q_len != d.kv_len)
    return fail(Status::invalid_argument,
                "desc->q_len = %lld must equal kv_len = %lld with rope (the new tokens' positions)",
                (long long)d.q_len, (long long)d.kv_len);
  constexpr int64_t kLimit = int64_t(1) << 53;
  const int64_t first = paged_on(d) ? paged_longest(d) : d.k_cache ? d.cache_len : 0;
  if (d.rope_positions == nullptr && d.kv_len > kLimit - first)
    return fail(Status::invalid_argument, "desc->%s = %lld: positions past 2^53",
                paged_on(d) ? "cache_lens" : "cache_len", (long long)first);
  if (d.rope_positions)
    for (int64_t t = 0; t < d.batch * d.kv_len; ++t)
      if (d.rope_positions[t] < 0 || d.rope_positions[t] >= kLimit)
        return fail(Status::invalid_argument,
                    "desc->rope_positions[%lld] = %lld must be in [0, 2^53)", (long long)t,
                    (long long)d.rope_positions[t]);
  return Status::ok;
}

}  // namespace

size_t mha_workspace_bytes(const MhaCounts& c) {
  uint64_t total = kLineBytes;
  for (int64_t floats :
       {c.q, c.kv_k, c.kv_v, c.o, c.lse, c.save_k, c.save_v, c.ring_mask, c.paged_lens})
    total += (uint64_t(floats) * 4 + kLineBytes - 1) / kLineBytes *
             kLineBytes;  // each < 2^63 / 4: no wrap
  return total <= SIZE_MAX ? size_t(total) : 0;
}

tessera_attention_desc mha_attention_desc(const MhaDesc& d) {
  const int64_t B = d.batch, Lq = d.q_len, Lkv = d.kv_len, D = d.head_dim, Dv = d.value_dim;
  const int64_t Hq = d.q_heads, Hk = d.kv_heads, cap = d.cache_capacity;
  tessera_attention_desc a{};
  a.batch = B, a.q_heads = Hq, a.kv_heads = Hk, a.q_len = Lq, a.head_dim = D, a.value_dim = Dv;
  a.kv_len = d.k_cache ? d.cache_len + Lkv : Lkv;
  // Queries and outputs are [batch][seq][head][dim] rows of the projection GEMMs; so are keys
  // and values without a cache; with one they are the cache's [batch][head][capacity][dim].
  a.q_stride[0] = Lq * Hq * D, a.q_stride[1] = D, a.q_stride[2] = Hq * D;
  a.o_stride[0] = Lq * Hq * Dv, a.o_stride[1] = Dv, a.o_stride[2] = Hq * Dv;
  if (d.k_cache) {
    a.k_stride[0] = Hk * cap * D, a.k_stride[1] = cap * D, a.k_stride[2] = D;
    a.v_stride[0] = Hk * cap * Dv, a.v_stride[1] = cap * Dv, a.v_stride[2] = Dv;
    a.k_type = a.v_type = d.cache_type;
  } else {
    a.k_stride[0] = Lkv * Hk * D, a.k_stride[1] = D, a.k_stride[2] = Hk * D;
    a.v_stride[0] = Lkv * Hk * Dv, a.v_stride[1] = Dv, a.v_stride[2] = Hk * Dv;
    a.k_type = a.v_type = TESSERA_F32;
  }
  a.scale = d.scale, a.causal = d.causal, a.align = d.align;
  a.window_left = d.window_left, a.window_right = d.window_right;
  a.kv_lens = d.kv_lens;
  a.bias = d.bias, a.mask = d.mask;
  for (int i = 0; i < 4; ++i)
    a.bias_stride[i] = d.bias_stride[i], a.mask_stride[i] = d.mask_stride[i];
  a.alibi_slopes = d.alibi_slopes, a.softcap = d.softcap;
  a.lse = d.lse;
  a.hadamard = d.hadamard, a.hadamard_v = d.hadamard_v;
  a.sinks = d.sinks;
  if (ring_on(d)) ring_attention(d, nullptr, a);    // (the call's mask is set where it is built)
  if (paged_on(d)) paged_attention(d, nullptr, a);  // (and the kv_lens)
  return a;
}

Status check_mha(const MhaDesc& d, bool weights, MhaCounts& c) {
  TESSERA_CHECK(check_nonneg("desc->batch", d.batch));
  TESSERA_CHECK(check_nonneg("desc->q_len", d.q_len));
  TESSERA_CHECK(check_nonneg("desc->kv_len", d.kv_len));
  TESSERA_CHECK(check_layer_fields(d));
  TESSERA_CHECK(check_storage_type("desc->cache_type", cache_type(d)));
  if (d.k_cache)
    TESSERA_CHECK(check_block_kernels("desc->cache_type", cache_type(d), active_table()));
  if (weights) {
    TESSERA_CHECK(check_ptr("desc->w_q", d.w_q, true));
    TESSERA_CHECK(check_ptr("desc->w_k", d.w_k, true));
    TESSERA_CHECK(check_ptr("desc->w_v", d.w_v, true));
    TESSERA_CHECK(check_ptr("desc->w_o", d.w_o, true));
  }
  if ((d.k_cache == nullptr) != (d.v_cache == nullptr))
    return fail(Status::invalid_argument, "%s is NULL but %s is set (both or neither)",
                d.k_cache ? "desc->v_cache" : "desc->k_cache",
                d.k_cache ? "desc->k_cache" : "desc->v_cache");
  TESSERA_CHECK(check_mha_ring(d));
  TESSERA_CHECK(check_mha_paged(d));
  if (d.k_cache && !paged_on(d)) {
    TESSERA_CHECK(check_nonneg("desc->cache_len", d.cache_len));
    int64_t needed;
    if (!add_ok(d.cache_len, d.kv_len, needed) || (!ring_on(d) && d.cache_capacity < needed))
      return fail(Status::invalid_argument,
                  "desc->cache_capacity = %lld cannot hold cache_len = %lld + kv_len = %lld",
                  (long long)d.cache_capacity, (long long)d.cache_len, (long long)d.kv_len);
  }
  TESSERA_CHECK(counts_of(d, c));
  TESSERA_CHECK(check_mha_rope(d));
  // The options, as the attention beneath checks them (names are the attention desc's fields,
  // which are this desc's): before anything is written.
  const tessera_attention_desc a = mha_attention_desc(d);
  TESSERA_CHECK(check_attention(a, nullptr, nullptr, nullptr, nullptr, false));
  const int64_t extents[4] = {a.batch, a.q_heads, a.q_len, a.kv_len};
  if (d.bias) TESSERA_CHECK(tensor_span("desc->bias", d.bias_stride, extents, 4, 4, c.bias));
  if (d.mask) TESSERA_CHECK(tensor_span("desc->mask", d.mask_stride, extents, 4, 1, c.mask));
  return Status::ok;
}

Status check_mha_aliasing(const MhaDesc& d, const MhaCounts& c, const float* x_q, const float* x_k,
                          const float* x_v, const float* out, const void* workspace,
                          size_t workspace_bytes) {
  const DType wt = DType(d.weight_type);
  const auto weights = [&](const char* name, const void* p, int64_t count) {
    return region(name, p, storage_bytes(wt, count), 1);
  };
  const bool shared = x_k == x_v;
  const Region in[] = {
      region("x_q", x_q, c.x_q, 4),
      region(shared ? "x_kv" : "x_k", x_k, c.x_kv, 4),
      region(shared ? "x_kv" : "x_v", x_v, c.x_kv, 4),
      weights("desc->w_q", d.w_q, c.w_q),
      region("desc->b_q", d.b_q, d.b_q ? c.qd : 0, 4),
      weights("desc->w_k", d.w_k, c.w_k),
      region("desc->b_k", d.b_k, d.b_k ? c.kd : 0, 4),
      weights("desc->w_v", d.w_v, c.w_v),
      region("desc->b_v", d.b_v, d.b_v ? c.vd : 0, 4),
      weights("desc->w_o", d.w_o, c.w_o),
      region("desc->b_o", d.b_o, d.b_o ? d.out_dim : 0, 4),
      region("desc->kv_lens", d.kv_lens, d.kv_lens ? d.batch : 0, 4),
      region("desc->cache_lens", d.cache_lens, paged_on(d) ? d.batch : 0, 4),
      region("desc->block_table", d.block_table, paged_table_entries(d), 4),
      region("desc->bias", d.bias, c.bias, 4),
      region("desc->mask", d.mask, c.mask, 1),
      region("desc->alibi_slopes", d.alibi_slopes, d.alibi_slopes ? d.q_heads : 0, 4),
      region("desc->sinks", d.sinks, d.sinks ? d.q_heads : 0, 4),
      region("desc->rope_positions", d.rope_positions,
             d.rope_positions && d.rope.style != TESSERA_ROPE_NONE ? d.batch * d.kv_len : 0, 8)};
  const Region outputs[] = {
      region("out", out, c.out, 4), region("desc->lse", d.lse, c.lse, 4),
      region("desc->k_cache", d.k_cache, storage_bytes(cache_type(d), c.cache_k), 1),
      region("desc->v_cache", d.v_cache, storage_bytes(cache_type(d), c.cache_v), 1),
      region("workspace", workspace, int64_t(workspace ? workspace_bytes : 0), 1)};
  constexpr size_t n = sizeof outputs / sizeof outputs[0];
  for (size_t i = 0; i < n; ++i) {
    for (const Region& r : in) TESSERA_CHECK(check_disjoint(outputs[i], {r}));
    for (size_t j = i + 1; j < n; ++j) TESSERA_CHECK(check_disjoint(outputs[i], {outputs[j]}));
  }
  return Status::ok;
}

}  // namespace tessera::detail
