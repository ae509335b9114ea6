// The attention planner's rules, first match wins.
#include "attention/attention_plan.hpp"

#include <algorithm>
#include <numeric>

#include "attention/attention_tile.hpp"
#include "runtime/arith.hpp"

namespace tessera::detail {

AttentionPlan plan_attention(const tessera_attention_desc& d, int64_t group, int64_t mr,
                             bool few_rows, const Tuning& tn, int threads) {
  AttentionPlan plan;
  // Few queries against many keys: too few query rows to feed the threads, so the keys split
  // into fixed chunks (flash-decoding).
  if (d.q_len <= tn.attention_decode_max_q && d.kv_len > tn.attention_decode_chunk) {
    plan.path = AttentionPath::decode_split_kv;
    plan.rule = "decode-split-kv";
    plan.chunk = tn.attention_decode_chunk;
    // The last chunk takes a remainder under half a chunk (513 keys were a chunk of 512 and a
    // task of one key, merged).
    plan.chunks = std::max<int64_t>(1, (d.kv_len + plan.chunk / 2) / plan.chunk);
    const double rows = double(d.batch) * double(d.kv_heads) * double(d.kv_len);
    plan.prefetch_kv = rows * double(tessera_dtype_size(d.k_type, d.head_dim) +
                                     tessera_dtype_size(d.v_type, d.value_dim)) >
                       tn.attention_stream_kv_bytes;
    // Heads side by side within a page (a pool laid out [page][head][row] or [page][row][head]);
    // a sequence's pages in a pool laid out head-major keep the head-by-head order, in which a
    // head's chunks follow one another.
    plan.heads_inner =
        d.block_table != nullptr && d.k_stride[1] < d.k_stride[0] && d.v_stride[1] < d.v_stride[0];
    // Heads side by side and rows for the dot kernels: a task takes a page's heads together (up
    // to kMaxTaskHeads), so that each page is read in memory order (one core reads scattered
    // runs of one head's rows at a third of the in-order rate), in as many tasks as still give
    // each of several threads the tuning row's attention_paged_tasks_per_thread (one thread:
    // every head it may take).
    if (plan.heads_inner && few_rows) {
      int64_t together = std::min(d.kv_heads, fa::kMaxTaskHeads);
      const double min_tasks = threads > 1 ? tn.attention_paged_tasks_per_thread * threads : 1.0;
      while (together > 1 &&
             double(d.batch * ceil_div(d.kv_heads, together) * plan.chunks) < min_tasks)
        together = ceil_div(together, 2);
      plan.heads_per_task = together;
      const int64_t run = d.page_size * std::max(tessera_dtype_size(d.k_type, d.head_dim),
                                                 tessera_dtype_size(d.v_type, d.value_dim));
      plan.prefetch_l1 = together > 1 && double(run) <= tn.attention_l1_run_bytes;
      // Only 16-bit rows, whose kernels spread their prefetches over their own loads: the
      // block types' short calls prefetch in bursts, and grouped their scattered pages measured
      // 10-25% slower.
      const auto b16 = [](tessera_dtype t) { return t == TESSERA_F16 || t == TESSERA_BF16; };
      if (together > 1 && b16(d.k_type) && b16(d.v_type))
        while (plan.page_group < fa::kMaxPageGroup &&
               double(plan.page_group * run) < tn.attention_page_group_bytes)
          plan.page_group *= 2;
    }
    return plan;
  }
  plan.rule = "prefill-key-tiles";
  // About attention_rows_per_tile stacked rows, a whole number of MR panels where the group
  // allows (512 rows with MR = 14 would leave an 8-row panel running at 8/14 of the kernel's
  // rate). The blocks are then evened out (256 query rows were one block of 252 and one of 4: a
  // task that packed every K tile for 4 rows), still a whole number of MR panels.
  const int64_t target = std::max<int64_t>(mr, tn.attention_rows_per_tile / mr * mr);
  const int64_t bq_max = std::max<int64_t>(1, target / group);
  const int64_t unit = mr / std::gcd(mr, group);  // bq multiple of this: rows multiple of MR
  // (Up to a quarter over the target stays one block: 256 query rows as 2 blocks packed every
  // K and V tile twice.)
  int64_t blocks = d.q_len <= bq_max + bq_max / 4 ? 1 : ceil_div(d.q_len, bq_max);
  // At least a task per thread when the batch and heads alone do not give that many.
  blocks = std::max(blocks, std::min(ceil_div(threads, std::max<int64_t>(1, d.batch * d.kv_heads)),
                                     ceil_div(std::max<int64_t>(d.q_len, 1), unit)));
  int64_t bq = ceil_div(std::max<int64_t>(d.q_len, 1), blocks);
  if (blocks > 1) bq = std::min(bq_max, ceil_div(bq, unit) * unit);
  plan.bq = bq;
  plan.q_blocks = ceil_div(d.q_len, bq);
  return plan;
}

}  // namespace tessera::detail
