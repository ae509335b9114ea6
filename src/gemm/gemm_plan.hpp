// The SGEMM planner: a pure function of the problem's shape, the kernel table, the tuning row
// and the thread count to a plan (the path, the rule that chose it, the tile kernels, how the
// work splits). Its rules are one ordered list (src/gemm/gemm_plan.cpp); the executors in
// src/gemm/gemm_driver.cpp carry a plan out and test no threshold of their own.
#pragma once

#include "arch/kernels.hpp"
#include "gemm/gemm_driver.hpp"
#include "runtime/tuning.hpp"

namespace tessera::detail {

enum class GemmPath : uint8_t {
  nothing,        // m or n is 0
  scale_c,        // alpha = 0 or k = 0: C = beta C
  dot,            // few rows of A times B^T: dot products along k
  wide,           // few rows times B in place: the wide kernels, by columns
  wide_k_chunks,  // few rows times a narrow B: the wide kernels over fixed chunks of k
  small_tiles,    // the table's small tiles (small products, short k)
  unpacked_a,     // A read in place by the MR x NR tiles, B in place or packed per panel
  column_split,   // one serial blocked product per thread, over its own columns
  blocked,        // BLIS's five loops, packed A and B blocks shared by the threads
  prepacked_row,  // one row times a prepacked B: several of its panels read at once
};
const char* gemm_path_name(GemmPath p);

// How a product meets the small tiles, if it does.
enum class SmallTiles : uint8_t {
  none,        // the MR x NR tiles serve it
  b_in_place,  // B read in place, each thread a share of the row tiles
  b_panels,    // each thread a share of the column panels, each packed just before its tiles
};

struct GemmPlan {
  GemmPath path = GemmPath::nothing;
  const char* rule = "";                       // the rule of plan_gemm that fired
  const arch::GemmKernels* kernels = nullptr;  // the table's own tile or its deep one
  const Tuning* tuning = nullptr;
  bool parallel = false;  // split among the arena's threads (which may be 1)
  int threads = 1;        // the arena's threads if parallel, else 1
  SmallTiles small = SmallTiles::none;
  bool column_slices = false;  // unpacked_a: one share of the column panels per thread
  bool stream_b = false;       // wide: B streamed row by row (gemm_rows_stream.hpp)
  bool b_streams = false;      // wide_k_chunks: the wide kernels that prefetch B
  const char* b16 = "";        // B packed in 16 bits: "_b_f16" or "_b_bf16" (kernel names)
};

// parallel: false for a caller that parallelises over a batch itself; arena_threads: the
// concurrency of the arena the call runs in.
GemmPlan plan_gemm(const arch::GemmKernels& kt, const Tuning& tn, const GemmProblem& p,
                   bool parallel, int arena_threads);

// unpacked_a: B panels read in place (else packed a panel at a time by the task using them).
bool unpacked_b_in_place(const arch::GemmKernels& kt, const Tuning& tn, const GemmProblem& p);

// The blocked path's choices for one (slice of a) product: pack A blocks, or read A in place
// and fetch each next tile's rows; the MR panels outside the NR panels.
struct BlockedChoices {
  bool pack_a, a_next, rows_outer;
};
BlockedChoices plan_blocked(const arch::GemmKernels& kt, const Tuning& tn, const GemmProblem& p);

// The registered names of the kernels a plan runs ("f32_gemm_14x32_avx512"), into out.
void gemm_kernel_names(const GemmPlan& plan, int64_t m, const char* isa, char* out, size_t size);

// Carries a plan out (src/gemm/gemm_driver.cpp). given: for a serial plan, gemm_serial_floats of
// scratch its caller reserved (a batch run one item per task); else the plan reserves its own.
Status gemm_execute(const GemmPlan& plan, const GemmProblem& p, float* given = nullptr);
size_t gemm_serial_floats(const GemmPlan& plan, const GemmProblem& p);
// gemm_run under a given tuning row (the tests run every row's choices on this machine).
Status gemm_run(const arch::GemmKernels& kt, const Tuning& tn, const GemmProblem& p,
                bool parallel = true);

// Plans one product on table t with TBB in the caller's arena, runs it, and prints the
// TESSERA_VERBOSE line labelled `op` (src/gemm/gemm.cpp).
Status gemm_run_product(const char* op, const arch::KernelTable& t, const GemmProblem& p);

// The fixed chunk of k the wide_k_chunks path splits at (a function of k alone).
inline constexpr int64_t kWideKChunk = 1024;

}  // namespace tessera::detail
