// Tuning as data: one row per CPU class (hardware.hpp) of every threshold that chooses a path in
// the drivers, and the cache sizes they derive from. The rows and their derivations are in
// src/runtime/tuning.cpp; the drivers read a row and test no vendor, model or cache size
// themselves. (The register tiles and KC / MC / NC are compile-time constants of each kernel table,
// in arch/common/blocking.hpp.)
#pragma once

#include <cstdint>

#include "runtime/hardware.hpp"

namespace tessera::detail {

struct Tuning {
  Caches typical;  // a core of this class, where the system's figures are implausible
  CpuClass cpu_class;

  // GEMM (src/gemm/gemm_plan.cpp)
  bool small_b_in_place;           // small tiles read B in place (a line-straddling load costs one)
  bool prefetch_streamed_b;        // wide kernels prefetch a B streamed from L3 or memory
  double l1_span_bytes;            // a B read in place, or a small-tile panel, stays in L1
  double l2_reuse_bytes;           // a thread's share of B the next call finds in L2 again
  double stream_b_bytes;           // few rows: B past this is streamed row by row
  double panels_a_in_place_bytes;  // small tiles over B panels with A in place, up to this A
  double a_stream_bytes;           // A read in place past this fetches the next tile's rows
  double mid_operand_bytes;        // mid-size products: A and B together at most this
  double mid_in_place_bytes;       // mid-size products read A in place up to this
  double min_parallel_macs;        // fewer multiply-adds run on the calling thread,
  double min_parallel_macs_few_rows;  // (or these with few rows of A)
  double min_parallel_operand_bytes;  // unless A and B take this many bytes
  double prefetch_next_item_bytes;    // batched items this small prefetch the next item's B
  // Softmax (src/softmax/softmax.cpp)
  double softmax_stream_bytes;  // outputs from this size on take streaming stores
  int64_t softmax_cached_cols;  // rows up to this many columns are read once, from cache
  // Fused attention (src/attention/attention_plan.cpp)
  int64_t attention_rows_per_tile;    // stacked query rows of a prefill task
  int64_t attention_decode_max_q;     // up to this many queries split the keys into chunks
  int64_t attention_decode_chunk;     // keys per chunk (the merge order: fixes the results)
  double attention_stream_kv_bytes;   // decode: K and V past this prefetch the next block's rows
  double attention_l1_run_bytes;      // paged decode: a head's page runs up to this, into L1
  double attention_page_group_bytes;  // paged decode: a head's runs of a group of pages
  double attention_paged_tasks_per_thread;  // paged decode, heads together: at least so many
  // fp16-arithmetic GEMM (src/gemm/hgemm.cpp): a task's block of C
  int64_t hgemm_block_rows;    // rows (their packed A panels stay in L2)
  int64_t hgemm_block_panels;  // NR-column panels (one B panel reused across the rows)
  // Batched additive attention (src/layers/additive_batch.cpp)
  int64_t additive_keys_per_task;  // keys per score task (its q + K tile stays in L2)
  // Block-type weights (src/gemm/gemm_quant.cpp): a task's rows of C (up to this many rows the
  // weights are read once, in tasks over columns) and its weight rows' bytes (kept in L2 while
  // its rows go by)
  int64_t quant_gemm_rows_per_task;
  double quant_gemm_chunk_bytes;
  // From this many rows of C, weights as stored are packed once per call for the table's tile
  // (where it has one): the packing's cost against the rows' saving. Per type: q8_0, q4_0.
  int64_t quant_gemm_pack_rows[2];
  // From this many blocks a weight row, the GEMV kernels (a key at a time through its blocks)
  // where the table has them, instead of the dot kernels (keys in groups, a slice of blocks at a
  // time).
  int64_t quant_gemv_min_blocks;
  // Tiles of this many rows or more take two panels at once where the table has that tile.
  int64_t quant_gemm_pair_rows;
};

const Tuning& tuning_row(CpuClass c);
// The row of this machine's class (hardware()), or of the class TESSERA_CPU_CLASS names.
const Tuning& active_tuning();
// The class of that name ("x86-zen4", ...), false if there is none.
bool find_cpu_class(const char* name, CpuClass& out);

// The detected sizes where each is plausible for a core of class c, else that class's typical
// figure: virtual machines report host-wide or invented sizes (one reported a 384 MB L3).
Caches plausible_caches(const Caches& detected, CpuClass c);

}  // namespace tessera::detail
