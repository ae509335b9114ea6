// The paged cache's checks, rows and attention (mha_paged.hpp).
#include "layers/mha_paged.hpp"

#include <algorithm>
#include <climits>

#include "attention/attention_check.hpp"

namespace tessera::detail {

Status check_mha_paged(const MhaDesc& d) {
  if (d.block_table == nullptr) return Status::ok;
  if (d.k_cache == nullptr)
    return fail(Status::invalid_argument, "desc->block_table needs a cache (k_cache)");
  TESSERA_CHECK(check_page_pool(d.page_size, d.num_pages));
  TESSERA_CHECK(check_nonneg("desc->block_table_stride", d.block_table_stride));
  int64_t capacity;  // rows a sequence's table can address
  if (!mul_ok(d.block_table_stride, d.page_size, capacity))
    return fail(Status::invalid_argument, "desc->block_table_stride = %lld: the rows overflow",
                (long long)d.block_table_stride);
  if (d.ring_window > 0)
    return fail(Status::invalid_argument, "desc->ring_window = %lld with a paged cache",
                (long long)d.ring_window);
  if (d.kv_lens)
    return fail(Status::invalid_argument,
                "desc->kv_lens with a paged cache (the lengths are cache_lens + kv_len)");
  TESSERA_CHECK(check_ptr("desc->cache_lens", d.cache_lens, d.batch > 0));
  for (int64_t b = 0; b < d.batch; ++b) {
    const int64_t held = d.cache_lens[b];
    if (held < 0 || held > capacity - d.kv_len || held > INT32_MAX - d.kv_len)
      return fail(Status::invalid_argument,
                  "desc->cache_lens[%lld] = %lld + kv_len = %lld is outside the %lld rows of "
                  "block_table_stride = %lld pages",
                  (long long)b, (long long)held, (long long)d.kv_len, (long long)capacity,
                  (long long)d.block_table_stride);
    const int64_t pages = (held + d.kv_len + d.page_size - 1) / d.page_size;
    for (int64_t i = 0; i < pages; ++i) {
      const int64_t at = b * d.block_table_stride + i;
      if (d.block_table[at] < 0 || d.block_table[at] >= d.num_pages)
        return fail(Status::invalid_argument,
                    "desc->block_table[%lld] = %d (sequence %lld, page %lld) is outside [0, "
                    "num_pages = %lld)",
                    (long long)at, d.block_table[at], (long long)b, (long long)i,
                    (long long)d.num_pages);
    }
  }
  return Status::ok;
}

int64_t paged_longest(const MhaDesc& d) {
  int64_t longest = 0;
  for (int64_t b = 0; d.cache_lens && b < d.batch; ++b)
    longest = std::max<int64_t>(longest, d.cache_lens[b]);
  return longest;
}

int64_t paged_table_entries(const MhaDesc& d) {
  if (!paged_on(d) || d.batch == 0) return 0;
  return (d.batch - 1) * d.block_table_stride +
         (paged_longest(d) + d.kv_len + d.page_size - 1) / d.page_size;
}

int64_t paged_row(const MhaDesc& d, int64_t b, int64_t hk, int64_t p) {
  const int64_t page = d.block_table[b * d.block_table_stride + p / d.page_size];
  return (hk * d.num_pages + page) * d.page_size + p % d.page_size;
}

void paged_attention(const MhaDesc& d, int32_t* kv_lens, tessera_attention_desc& a) {
  const int64_t P = d.page_size, N = d.num_pages, D = d.head_dim, Dv = d.value_dim;
  a.kv_len = paged_longest(d) + d.kv_len;
  a.k_stride[0] = P * D, a.k_stride[1] = N * P * D, a.k_stride[2] = D;
  a.v_stride[0] = P * Dv, a.v_stride[1] = N * P * Dv, a.v_stride[2] = Dv;
  a.block_table = d.block_table, a.block_table_stride = d.block_table_stride;
  a.page_size = P, a.num_pages = N;
  if (kv_lens)
    for (int64_t b = 0; b < d.batch; ++b) kv_lens[b] = int32_t(d.cache_lens[b] + d.kv_len);
  a.kv_lens = kv_lens;
}

}  // namespace tessera::detail
