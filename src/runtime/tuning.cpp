// The tuning rows: one per CPU class, each number with its derivation (cache arithmetic) or
// the benchmark that chose it (alternated medians on the named class, GFLOP/s). The x86 rows
// were measured; the ARM rows are derived from their caches (qemu gives no ARM timings), and a
// row's number that no benchmark chose says so.
#include "runtime/tuning.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tessera::detail {
namespace {

constexpr double KB = 1024.0, MB = 1024.0 * 1024.0;

// Paged decode's rows (attention_plan.cpp), the same on every x86 class.
void x86_paged_decode_rows(Tuning& t) {
  // Paged decode, a page's heads in one task: each head's run of a page is read after the one
  // before it, the next prefetched while it goes (the executor's prefetch: block types' short
  // calls, and 16-bit rows the kernels cannot spread). A run of 8 KB or less (16 q8_0 rows at d
  // 128: 2.2 KB) goes into L1: the run being read and the next fit a quarter of the smallest L1
  // here (32 KB). x86-zen5, 32 / 8 heads, kv 32768, scattered pages, paged over contiguous time,
  // L2 -> L1: q8_0 16 rows 1 thread 1.51 -> 1.26, 2 threads 1.61 -> 1.44; f16 (before the
  // kernels spread its prefetch) 16 rows 1.63 -> 1.50 and 1.86 -> 1.65, 256 rows (64 KB) 2
  // threads 1.10 -> 1.14.
  t.attention_l1_run_bytes = 8 * KB;
  // Paged decode, a page's heads in one task (16-bit rows): pages in groups whose runs of one
  // head make 16 KB (4 pages of 16 f16 rows at d 128), each head's run of every page in turn. A
  // loop model of that read (x86-zen5, 128 MB of f16 in shuffled 8-run pages, the run two on
  // prefetched) reads 4 KB runs at 0.78 / 0.86 / 0.96 / 0.96 of its in-order rate in groups of
  // 1 / 2 / 4 / 8 pages (2 threads 0.86-0.92), 16 KB runs at 0.94-1.02 in any group.
  t.attention_page_group_bytes = 16 * KB;
  // Heads split until each of several threads has 16 such tasks: with 4 (8 tasks of 8 heads at
  // kv 4096) the last ones' imbalance showed. x86-zen5, kv 4096, scattered 64-row pages, 2
  // threads, paged over contiguous time: 1.17-1.19 -> 1.06-1.10 (f16, q8_0).
  t.attention_paged_tasks_per_thread = 16;
}

// The block-type weights' rows of the x86 classes.
void x86_block_type_rows(Tuning& t) {
  // A task's weight rows (256 KB) stay in L2 while its rows go by, a group of the tile's at a
  // time. Chosen when row blocks were the outer loop and the weights came from L3 or memory m /
  // rows times: 128 rows against 64, q8_0 +7%, q4_0 +4% (1 thread, Zen 4; 256 rows within 3%, a
  // 512 KB chunk level). Chunks are now the outer loop (Zen 5: +3-7%). The rows' int8 (128 x k
  // bytes: 512 KB at k = 4096) stream by group. Results do not depend on them.
  t.quant_gemm_rows_per_task = 128;
  t.quant_gemm_chunk_bytes = 256 * KB;
  // Packing costs what the dot kernels take for about 4 rows (q4_0) or 9 (q8_0: twice the
  // bytes), and the tiles then run 2-3.5x as fast a row (4096 x 4096 weights, 1 and 2 threads,
  // Zen 4 on the avx512 VNNI and the avx2 tiles): packing pays from 7-8 rows (q4_0) and 13-16
  // (q8_0).
  t.quant_gemm_pack_rows[0] = 16;
  t.quant_gemm_pack_rows[1] = 8;
  // The GEMV kernels against the dot kernels on weights as stored, 4096 rows, alternated (Zen 4,
  // 1 thread, one row): dot / gemv time 0.87-1.09 at k = 512 (the weights in L3), 1.04-1.08 at
  // 1024, 1.17-1.43 at 2048, 1.49-1.91 at 4096.
  t.quant_gemv_min_blocks = 32;
  // Panel pairs (the 6 x 32 VNNI tile) from 3 rows: from L2 the one-panel tile's loads bound it
  // (pair / one-panel time 0.80-0.89 at 3 rows). One row streams the weights from memory, where
  // pairs read two streams a panel apart: 1B q4_0 decode, 1 thread, alternated builds, one
  // panel 46.3 / 49.2 / 45.4 t/s against pairs 42.5 / 39.6 / 40.6 (q8_0 level). At 2 rows the
  // types disagree (q4_0 from memory 0.99-1.10, q8_0 0.87-0.94): left with the one panel.
  t.quant_gemm_pair_rows = 3;
}

// The numbers shared by the x86 rows; each class below changes what it measured differently.
Tuning x86_row(CpuClass c, const Caches& typical) {
  Tuning t{};
  t.cpu_class = c;
  t.typical = typical;
  // Line-straddling vector loads cost two on Intel cores since Skylake-SP: B is packed.
  t.small_b_in_place = false;
  t.prefetch_streamed_b = false;
  // The smallest L1d of these classes (32 KB). A B read in place within it stays in L1 across
  // the row tiles whatever its stride (a contiguous span of at most the cache's size fills no
  // set beyond its ways). x86-intel-avx512, 1 thread, 16-byte aligned B, against OpenBLAS in
  // the same process: 32^3 0.78 -> 0.90x, 64^3 0.87 -> 0.96x; past it, 128^3 (64 KB, rows 512
  // bytes apart) ran 4% slower. A small-tile panel is packed at most this deep: 64 x 128 x 4 B.
  t.l1_span_bytes = 32 * KB;
  // The L2 per core of x86-zen4 / x86-zen5 (1 MB): a thread's share of B up to this is found
  // in L2 by the next call, and is not prefetched.
  t.l2_reuse_bytes = 1 * MB;
  // Half of a 2 MB L2: a B the few-row strips would find in L2 keeps the wide kernels; past it
  // B is streamed row by row (x86-intel-avx512: strips 23.6 GFLOP/s, rows of 4 / 8 57).
  t.stream_b_bytes = 1 * MB;
  // Small tiles over packed B panels with A read in place from L2 or L3. x86-zen5, blocked ->
  // panels, 1 / 2 threads: 4096 x 4096 x 64 B^T 242 / 480 -> 245 / 491, 1024 x 1024 x 64 243 /
  // 468 -> 260 / 502, 4096 x 512 x 32 227 / 421 -> 257 / 483; an A of 4 MB (16384 x 1024 x 64)
  // lost (243 -> 239, read from L3 once per panel): 2 MB.
  t.panels_a_in_place_bytes = 2 * MB;
  // A read in place past this fetches each next tile's rows into L2. x86-zen5, without ->
  // with, 1 / 2 threads: P V 4096 x 64 x 4096 (A 64 MB) 201 / 429 -> 235 / 476, 4096 x 64 x
  // 1024 (16 MB) 231 / 489 -> 252 / 486; at 8 MB (512 x 128 x 4096) 248 / 426 -> 244 / 415.
  t.a_stream_bytes = 8 * MB;
  // Mid-size products (A and B together within 4 MB, k > 128) split by columns; they read A in
  // place up to 1 MB. x86-intel-avx512 (2 MB L2), 512^3 aligned (A and B 2 MB) in place ->
  // packed: 149.9 -> 161.6 (1 thread), 291.8 -> 316.5 (2); 256^3 (512 KB) in place 170.0 /
  // 315.7 against 163.6 / 282.5 packed. (x86-zen5 preferred in place up to 4 MB: 512^3 160 ->
  // 162, 2 threads 240 -> 300; the smaller bound serves both.)
  t.mid_operand_bytes = 4 * MB;
  t.mid_in_place_bytes = 1 * MB;
  // Below this a fork-join costs more than a second core saves. x86-zen4, 2 threads, serial
  // -> split: 64^3 106 -> 130, 128 x 64 x 64 105 -> 145, 96^3 106 -> 152; 64 x 64 x 32 (131k
  // multiply-adds) 98 -> 92 and 48^3 66 -> 60 stay serial.
  t.min_parallel_macs = 2.0e5;
  // Few rows (GEMV-like) take 1e6; operands of 1 MB make the product bound by reading them,
  // and a second core adds bandwidth: decode's 1 x 4096 x 128 (2 MB) 25 GFLOP/s serially, 43
  // on 2 threads.
  t.min_parallel_macs_few_rows = 1.0e6;
  t.min_parallel_operand_bytes = 1.0e6;
  // A quarter of the smallest L2 here (512 KB): a batch item's A and B within it leave room for
  // the next item's B. 64^3 x 256 with B^T, 1 thread: 132.7 -> 167.4 with the prefetch.
  t.prefetch_next_item_bytes = 128 * KB;
  // Outputs past the L3 a core sees (32 MB) are written with streaming stores. 1 thread:
  // 64 MB (4096 x 4096) 9.3 -> 13.6 GB/s; at 32 MB either way; at 16 MB and below plain stores
  // won (22 against 17 GB/s at 1 MB, still in cache when read).
  t.softmax_stream_bytes = 32 * MB;
  // A row of 16K floats (64 KB) and its output stay within L2 between the statistics pass and
  // the write pass; longer rows go in fixed chunks of 64 KB. Results depend on it (the
  // chunked sums): the same on every x86 row.
  t.softmax_cached_cols = 16384;
  // The S/P tile (512 rows x 256 keys x 4 B = 512 KB), a K and a V tile (256 x d x 4 B: 128 KB
  // each at d = 128) and the O accumulator (256 KB) share a 2 MB L2. x86-intel-avx512, 1
  // thread: at L = 4096, d = 128, 64 rows 99 GFLOP/s, 128 rows 107, 256 rows 118, 512 and 1024
  // rows as 256; at L = 512-2048 512 rows beat 256 by 2-6% (L = 512 was 3 blocks of 182 rows,
  // packing every K and V tile 3 times per head), 1024 no further: the per-tile packing of K^T
  // and V is what taller blocks amortise. (The 1 MB L2 classes were not measured apart.)
  t.attention_rows_per_tile = 512;
  // Decode: up to 8 queries (a GQA group's rows, speculative tokens) give too few rows to feed
  // the threads; keys split in chunks of 512 (at d = 128, a chunk's K and V are 512 KB: a
  // thread's share of L2), the last taking a remainder under half a chunk. Results depend on
  // the chunk: the same on every row.
  t.attention_decode_max_q = 8;
  t.attention_decode_chunk = 512;
  // K and V past the L3 a core sees (32 MB) come from memory; the decode's 16-bit readers then
  // prefetch the next 32-key block's rows into L2. x86-zen4, f16, 32 / 8 heads, d 128, 1
  // thread, without -> with: kv 32768 (134 MB) 10.6-11.1 -> 7.8-8.4 ms, 16384 5.4-5.5 -> 3.9,
  // 8192 (34 MB) 2.2-2.5 -> 1.8-1.9; within the L3 the prefetches only cost: kv 4096 (17 MB)
  // 0.80 -> 0.89-0.95 ms, 2048 0.40 -> 0.43.
  t.attention_stream_kv_bytes = 32 * MB;
  x86_paged_decode_rows(t);
  // No x86 table has fp16 arithmetic (hgemm runs its float32 executor): arm-a76's numbers.
  t.hgemm_block_rows = 64;
  t.hgemm_block_panels = 8;
  // A 128-key tile at attn_dim 256 is 128 KB, a quarter of the smallest L2 here (512 KB), in L2
  // between the tanh and the dot products (not measured). Results do not depend on it.
  t.additive_keys_per_task = 128;
  x86_block_type_rows(t);
  return t;
}

// ARM: the same rules on each class's caches. l2 is the share of one core where clusters
// share an L2 (A53, A72: four cores on 512 KB - 1 MB); the last level is L2 where there is no L3.
Tuning arm_row(CpuClass c, const Caches& typical, double l2_core, double min_parallel_macs) {
  Tuning t{};
  t.cpu_class = c;
  t.typical = typical;
  t.small_b_in_place = false;  // the NEON tables have no small tiles
  t.prefetch_streamed_b = false;
  const double last = double(typical.l3 > 0 ? typical.l3 : typical.l2);
  t.l1_span_bytes = double(typical.l1d);
  t.l2_reuse_bytes = l2_core;
  t.stream_b_bytes = l2_core / 2;  // as x86: half the L2 a core has
  t.panels_a_in_place_bytes = l2_core;
  t.a_stream_bytes = last;  // an A past the last level comes from memory
  t.mid_operand_bytes = 2 * l2_core;
  t.mid_in_place_bytes = l2_core / 2;
  // x86's bound is ~4 us of one core's work; these cores do 8-16 flops a cycle at 1.5-2.4 GHz
  // against 64 at 3-4 GHz, so the same time is 4-16x fewer multiply-adds (not measured).
  t.min_parallel_macs = min_parallel_macs;
  t.min_parallel_macs_few_rows = 5 * min_parallel_macs;  // x86's ratio
  t.min_parallel_operand_bytes = 1.0e6;                  // bandwidth: as on x86
  t.prefetch_next_item_bytes = l2_core / 4;
  t.softmax_stream_bytes = 2 * last;
  t.softmax_cached_cols = 16384;  // as x86: results depend on it
  // The S/P tile a quarter of the L2 a core has, as on x86 (512 rows x 1 KB against 2 MB):
  // 128 rows on 128 KB, 512 on 512 KB (not measured).
  t.attention_rows_per_tile = std::max<int64_t>(64, int64_t(l2_core / 1024));
  t.attention_decode_max_q = 8;             // as x86
  t.attention_decode_chunk = 512;           // as x86: results depend on it
  t.attention_stream_kv_bytes = last;       // as x86: K and V past the last level (not measured)
  t.attention_l1_run_bytes = 8 * KB;        // as x86 (not measured)
  t.attention_page_group_bytes = 16 * KB;   // as x86 (not measured)
  t.attention_paged_tasks_per_thread = 16;  // as x86 (not measured)
  // A task's packed A panels (rows x k halves) a quarter of the L2 a core has at k = 1024:
  // 64 rows (128 KB) on 512 KB, 16 on 128 KB; 8 B panels (NR x k halves each). Only cores
  // with FEAT_FP16 run it (arm-a76 here). Not measured; C does not depend on the blocks.
  t.hgemm_block_rows = std::clamp<int64_t>(int64_t(l2_core / 4 / 2048) / 8 * 8, 8, 64);
  t.hgemm_block_panels = 8;
  // The q + K tile a quarter of that L2 at attn_dim 256, as on x86 (not measured).
  t.additive_keys_per_task = std::clamp<int64_t>(int64_t(l2_core / 4 / 1024), 16, 128);
  // As x86: the rows' int8 and the weight rows each a quarter of the L2 a core has at k = 4096
  // (32 rows on 512 KB; 16 on 128 KB). Not measured; results do not depend on them.
  t.quant_gemm_rows_per_task = std::clamp<int64_t>(int64_t(l2_core / 4 / 4096) / 8 * 8, 8, 64);
  t.quant_gemm_chunk_bytes = l2_core / 4;
  // Not measured on ARM (qemu has no timings): the tile once the dot kernels' row block is full.
  t.quant_gemm_pack_rows[0] = t.quant_gemm_pack_rows[1] = t.quant_gemm_rows_per_task + 1;
  t.quant_gemv_min_blocks = 32;  // as x86 (not measured)
  t.quant_gemm_pair_rows = 3;    // as x86 (no ARM table has a pair tile yet)
  return t;
}

const Tuning* rows() {
  static const Tuning table[] = {
      x86_row(CpuClass::x86_generic, {32768, 512 * 1024, 16 << 20}),
      x86_row(CpuClass::x86_intel_avx512, {49152, 2 << 20, 32 << 20}),
      [] {
        Tuning t = x86_row(CpuClass::x86_zen4, {32768, 1 << 20, 32 << 20});
        // Zen loads a line-straddling vector at the cost of one. 4 x 64 small tiles with B in
        // place against 14 x 32: 1 thread 64^3 106.6 -> 112.2, 64 x 64 x 32 99.1 -> 109.3;
        // 2 threads 64^3 130.1 -> 146.2, 128 x 128 x 32 132.0 -> 160.0.
        t.small_b_in_place = true;
        return t;
      }(),
      [] {
        Tuning t = x86_row(CpuClass::x86_zen5, {49152, 1 << 20, 32 << 20});
        t.small_b_in_place = true;  // 64^3, operands 16 bytes past a line: 271 -> 281
        // The load slots for a prefetch per line beside the wide kernels' B loads: the hardware
        // prefetcher alone left a B streamed from L3 ~15% short. wide -> wide_prefetching:
        // 1 x 128 x 4096, 1 thread 53.6 -> 63.8; 2 x 128 x 4096 102.4 -> 114.9; 1 x 128 x 8192
        // on 2 threads 94.2 -> 109.6; a share within L2 (1 x 128 x 4096 on 2 threads) lost
        // 110.2 -> 105.4, hence l2_reuse_bytes. (x86-zen4 lost with them.)
        t.prefetch_streamed_b = true;
        return t;
      }(),
      // Cortex-A53 / A55: 32 KB L1d, 512 KB L2 for four cores, no L3; 8 flops a cycle.
      arm_row(CpuClass::arm_a53, {32768, 512 * 1024, 0}, 128 * KB, 2.5e4),
      // Cortex-A72: 32 KB L1d, 1 MB L2 for four cores (Raspberry Pi 4), no L3.
      arm_row(CpuClass::arm_a72, {32768, 1 << 20, 0}, 256 * KB, 5.0e4),
      // Cortex-A76 / Neoverse N1: 64 KB L1d, 512 KB L2 per core, 2 MB L3 (Raspberry Pi 5).
      arm_row(CpuClass::arm_a76, {65536, 512 * 1024, 2 << 20}, 512 * KB, 1.0e5),
      // ARMv7 (Cortex-A7 / A15 class): 32 KB L1d, 512 KB L2 for the cluster.
      arm_row(CpuClass::armv7, {32768, 512 * 1024, 0}, 128 * KB, 2.5e4),
  };
  static_assert(sizeof(table) / sizeof(*table) == size_t(CpuClass::count));
  return table;
}

}  // namespace

