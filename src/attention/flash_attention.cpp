// Fused attention: softmax(scale Q K^T + masks) V without the q_len x kv_len score matrix.
//
// Work unit (one task): a batch b, a KV head hk, and a block of query positions [i0, i0 + BQ)
// for every query head of hk's group, stacked as rows = group x BQ. The loop over key tiles of
// BK keys then reads each K/V tile once for the whole group (GQA/MQA read K/V once per group,
// not per head) and runs, per tile:
//   S = scale Q K^T           the GEMM kernels (K^T packed per tile: keys are the SIMD lanes;
//                             few rows use the dot kernel, K read in place)
//   masks                     only on tiles that are not fully visible, or with bias, mask,
//                             ALiBi or softcap; invisible tiles are skipped before the GEMM
//   m_new = max(m, rowmax S), lazily: m stays while rowmax S <= m + 4 (softmax.hpp,
//   kRescaleSlack); P = exp(S - m_new); l = l exp(m - m_new) + rowsum P
//   O = O exp(m - m_new) + P V   (the rescale only when m moved)
// and at the end O / l, lse = m + log l (a row with no visible key: zeros and -inf).
//
// Block sizes: BK = 256 keys and about the tuning row's attention_rows_per_tile stacked rows
// (src/attention/attention_plan.cpp chooses the blocks; src/runtime/tuning.cpp has the cache
// arithmetic).
//
// Decode (q_len up to the row's attention_decode_max_q): too few query rows to feed the
// threads, so the keys are split into fixed chunks (flash-decoding); each chunk yields (m, l, O)
// partials merged in chunk order. Chunking depends only on kv_len, never on the thread count:
// results are bitwise identical for any number of threads, on both paths. Where a page holds
// its KV heads side by side, a decode task takes several heads (the plan's heads_per_task) and
// reads each page for all of them in turn; a head's sums do not depend on its task's others.
#include "attention/flash_attention.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <numeric>

#include "attention/attention_plan.hpp"
#include "attention/attention_tile.hpp"
#include "runtime/check.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/error.hpp"
#include "runtime/scratch.hpp"
#include "runtime/tsan.hpp"
#include "tessera/softmax.hpp"

namespace tessera::detail {
namespace {

using namespace fa;

// Every task's state comes from one block of the calling thread's scratch taken before any
// output is written (a slice per task running at once): an allocation failure then leaves O
// and lse untouched, and the steady state allocates nothing.
bool reserve_states(Slices& pool, size_t floats) {
  return pool.reserve(thread_scratch(ScratchSlot::attention), floats, slices_for_arena());
}

Status no_state() {
  return fail(Status::out_of_memory, "cannot allocate the attention tile states");
}

Status prefill(const Geometry& g, const AttentionPlan& plan, const arch::KernelTable& kt,
               const float* q, const void* k, const void* v, float* o) {
  const tessera_attention_desc& d = g.d;
  const int64_t bq = plan.bq, q_blocks = plan.q_blocks;
  const int64_t tasks = d.batch * d.kv_heads * q_blocks;
  Slices pool;
  if (!reserve_states(pool, state_floats(d, kt, g.group * bq))) return no_state();
  ForkJoin fj;
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, tasks, 1),
                      task_body(fj,
                                [&](const tbb::blocked_range<int64_t>& r) {
                                  for (int64_t t = r.begin(); t < r.end(); ++t) {
                                    // Latest query blocks first: under causal masks they are the
                                    // longest tasks.
                                    const int64_t qb = q_blocks - 1 - t % q_blocks;
                                    const int64_t hk = (t / q_blocks) % d.kv_heads,
                                                  b = t / (q_blocks * d.kv_heads);
                                    const int64_t i0 = qb * bq, n = std::min(bq, d.q_len - i0);
                                    const Slices::Lease slice(pool);
                                    TileState st;
                                    carve_state(slice.get(), d, kt, g.group * n, false, st);
                                    stage_queries(d, g, kt, q, b, hk, i0, n, st);
                                    key_loop(g, kt, b, hk, 1, i0, n, 0, d.kv_len, k, v, &st);
                                    finish_rows(g, kt.softmax, b, hk, i0, n, st, o);
                                  }
                                }),
                      tbb::simple_partitioner());
  });
  fj.join();
  return Status::ok;
}

// Unit (b, hk)'s chunks merged in chunk order into its output rows; acc: rows (Dv + 2) floats.
void merge_chunks(const Geometry& g, const arch::KernelTable& kt, const float* partial,
                  int64_t chunks, int64_t b, int64_t hk, float* acc, float* o) {
  const tessera_attention_desc& d = g.d;
  const int64_t rows = g.group * d.q_len, Dv = d.value_dim, stride = rows * (2 + Dv);
  const float* parts = partial + (b * d.kv_heads + hk) * chunks * stride;
  TileState st;
  st.o = acc, st.m = acc + rows * Dv, st.l = st.m + rows;
  for (int64_t c = 0; c < chunks; ++c) {
    const float* part = parts + c * stride;
    for (int64_t i = 0; i < rows; ++i) {
      const float* pi = part + i * (2 + Dv);
      const OnlineSoftmaxState s{pi[0], pi[1]};
      if (c == 0) {
        st.m[i] = s.max, st.l[i] = s.sum;
        std::memcpy(st.o + i * Dv, pi + 2, sizeof(float) * size_t(Dv));
        continue;
      }
      OnlineSoftmaxState merged{st.m[i], st.l[i]};
      merge_partial_output(merged, st.o + i * Dv, s, pi + 2, Dv);
      st.m[i] = merged.max, st.l[i] = merged.sum;
    }
  }
  finish_rows(g, kt.softmax, b, hk, 0, d.q_len, st, o);
}

