// Attention driver: descriptor checks, then the fused kernels of the active table.
#include "tessera/attention.hpp"
#include "threading.hpp"

#include "attention_check.hpp"
#include "flash_attention.hpp"

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

Status attention(const AttentionDesc& d, const float* q, const float* k, const float* v, float* o) {
  return detail::in_arena([&] {
    TESSERA_CHECK(detail::check_attention(d, q, k, v, o));
    if (d.batch == 0 || d.q_len == 0 || d.q_heads == 0) return Status::ok;
    return detail::flash_attention(d, q, k, v, o);
  });
}

}  // namespace tessera
