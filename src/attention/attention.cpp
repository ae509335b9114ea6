// Attention driver: descriptor checks, then the fused kernels of the active table.
#include "tessera/attention.hpp"
#include "runtime/threading.hpp"

#include <cstdio>

#include "attention/attention_check.hpp"
#include "attention/flash_attention.hpp"
#include "runtime/check.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/verbose.hpp"

namespace tessera {

Status attention_desc_init(AttentionDesc& d, int64_t batch, int64_t q_heads, int64_t kv_heads,
                           int64_t q_len, int64_t kv_len, int64_t head_dim, int64_t value_dim) {
  TESSERA_CHECK(detail::check_nonneg("batch", batch));
  TESSERA_CHECK(detail::check_nonneg("q_heads", q_heads));
  TESSERA_CHECK(detail::check_nonneg("kv_heads", kv_heads));
  TESSERA_CHECK(detail::check_nonneg("q_len", q_len));
  TESSERA_CHECK(detail::check_nonneg("kv_len", kv_len));
  TESSERA_CHECK(detail::check_positive("head_dim", head_dim));
  TESSERA_CHECK(detail::check_positive("value_dim", value_dim));
  AttentionDesc n{};
  n.batch = batch;
  n.q_heads = q_heads;
  n.kv_heads = kv_heads;
  n.q_len = q_len;
  n.kv_len = kv_len;
  n.head_dim = head_dim;
  n.value_dim = value_dim;
  // Packed [batch][head][seq][dim], each stride a checked product.
  auto bhsd = [](const char* name, int64_t* s, int64_t heads, int64_t len, int64_t dim) {
    s[2] = dim;
    if (!detail::mul_ok(len, dim, s[1]) || !detail::mul_ok(heads, s[1], s[0]))
      return detail::fail(Status::invalid_argument, "%s: the packed strides overflow 64 bits",
                          name);
    return Status::ok;
  };
  TESSERA_CHECK(bhsd("q_len", n.q_stride, q_heads, q_len, head_dim));
  TESSERA_CHECK(bhsd("kv_len", n.k_stride, kv_heads, kv_len, head_dim));
  TESSERA_CHECK(bhsd("kv_len", n.v_stride, kv_heads, kv_len, value_dim));
  TESSERA_CHECK(bhsd("q_len", n.o_stride, q_heads, q_len, value_dim));
  n.align = TESSERA_ALIGN_TOP_LEFT;
  n.window_left = n.window_right = -1;
  // The sizes obey the rules attention() applies (the tensors are not known yet).
  TESSERA_CHECK(detail::check_attention(n, nullptr, nullptr, nullptr, nullptr, false));
  d = n;
  return Status::ok;
}

Status attention(const AttentionDesc& d, const float* q, const void* k, const void* v, float* o) {
  return detail::in_arena([&] {
    TESSERA_CHECK(detail::check_attention(d, q, k, v, o));
    TESSERA_CHECK(
        detail::check_block_kernels("desc->k_type", DType(d.k_type), detail::active_table()));
    TESSERA_CHECK(
        detail::check_block_kernels("desc->v_type", DType(d.v_type), detail::active_table()));
    if (d.batch == 0 || d.q_len == 0 || d.q_heads == 0) return Status::ok;
    const detail::Verbose vb;
    const char* rule = "";
    const Status st = detail::flash_attention(d, q, k, v, o, &rule);
    if (vb.on()) {
      char kernels[64];
      // The K and V storage types after the query type, when they are not f32.
      if (d.k_type == TESSERA_F32 && d.v_type == TESSERA_F32)
        std::snprintf(kernels, sizeof kernels, "f32_flash_attention_%s",
                      detail::active_table().name);
      else
        std::snprintf(kernels, sizeof kernels, "f32_%s_%s_flash_attention_%s",
                      detail::dtype_name(DType(d.k_type)), detail::dtype_name(DType(d.v_type)),
                      detail::active_table().name);
      vb.print("attention", st, rule, kernels, tbb::this_task_arena::max_concurrency(),
               "batch:%lld heads:%lld/%lld q:%lld kv:%lld d:%lld dv:%lld causal:%d mask:%s",
               (long long)d.batch, (long long)d.q_heads, (long long)d.kv_heads, (long long)d.q_len,
               (long long)d.kv_len, (long long)d.head_dim, (long long)d.value_dim, int(d.causal),
               d.mask           ? "bool"
               : d.bias         ? "bias"
               : d.alibi_slopes ? "alibi"
                                : "none");
    }
    return st;
  });
}

}  // namespace tessera