Status decode(const Geometry& g, const AttentionPlan& plan, const arch::KernelTable& kt,
              const float* q, const void* k, const void* v, float* o) {
  const tessera_attention_desc& d = g.d;
  const int64_t rows = g.group * d.q_len, Dv = d.value_dim;
  const int64_t chunks = plan.chunks, chunk = plan.chunk;
  const int64_t units = d.batch * d.kv_heads;
  // Tasks of `together` KV heads (plan.heads_per_task), in groups of a batch's heads.
  const int64_t together = plan.heads_per_task, groups = ceil_div(d.kv_heads, together);
  const int64_t task_units = d.batch * groups;
  // Partials per (unit, chunk): rows x (m, l, O[Dv]), in the calling thread's scratch
  // (reused across calls; the tasks below use their own threads' attention slots), then a
  // count of the chunks done per task unit.
  const int64_t stride = rows * (2 + Dv);
  int64_t parts, partial_floats;
  float* partial =
      mul_ok(units, chunks, parts) && mul_ok(parts, stride, partial_floats) &&
              uint64_t(partial_floats + task_units) <= SIZE_MAX / sizeof(float)
          ? thread_scratch(ScratchSlot::decode_partials).floats(size_t(partial_floats + task_units))
          : nullptr;
  if (!partial) return fail(Status::out_of_memory, "cannot allocate the decode partials");
  std::atomic<int32_t>* done = reinterpret_cast<std::atomic<int32_t>*>(partial + partial_floats);
  for (int64_t u = 0; u < task_units; ++u) new (done + u) std::atomic<int32_t>(0);
  // A slice per thread for a task's states (one per head), then for a unit's merge (O, m and
  // l of every row).
  const size_t head_floats = state_floats(d, kt, rows);
  Slices pool;
  if (!reserve_states(pool, std::max(head_floats * size_t(together), size_t(rows * (Dv + 2)))))
    return no_state();
  ForkJoin fj;
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, task_units * chunks, 1),
        task_body(fj,
                  [&](const tbb::blocked_range<int64_t>& r) {
                    for (int64_t t = r.begin(); t < r.end(); ++t) {
                      const bool inner = plan.heads_inner;
                      const int64_t unit = inner ? t % task_units : t / chunks;
                      const int64_t c = inner ? t / task_units : t % chunks;
                      const int64_t b = unit / groups, hk0 = unit % groups * together;
                      const int64_t heads = std::min(together, d.kv_heads - hk0);
                      const Slices::Lease slice(pool);
                      TileState st[kMaxTaskHeads];
                      for (int64_t h = 0; h < heads; ++h) {
                        carve_state(slice.get() + size_t(h) * head_floats, d, kt, rows, true,
                                    st[h]);
                        stage_queries(d, g, kt, q, b, hk0 + h, 0, d.q_len, st[h]);
                      }
                      key_loop(g, kt, b, hk0, heads, 0, d.q_len, c * chunk,
                               c + 1 == chunks ? d.kv_len : (c + 1) * chunk, k, v, st);
                      for (int64_t h = 0; h < heads; ++h) {
                        float* out = partial + ((b * d.kv_heads + hk0 + h) * chunks + c) * stride;
                        for (int64_t i = 0; i < rows; ++i) {
                          out[i * (2 + Dv)] = st[h].m[i];
                          out[i * (2 + Dv) + 1] = st[h].l[i];
                          std::memcpy(out + i * (2 + Dv) + 2, st[h].o + i * Dv,
                                      sizeof(float) * size_t(Dv));
                        }
                      }
                      // The task that finishes a unit's last chunk merges its heads in chunk
                      // order (the order, not the task, fixes the sums): no second region.
                      if (done[unit].fetch_add(1, std::memory_order_acq_rel) + 1 == chunks)
                        for (int64_t h = 0; h < heads; ++h)
                          merge_chunks(g, kt, partial, chunks, b, hk0 + h, slice.get(), o);
                    }
                  }),
        tbb::simple_partitioner());
  });
  fj.join();
  return Status::ok;
}

}  // namespace

Status flash_attention(const tessera_attention_desc& d, const float* q, const void* k,
                       const void* v, float* o, const char** rule) {
  const arch::KernelTable& kt = active_table();
  Geometry g{
      d, d.q_heads / d.kv_heads, d.scale != 0.0f ? d.scale : 1.0f / std::sqrt(float(d.head_dim)),
      d.bias != nullptr || d.mask != nullptr || d.alibi_slopes != nullptr || d.softcap > 0.0f};
  const AttentionPlan plan =
      plan_attention(d, g.group, kt.gemm.mr, few_rows(kt.gemm, g.group * d.q_len), active_tuning(),
                     tbb::this_task_arena::max_concurrency());
  g.prefetch_kv = plan.prefetch_kv;
  g.prefetch_l1 = plan.prefetch_l1;
  g.page_group = plan.page_group;
  if (rule) *rule = plan.rule;
  return plan.path == AttentionPath::decode_split_kv ? decode(g, plan, kt, q, k, v, o)
                                                     : prefill(g, plan, kt, q, k, v, o);
}

}  // namespace tessera::detail
