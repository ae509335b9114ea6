#include "attention_check.hpp"

namespace tessera::detail {
namespace {

Status check_strides(const char* name, const int64_t* strides, int count) {
  for (int i = 0; i < count; ++i) {
    if (strides[i] < 0)
      return fail(Status::invalid_argument, "%s[%d] = %lld must be >= 0", name, i,
                  (long long)strides[i]);
  }
  return Status::ok;
}

}  // namespace

Status check_attention(const tessera_attention_desc& d, const float* q, const float* k,
                       const float* v, const float* o) {
  TESSERA_CHECK(check_nonneg("desc->batch", d.batch));
  TESSERA_CHECK(check_positive("desc->q_heads", d.q_heads));
  TESSERA_CHECK(check_positive("desc->kv_heads", d.kv_heads));
  TESSERA_CHECK(check_nonneg("desc->q_len", d.q_len));
  TESSERA_CHECK(check_nonneg("desc->kv_len", d.kv_len));
  TESSERA_CHECK(check_positive("desc->head_dim", d.head_dim));
  TESSERA_CHECK(check_positive("desc->value_dim", d.value_dim));
  if (d.q_heads % d.kv_heads != 0)
    return fail(Status::invalid_argument,
                "desc->q_heads = %lld is not a multiple of kv_heads = %lld", (long long)d.q_heads,
                (long long)d.kv_heads);
  TESSERA_CHECK(check_finite("desc->scale", d.scale));
  TESSERA_CHECK(check_strides("desc->q_stride", d.q_stride, 3));
  TESSERA_CHECK(check_strides("desc->k_stride", d.k_stride, 3));
  TESSERA_CHECK(check_strides("desc->v_stride", d.v_stride, 3));
  TESSERA_CHECK(check_strides("desc->o_stride", d.o_stride, 3));
  const int64_t o_strides[4] = {d.o_stride[0], d.o_stride[1], d.o_stride[2], 1};
  const int64_t o_extents[4] = {d.batch, d.q_heads, d.q_len, d.value_dim};
  TESSERA_CHECK(check_no_self_overlap("desc->o_stride", o_strides, o_extents, 4));
  if (d.causal != 0 && d.causal != 1)
    return fail(Status::invalid_argument, "desc->causal = %d must be 0 or 1", d.causal);
  if (d.align != TESSERA_ALIGN_TOP_LEFT && d.align != TESSERA_ALIGN_BOTTOM_RIGHT)
    return fail(Status::invalid_argument, "desc->align = %d is not a tessera_align",
                static_cast<int>(d.align));
  if (d.window_left < -1)
    return fail(Status::invalid_argument, "desc->window_left = %lld must be >= -1",
                (long long)d.window_left);
  if (d.window_right < -1)
    return fail(Status::invalid_argument, "desc->window_right = %lld must be >= -1",
                (long long)d.window_right);
  if (!(d.softcap >= 0.0f) || !std::isfinite(d.softcap))
    return fail(Status::invalid_argument, "desc->softcap = %g must be finite and >= 0", d.softcap);
  if (d.bias) TESSERA_CHECK(check_strides("desc->bias_stride", d.bias_stride, 4));
  if (d.mask) TESSERA_CHECK(check_strides("desc->mask_stride", d.mask_stride, 4));
  if (d.kv_lens) {
    for (int64_t b = 0; b < d.batch; ++b) {
      if (d.kv_lens[b] < 0 || d.kv_lens[b] > d.kv_len)
        return fail(Status::invalid_argument,
                    "desc->kv_lens[%lld] = %d is outside [0, kv_len = %lld]", (long long)b,
                    d.kv_lens[b], (long long)d.kv_len);
    }
  }
  if (d.alibi_slopes) {
    for (int64_t h = 0; h < d.q_heads; ++h) {
      if (!std::isfinite(d.alibi_slopes[h]))
        return fail(Status::invalid_argument, "desc->alibi_slopes[%lld] = %g must be finite",
                    (long long)h, d.alibi_slopes[h]);
    }
  }
  const bool queries = d.batch > 0 && d.q_len > 0;
  TESSERA_CHECK(check_ptr("q", q, queries));
  TESSERA_CHECK(check_ptr("k", k, queries && d.kv_len > 0));
  TESSERA_CHECK(check_ptr("v", v, queries && d.kv_len > 0));
  return check_ptr("o", o, queries);
}

}  // namespace tessera::detail