const Tuning& tuning_row(CpuClass c) { return rows()[static_cast<size_t>(c)]; }

bool find_cpu_class(const char* name, CpuClass& out) {
  for (size_t i = 0; name && i < size_t(CpuClass::count); ++i)
    if (std::strcmp(cpu_class_name(CpuClass(i)), name) == 0) {
      out = CpuClass(i);
      return true;
    }
  return false;
}

const Tuning& active_tuning() {
  static const Tuning& row = []() -> const Tuning& {
    CpuClass c = classify(hardware());
    find_cpu_class(std::getenv("TESSERA_CPU_CLASS"), c);  // an unknown name keeps the detected
    return tuning_row(c);
  }();
  return row;
}

Caches plausible_caches(const Caches& detected, CpuClass c) {
  const Caches& typical = tuning_row(c).typical;
  auto pick = [](int64_t v, int64_t typical_v, int64_t lo, int64_t hi) {
    return v >= lo && v <= hi ? v : typical_v;
  };
  // Bounds a core of any class we target lies within: L1d 16-128 KB, L2 128 KB - 4 MB per core,
  // L3 1-128 MB (0 where the class has none and nothing sane was reported).
  Caches out;
  out.l1d = pick(detected.l1d, typical.l1d, 16 << 10, 128 << 10);
  out.l2 = pick(detected.l2, typical.l2, 128 << 10, 4 << 20);
  out.l3 = pick(detected.l3, typical.l3, 1 << 20, int64_t(128) << 20);
  return out;
}

}  // namespace tessera::detail
