// The block-type weights' executor (gemm_quant.hpp). Two steps: A's rows rounded to q8_0 into
// the call's scratch (split in row chunks among threads when there are many), then a grid of
// tasks, each a block of rows by a chunk of weight rows, the rows in groups of the dot kernels'
// R. The split follows from the shape and the tuning row, and the dot kernels give each row and
// key the same sum wherever it falls in a call, so C is the same for any thread count.
#include "gemm/gemm_quant.hpp"

#include <algorithm>
#include <cstring>

#include "gemm/gemm_split.hpp"
#include "runtime/error.hpp"
#include "runtime/scratch.hpp"

namespace tessera::detail {
namespace {

using gemm_split::line_floats;

// C = beta C (k = 0 or alpha = 0: A and B unread; beta = 0 never reads C).
void scale_c(const QuantGemm& q) {
  for (int64_t i = 0; i < q.m; ++i) {
    float* ci = q.c + i * q.ldc;
    if (q.beta == 0.0f)
      std::fill(ci, ci + q.n, 0.0f);
    else
      for (int64_t j = 0; j < q.n; ++j) ci[j] *= q.beta;
  }
}

// A's rows as QuantRows: qs (m x k int8), the scales (m x k / 32 floats) and, for the packed
// tile, each block's start -off sum q (int32), in one buffer; for a tile that reads A's rows
// interleaved by words (QuantKernels::gemm_a_words), each tile's rows are so interleaved.
struct QuantizedA {
  int8_t* qs;
  float* d;
  int32_t* start;
  int32_t* sums;  // each block's sum of q, for the GEMV kernels (QuantRows::sums)
};

constexpr int64_t kQuantizeRowsPerTask = 32;

// A block's words of G bytes, G R bytes apart: with G known, each copy is one move (a copy of a
// run-time size was a library call per word).
template <int64_t G>
void copy_words(const int8_t* v, int64_t R, int8_t* dst) {
  for (int64_t w = 0; w < kBlockValues / G; ++w) std::memcpy(dst + G * w * R, v + G * w, G);
}

// Row i of A into the word-interleaved layout of its tile call (QGemmRows, words of gemm_group
// bytes): the tiles of packed_gemm's tasks, gemm_mr rows from the start of each task's
// plan.rows, the last fewer.
// Rounded a slice of k at a time through a buffer on the stack (each block is rounded alone).
void quantize_row_words(const arch::KernelTable& kt, const QuantGemm& q, const QuantGemmPlan& plan,
                        int32_t off, const float* x, int64_t i, const QuantizedA& out) {
  const int64_t MR = kt.quant.gemm_mr, G = kt.quant.gemm_group, blocks = q.k / kBlockValues;
  const int32_t bias = kt.quant.gemm_start_bias[block_index(q.b_type)];
  const int64_t task0 = i / plan.rows * plan.rows, task1 = std::min(q.m, task0 + plan.rows);
  const int64_t tile = task0 + (i - task0) / MR * MR, R = std::min(MR, task1 - tile), r = i - tile;
  int8_t* qs = out.qs + tile * q.k;
  float* d = out.d + tile * blocks;
  int32_t* start = out.start + tile * blocks;
  constexpr int64_t kSlice = 16;  // blocks
  int8_t row[kSlice * kBlockValues];
  float scales[kSlice];
  for (int64_t b0 = 0; b0 < blocks; b0 += kSlice) {
    const int64_t nb = std::min(kSlice, blocks - b0);
    kt.quant.quantize_rows(1, nb * kBlockValues, x + b0 * kBlockValues, q.k, row, scales);
    for (int64_t b = 0; b < nb; ++b) {
      const int8_t* v = row + b * kBlockValues;
      int8_t* dst = qs + (b0 + b) * kBlockValues * R + G * r;
      if (G == 4)
        copy_words<4>(v, R, dst);
      else
        copy_words<8>(v, R, dst);
      d[(b0 + b) * R + r] = scales[b];
      start[(b0 + b) * R + r] = bias - off * block_sum(v);
    }
  }
}

Status quantize_a(const arch::KernelTable& kt, const QuantGemm& q, const QuantGemmPlan& plan,
                  QuantizedA& out) {
  const int64_t blocks = q.k / kBlockValues;
  const size_t qs_floats = line_floats(size_t(q.m * q.k / 4));
  const size_t d_floats = line_floats(size_t(q.m * blocks));
  const bool per_block = plan.packed || plan.gemv;
  float* buf = thread_scratch(ScratchSlot::gemm_a)
                   .floats(qs_floats + d_floats + (per_block ? size_t(q.m * blocks) : 0));
  if (buf == nullptr) return fail(Status::out_of_memory, "cannot allocate the rounded rows of a");
  int32_t* ints =
      per_block ? static_cast<int32_t*>(static_cast<void*>(buf + qs_floats + d_floats)) : nullptr;
  out = {reinterpret_cast<int8_t*>(buf), buf + qs_floats, plan.packed ? ints : nullptr,
         plan.gemv ? ints : nullptr};
  const int32_t off = kt.quant.gemm_offset[block_index(q.b_type)];
  const int32_t bias = kt.quant.gemm_start_bias[block_index(q.b_type)];
  const float* a = q.a;
  int64_t lda = q.lda;
  if (q.ta) {  // rows of op(A) gathered first (m k floats against m n k products)
    float* t = thread_scratch(ScratchSlot::gemm_b).floats(size_t(q.m * q.k));
    if (t == nullptr) return fail(Status::out_of_memory, "cannot allocate the transposed a");
    for (int64_t p = 0; p < q.k; ++p)
      for (int64_t i = 0; i < q.m; ++i) t[i * q.k + p] = q.a[p * q.lda + i];
    a = t, lda = q.k;
  }
  const auto rows = [&](int64_t i0, int64_t i1) {
    if (plan.packed && kt.quant.gemm_a_words) {
      for (int64_t i = i0; i < i1; ++i) quantize_row_words(kt, q, plan, off, a + i * lda, i, out);
      return;
    }
    kt.quant.quantize_rows(i1 - i0, q.k, a + i0 * lda, lda, out.qs + i0 * q.k, out.d + i0 * blocks);
    for (int64_t x = i0 * blocks; out.sums && x < i1 * blocks; ++x)
      out.sums[x] = block_sum(out.qs + x * kBlockValues);
    for (int64_t x = i0 * blocks; out.start && x < i1 * blocks; ++x)
      out.start[x] = bias - off * block_sum(out.qs + x * kBlockValues);
  };
  const int64_t chunks = ceil_div(q.m, kQuantizeRowsPerTask);
  if (!plan.parallel || chunks == 1)
    rows(0, q.m);
  else
    gemm_split::for_each_task(chunks, [&](int64_t t) {
      rows(t * kQuantizeRowsPerTask, std::min(q.m, (t + 1) * kQuantizeRowsPerTask));
    });
  return Status::ok;
}

// The tasks of one product on panels (prepacked, or packed by the call): row blocks by panel
// groups, each group of gemm_mr rows against each of the group's panels (its rows' int8 stay in
// L1 while the panels come from L2).
class PanelTasks {
 public:
  PanelTasks() = default;
  PanelTasks(const arch::KernelTable& kt, const QuantGemm& q, const QuantGemmPlan& plan,
             const QuantizedA& qa)
      : qk_(&kt.quant), q_(&q), plan_(&plan), qa_(&qa), t_(block_index(q.b_type)) {
    const int64_t NR = qk_->gemm_nr, blocks = q.k / kBlockValues;
    panels_ = ceil_div(q.n, NR), panel_bytes_ = blocks * qk_->gemm_block_bytes[t_];
    group_ = std::max<int64_t>(1, plan.cols / NR), groups_ = ceil_div(panels_, group_);
    row_blocks_ = ceil_div(q.m, plan.rows);
  }
  int64_t count() const { return row_blocks_ * groups_; }
  int64_t groups() const { return groups_; }
  int64_t panel_bytes() const { return panel_bytes_; }

