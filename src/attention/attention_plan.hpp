// The fused attention's planner: a pure function of the problem's shape, the tile's row count,
// the tuning row and the thread count to a plan (the path, the rule that chose it, and how the
// work splits into tasks). src/attention/flash_attention.cpp carries the plan out and tests no
// threshold.
#pragma once

#include <cstdint>

#include "runtime/tuning.hpp"
#include "tessera/attention.hpp"

namespace tessera::detail {

enum class AttentionPath : uint8_t {
  prefill_key_tiles,  // a task per (batch, kv head, block of queries), over every key tile
  decode_split_kv,    // a task per (batch, kv head, chunk of keys), the chunks then merged
};

struct AttentionPlan {
  AttentionPath path = AttentionPath::prefill_key_tiles;
  const char* rule = "";
  // prefill_key_tiles: query positions per task (its rows: group x bq) and blocks per head.
  int64_t bq = 0, q_blocks = 0;
  // decode_split_kv: keys per chunk (a function of kv_len and the row alone: the merge order,
  // and so the results, never depend on the thread count) and chunks per head.
  int64_t chunk = 0, chunks = 0;
  // decode_split_kv: K and V come from memory (past the tuning row's attention_stream_kv_bytes),
  // so the key loop prefetches each next block's rows.
  bool prefetch_kv = false;
  // decode_split_kv: the tasks run chunk by chunk, every (batch, kv head) of a chunk in turn,
  // rather than head by head: where a page holds its KV heads side by side, consecutive tasks
  // then read neighbouring memory (the hardware prefetcher's run past one head's rows is the
  // next head's), where head by head read each page's rows of one head among seven others'.
  bool heads_inner = false;
  // decode_split_kv: KV heads per task, their rows read page by page, every head of a page in
  // turn (1: a head per task).
  int64_t heads_per_task = 1;
  // decode_split_kv with heads_per_task > 1: a head's run of a page is short enough (the tuning
  // row's attention_l1_run_bytes) that the next head's is prefetched into L1 rather than L2.
  bool prefetch_l1 = false;
  // decode_split_kv with heads_per_task > 1: pages whose runs the heads read as a group, each
  // head's run of every page of the group in turn (so that several scattered pages stream at
  // once: enough that a head's runs of a group make the tuning row's attention_page_group_bytes).
  int64_t page_group = 1;
};

// group: query heads per kv head; mr: the rows of the table's GEMM tile; few_rows: a decode's
// group x q_len rows take the dot kernels (fa::few_rows).
AttentionPlan plan_attention(const tessera_attention_desc& d, int64_t group, int64_t mr,
                             bool few_rows, const Tuning& tn, int threads);

}  // namespace tessera::detail
