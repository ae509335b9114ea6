// The layer's paged cache (desc.block_table with a cache): k_cache and v_cache are pools of
// pages laid out [kv_heads][num_pages][page_size][dim], sequence b's position p is row p % P of
// page block_table[b][p / P], and cache_lens[b] counts the rows sequence b holds. New rows go
// to their pages; the attention reads the pool through the same table, each sequence with its
// own length (kv_lens = cache_lens + kv_len, built in the workspace).
#pragma once

#include <cstdint>

#include "layers/mha_check.hpp"

namespace tessera::detail {

inline bool paged_on(const MhaDesc& d) { return d.block_table != nullptr && d.k_cache != nullptr; }

// The pool's fields, the lengths and the table entries the call writes and reads, and the
// options a paged cache excludes (before anything is written).
Status check_mha_paged(const MhaDesc& d);

// The largest cache_lens[b] (0 without a batch).
int64_t paged_longest(const MhaDesc& d);

// The table's entries up to the last one the call reads (0 without a paged cache).
int64_t paged_table_entries(const MhaDesc& d);

// The pool row (of heads x pages x page_size rows) holding position p of (batch b, KV head hk).
int64_t paged_row(const MhaDesc& d, int64_t b, int64_t hk, int64_t p);

// The attention over the pool: its strides and table, kv_len the longest sequence, kv_lens
// (batch entries, filled when not null) each sequence's cache_lens[b] + kv_len.
void paged_attention(const MhaDesc& d, int32_t* kv_lens, tessera_attention_desc& a);

}  // namespace tessera::detail