  // Panel group g of B as stored into buf, in the tile's layout.
  void pack(int64_t g, uint8_t* buf) const {
    const QuantGemm& q = *q_;
    const int64_t NR = qk_->gemm_nr, ldb = storage_bytes(q.b_type, q.ldb);
    for (int64_t p = g * group_; p < std::min(panels_, (g + 1) * group_); ++p)
      qk_->gemm_pack[t_](std::min(NR, q.n - p * NR), q.k / kBlockValues, q.b + p * NR * ldb, ldb,
                         buf + p * panel_bytes_);
  }

  // Task `index` against the panels at `packed`.
  void run(int64_t index, const uint8_t* packed) const {
    const QuantGemm& q = *q_;
    const QuantizedA& qa = *qa_;
    const int64_t NR = qk_->gemm_nr, MR = qk_->gemm_mr, blocks = q.k / kBlockValues;
    // Row blocks inner: the weights stream once, A's rounded rows (m k bytes) once per chunk.
    const int64_t i0 = index % row_blocks_ * plan_->rows, i1 = std::min(q.m, i0 + plan_->rows);
    const int64_t p0 = index / row_blocks_ * group_, p1 = std::min(panels_, p0 + group_);
    for (int64_t i = i0; i < i1; i += MR) {
      const int r = int(std::min(MR, i1 - i));
      const arch::QGemmRows rows{qa.qs + i * q.k, q.k, qa.d + i * blocks, qa.start + i * blocks,
                                 blocks};
      // Panel pairs through the wide tile from the plan's rows, the odd panel alone.
      const bool wide = plan_->pair_rows > 0 && r >= plan_->pair_rows;
      for (int64_t p = p0; p < p1;) {
        const int64_t two = wide && p + 1 < p1 ? 2 : 1;
        (two == 2 ? qk_->gemm_wide : qk_->gemm)[t_][r](
            rows, packed + p * panel_bytes_, q.c + i * q.ldc + p * NR, q.ldc,
            std::min(two * NR, q.n - p * NR), q.alpha, q.beta);
        p += two;
      }
    }
  }

