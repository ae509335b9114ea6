// Attention driver: descriptor checks, then the fused kernels of the active table.
#include "tessera/attention.hpp"

#include "attention_check.hpp"
#include "flash_attention.hpp"

namespace tessera {

Status attention_desc_init(AttentionDesc& d, int64_t batch, int64_t q_heads, int64_t kv_heads,
                           int64_t q_len, int64_t kv_len, int64_t head_dim, int64_t value_dim) {
  AttentionDesc n{};
  n.batch = batch;
  n.q_heads = q_heads;
  n.kv_heads = kv_heads;
  n.q_len = q_len;
  n.kv_len = kv_len;
  n.head_dim = head_dim;
  n.value_dim = value_dim;
  // Packed [batch][head][seq][dim].
  auto bhsd = [](int64_t* s, int64_t heads, int64_t len, int64_t dim) {
    s[2] = dim;
    s[1] = len * dim;
    s[0] = heads * len * dim;
  };
  bhsd(n.q_stride, q_heads, q_len, head_dim);
  bhsd(n.k_stride, kv_heads, kv_len, head_dim);
  bhsd(n.v_stride, kv_heads, kv_len, value_dim);
  bhsd(n.o_stride, q_heads, q_len, value_dim);
  n.align = TESSERA_ALIGN_TOP_LEFT;
  n.window_left = n.window_right = -1;
  // The sizes obey the rules attention() applies (tensors are not known yet: stand-ins).
  const float stand_in = 0.0f;
  TESSERA_CHECK(detail::check_attention(n, &stand_in, &stand_in, &stand_in, &stand_in));
  d = n;
  return Status::ok;
}

Status attention(const AttentionDesc& d, const float* q, const float* k, const float* v, float* o) {
  TESSERA_CHECK(detail::check_attention(d, q, k, v, o));
  if (d.batch == 0 || d.q_len == 0) return Status::ok;
  return detail::flash_attention(d, q, k, v, o);
}

}  // namespace tessera
