// The ring cache's slots, checks and keep-mask (mha_ring.hpp).
#include "layers/mha_ring.hpp"

#include <algorithm>

namespace tessera::detail {
namespace {

int64_t ring_rows(const MhaDesc& d) { return d.cache_capacity - d.ring_keep; }

// The position the row in slot s holds once `total` tokens are in, or -1 for an empty slot.
int64_t position_in(const MhaDesc& d, int64_t s, int64_t total) {
  if (s < d.ring_keep) return s < total ? s : -1;
  const int64_t r = s - d.ring_keep, R = ring_rows(d), last = total - 1 - d.ring_keep - r;
  return last < 0 ? -1 : d.ring_keep + r + last / R * R;
}

}  // namespace

Status check_mha_ring(const MhaDesc& d) {
  if (d.ring_window == 0) return Status::ok;
  if (d.ring_window < 0)
    return fail(Status::invalid_argument, "desc->ring_window = %lld must be >= 0",
                (long long)d.ring_window);
  if (d.k_cache == nullptr)
    return fail(Status::invalid_argument, "desc->ring_window = %lld needs a cache (k_cache)",
                (long long)d.ring_window);
  TESSERA_CHECK(check_nonneg("desc->ring_keep", d.ring_keep));
  if (d.cache_capacity - d.ring_keep < d.ring_window || d.ring_keep > d.cache_capacity)
    return fail(Status::invalid_argument,
                "desc->cache_capacity = %lld cannot hold ring_keep = %lld + ring_window = %lld",
                (long long)d.cache_capacity, (long long)d.ring_keep, (long long)d.ring_window);
  if (d.q_len != d.kv_len)
    return fail(Status::invalid_argument,
                "desc->q_len = %lld must equal kv_len = %lld with a ring (the new tokens)",
                (long long)d.q_len, (long long)d.kv_len);
  // Query i of the call needs the positions from cache_len + i - window + 1 on; the call's
  // rows overwrite up to cache_len + kv_len - 1 - R.
  const int64_t most = ring_rows(d) - d.ring_window + 1;
  if (d.kv_len > most)
    return fail(Status::invalid_argument,
                "desc->kv_len = %lld: a ring of %lld rows and window %lld takes at most %lld "
                "new tokens a call",
                (long long)d.kv_len, (long long)ring_rows(d), (long long)d.ring_window,
                (long long)most);
  if (d.causal != 1)
    return fail(Status::invalid_argument, "desc->causal = %d must be 1 with a ring", d.causal);
  if (d.window_left != -1 || d.window_right != -1)
    return fail(Status::invalid_argument,
                "desc->window_left = %lld, window_right = %lld must be -1 with a ring (its "
                "window is ring_window)",
                (long long)d.window_left, (long long)d.window_right);
  // Options that index keys by their place in the sequence, which the ring reorders.
  const char* by_index = d.kv_lens        ? "kv_lens"
                         : d.bias         ? "bias"
                         : d.mask         ? "mask"
                         : d.alibi_slopes ? "alibi_slopes"
                                          : nullptr;
  if (by_index)
    return fail(Status::invalid_argument, "desc->%s must be NULL with a ring", by_index);
  return Status::ok;
}

int64_t ring_slot(const MhaDesc& d, int64_t p) {
  return p < d.ring_keep ? p : d.ring_keep + (p - d.ring_keep) % ring_rows(d);
}

int64_t ring_mask_bytes(const MhaDesc& d) {
  const bool all_visible = d.q_len <= 1 && ring_rows(d) == d.ring_window;
  return all_visible ? 0 : d.q_len * d.cache_capacity;
}

void ring_attention(const MhaDesc& d, const uint8_t* mask, tessera_attention_desc& a) {
  a.kv_len = std::min(d.cache_len + d.kv_len, d.cache_capacity);
  a.causal = 0, a.window_left = a.window_right = -1;
  a.mask = mask;
  a.mask_stride[0] = a.mask_stride[1] = 0, a.mask_stride[2] = d.cache_capacity;
  a.mask_stride[3] = 1;
}

void ring_mask(const MhaDesc& d, uint8_t* mask) {
  const int64_t total = d.cache_len + d.kv_len, cap = d.cache_capacity;
  for (int64_t i = 0; i < d.q_len; ++i) {
    const int64_t P = d.cache_len + i;
    for (int64_t s = 0; s < cap; ++s) {
      const int64_t p = position_in(d, s, total);
      mask[i * cap + s] = p >= 0 && p <= P && (p < d.ring_keep || p > P - d.ring_window);
    }
  }
}

}  // namespace tessera::detail