 private:
  const arch::QuantKernels* qk_ = nullptr;
  const QuantGemm* q_ = nullptr;
  const QuantGemmPlan* plan_ = nullptr;
  const QuantizedA* qa_ = nullptr;
  int t_ = 0;
  int64_t panels_ = 0, panel_bytes_ = 0, group_ = 1, groups_ = 0, row_blocks_ = 0;
};

// B packed once into the tile's panels where it is not prepacked (a task per group of panels),
// then the product's tasks.
Status packed_gemm(const arch::KernelTable& kt, const QuantGemm& q, const QuantGemmPlan& plan,
                   const QuantizedA& qa) {
  const PanelTasks tasks(kt, q, plan, qa);
  const uint8_t* packed = q.panels;
  uint8_t* buf = nullptr;
  if (packed == nullptr) {
    const int64_t bytes = ceil_div(q.n, int64_t(kt.quant.gemm_nr)) * tasks.panel_bytes();
    buf = reinterpret_cast<uint8_t*>(
        thread_scratch(ScratchSlot::gemm_b).floats(size_t(ceil_div(bytes, 4))));
    if (buf == nullptr) return fail(Status::out_of_memory, "cannot allocate the packed weights");
    packed = buf;
  }
  const auto task = [&](int64_t index) { tasks.run(index, packed); };
  if (!plan.parallel) {
    for (int64_t g = 0; buf && g < tasks.groups(); ++g) tasks.pack(g, buf);
    for (int64_t index = 0; index < tasks.count(); ++index) task(index);
  } else {
    if (buf) gemm_split::for_each_task(tasks.groups(), [&](int64_t g) { tasks.pack(g, buf); });
    gemm_split::for_each_task(tasks.count(), task);
  }
  return Status::ok;
}

}  // namespace

QuantGemmPlan plan_quant_gemm(const arch::KernelTable& kt, const Tuning& tn, const QuantGemm& q) {
  QuantGemmPlan p{};
  p.few_rows = q.m <= tn.quant_gemm_rows_per_task;
  // (the packers address a panel's rows by 32-bit offsets: QGemmPackFn)
  p.packed = q.panels != nullptr || (q.m >= tn.quant_gemm_pack_rows[block_index(q.b_type)] &&
                                     quant_panel_nr(kt, q.b_type, q.ldb) > 0);
  p.gemv = !p.packed && q.m <= kt.quant.gemv_rows[block_index(q.b_type)] &&
           q.k / kBlockValues >= tn.quant_gemv_min_blocks;
  p.rows = std::max<int64_t>(1, std::min(q.m, tn.quant_gemm_rows_per_task));
  // Whole tiles a task (128 rows on a 6-row tile left a 2-row call each task).
  const int64_t mr = kt.quant.gemm_mr;
  if (p.packed && mr > 0 && p.rows > mr && q.m > p.rows) p.rows = p.rows / mr * mr;
  // Weight rows of a task: its share of L2 (tuning), whole groups of 16 keys.
  const double row_bytes = double(storage_bytes(q.b_type, std::max<int64_t>(q.k, kBlockValues)));
  p.cols = std::max<int64_t>(16, int64_t(tn.quant_gemm_chunk_bytes / row_bytes) / 16 * 16);
  const double macs = double(q.m) * double(q.n) * double(q.k);
  const double b_bytes = row_bytes * double(q.n);
  // One thread runs the tasks in one loop: through TBB each task's atomics wait for the loads in
  // flight, breaking the weights' stream at every task.
  const int64_t threads = tbb::this_task_arena::max_concurrency();
  p.parallel =
      threads > 1 && (macs >= (p.few_rows ? tn.min_parallel_macs_few_rows : tn.min_parallel_macs) ||
                      b_bytes >= tn.min_parallel_operand_bytes);
  // The GEMV kernels read each weight row once (one group of rows): tasks of a quarter of a
  // thread's share rather than of L2.
  if (p.gemv) p.cols = std::max<int64_t>(p.cols, ceil_div(ceil_div(q.n, 4 * threads), 16) * 16);
  // Enough tasks for every thread: about 4 a thread where the weights alone cannot give them.
  if (p.parallel) {
    const int64_t want = 4 * threads;
    const int64_t row_blocks = ceil_div(q.m, p.rows);
    if (row_blocks * ceil_div(q.n, p.cols) < want)
      p.cols = std::max<int64_t>(16, ceil_div(ceil_div(q.n, ceil_div(want, row_blocks)), 16) * 16);
  }
  // Whole panel pairs a task where tiles take them.
  const int64_t pair = 2 * int64_t(kt.quant.gemm_nr);
  if (p.packed && kt.quant.gemm_wide[block_index(q.b_type)][1] != nullptr)
    p.pair_rows = tn.quant_gemm_pair_rows;
  if (p.pair_rows > 0 && q.m >= p.pair_rows) p.cols = std::max(pair, p.cols / pair * pair);
  return p;
}

Status gemm_quant(const arch::KernelTable& kt, const QuantGemm& q) {
  if (q.m == 0 || q.n == 0) return Status::ok;
  if (q.k == 0 || q.alpha == 0.0f) {
    scale_c(q);
    return Status::ok;
  }
  const QuantGemmPlan plan = plan_quant_gemm(kt, active_tuning(), q);
  if (plan.packed) {
    QuantizedA qa{};
    TESSERA_CHECK(quantize_a(kt, q, plan, qa));
    return packed_gemm(kt, q, plan, qa);
  }
  const int t = block_index(q.b_type);
  const int R = plan.gemv ? kt.quant.gemv_rows[t] : kt.quant.dot_rows;
  const arch::QuantDotFn* dot = plan.gemv ? kt.quant.gemv[t] : kt.quant.dot[t];
  const int64_t blocks = q.k / kBlockValues, ldb = storage_bytes(q.b_type, q.ldb);
  // beta != 0: each call's sums go to the task's buffer first (the kernels write alpha sum).
  gemm_split::TaskScratch scratch;
  const size_t task_floats = q.beta == 0.0f ? 0 : line_floats(size_t(R * plan.cols));
  if (!scratch.reserve(task_floats, plan.parallel))
    return fail(Status::out_of_memory, "cannot allocate the sums of a task");
  QuantizedA qa{};
  TESSERA_CHECK(quantize_a(kt, q, plan, qa));
  const int64_t row_blocks = ceil_div(q.m, plan.rows), col_chunks = ceil_div(q.n, plan.cols);
  const auto task = [&](int64_t index) {
    const int64_t i0 = index / col_chunks * plan.rows, j0 = index % col_chunks * plan.cols;
    const int64_t i1 = std::min(q.m, i0 + plan.rows), nj = std::min(plan.cols, q.n - j0);
    const uint8_t* bj = q.b + j0 * ldb;
    scratch.with_slice([&](float* sums) {
      for (int64_t i = i0; i < i1; i += R) {
        const int r = int(std::min<int64_t>(R, i1 - i));
        arch::QuantRows rows{qa.qs + i * q.k, qa.d + i * blocks, q.k, blocks};
        if (qa.sums) rows.sums = qa.sums + i * blocks;
        float* ci = q.c + i * q.ldc + j0;
        if (sums == nullptr) {
          dot[r](rows, bj, ldb, nj, ci, q.ldc, q.alpha);
          continue;
        }
        dot[r](rows, bj, ldb, nj, sums, plan.cols, q.alpha);
        for (int64_t x = 0; x < r; ++x)
          for (int64_t j = 0; j < nj; ++j)
            ci[x * q.ldc + j] = sums[x * plan.cols + j] + q.beta * ci[x * q.ldc + j];
      }
    });
  };
  if (!plan.parallel) {
    for (int64_t index = 0; index < row_blocks * col_chunks; ++index) task(index);
  } else {
    gemm_split::for_each_task(row_blocks * col_chunks, task);
  }
  return Status::ok;
}

Status gemm_quant_shared_a(const arch::KernelTable& kt, const QuantGemm* qs, int count) {
  constexpr int kMax = kMaxSharedProducts;
  if (count < 1 || count > kMax) return fail(Status::invalid_argument, "products = %d", count);
  const QuantGemm& q0 = qs[0];
  bool shared = q0.m > 0 && q0.k > 0 && q0.panels != nullptr;
  for (int i = 1; i < count && shared; ++i)
    shared = qs[i].panels && qs[i].m == q0.m && qs[i].k == q0.k && qs[i].a == q0.a &&
             qs[i].lda == q0.lda && qs[i].ta == q0.ta && qs[i].b_type == q0.b_type;
  const Tuning& tn = active_tuning();
  QuantGemmPlan plans[kMax];
  for (int i = 0; i < count && shared; ++i) {
    plans[i] = plan_quant_gemm(kt, tn, qs[i]);
    shared = qs[i].n > 0 && qs[i].alpha != 0.0f && plans[i].rows == plans[0].rows;
  }
  if (!shared) {
    for (int i = 0; i < count; ++i) TESSERA_CHECK(gemm_quant(kt, qs[i]));
    return Status::ok;
  }
  // A is rounded as each product alone would round it (the layout depends on m and the plan's
  // rows, the same for all), so each C is the one gemm_quant writes.
  QuantizedA qa{};
  TESSERA_CHECK(quantize_a(kt, q0, plans[0], qa));
  PanelTasks tasks[kMax];
  int64_t first[kMax + 1] = {0};
  bool parallel = false;
  for (int i = 0; i < count; ++i) {
    tasks[i] = PanelTasks(kt, qs[i], plans[i], qa);
    first[i + 1] = first[i] + tasks[i].count(), parallel = parallel || plans[i].parallel;
  }
  const auto task = [&](int64_t index) {
    int i = 0;
    while (index >= first[i + 1]) ++i;
    tasks[i].run(index - first[i], qs[i].panels);
  };
  if (!parallel)
    for (int64_t index = 0; index < first[count]; ++index) task(index);
  else
    gemm_split::for_each_task(first[count], task);
  return Status::ok;
}

int quant_panel_nr(const arch::KernelTable& kt, DType t, int64_t ldb) {
  // (the packers address a panel's rows by 32-bit offsets: QGemmPackFn)
  const bool fits = double(storage_bytes(t, ldb)) * kt.quant.gemm_nr < 0x1p31;
  return kt.quant.gemm_mr > 0 && fits ? kt.quant.gemm_nr : 0;
}

int64_t quant_packed_bytes(const arch::KernelTable& kt, DType t, int64_t n, int64_t k, int nr) {
  const int64_t blocks = k / kBlockValues;
  if (nr == 0) return n * blocks * block_bytes(t);
  return ceil_div(n, nr) * blocks * kt.quant.gemm_block_bytes[block_index(t)];
}

void pack_quant_b(const arch::KernelTable& kt, DType t, int64_t n, int64_t k, const uint8_t* b,
                  int64_t ldb, int nr, uint8_t* out) {
  const int64_t blocks = k / kBlockValues, row = blocks * block_bytes(t);
  const int64_t ld = storage_bytes(t, ldb);
  if (nr == 0) {
    for (int64_t j = 0; j < n; ++j) std::memcpy(out + j * row, b + j * ld, size_t(row));
    return;
  }
  const int64_t panel = blocks * kt.quant.gemm_block_bytes[block_index(t)];
  gemm_split::for_each_task(ceil_div(n, nr), [&](int64_t p) {
    kt.quant.gemm_pack[block_index(t)](std::min<int64_t>(nr, n - p * nr), blocks, b + p * nr * ld,
                                       ld, out + p * panel);
  });
}

}  // namespace tessera::detail
