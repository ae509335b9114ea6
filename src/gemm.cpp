// SGEMM driver: argument checks, then the kernels of the active table.
#include "tessera/gemm.hpp"
#include "threading.hpp"

#include <cstring>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <cstdint>

#include "../arch/common/prefetch.hpp"
#include "check.hpp"
#include "dispatch.hpp"
#include "gemm_check.hpp"
#include "gemm_plan.hpp"
#include "gemm_split.hpp"
#include "scratch.hpp"
#include "tsan.hpp"
#include "tuning.hpp"
#include "verbose.hpp"

namespace tessera {
namespace {

// The packed-B buffer starts with this header so that a buffer packed for another shape or
// another kernel table is rejected instead of silently misread.
struct PackedBHeader {
  char magic[8];
  char isa[16];
  int64_t k, n;
  int32_t nr, kc;  // the layout's panel width and k blocking
};
constexpr size_t kHeaderBytes = 64;
static_assert(sizeof(PackedBHeader) <= kHeaderBytes, "header must fit its slot");
constexpr char kMagic[8] = {'T', 'S', 'R', 'P', 'A', 'C', 'K', '2'};

detail::GemmProblem problem(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k,
                            float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                            float beta, float* c, int64_t ldc) {
  detail::GemmProblem p;
  p.ta = ta == Transpose::trans;
  p.tb = tb == Transpose::trans;
  p.m = m, p.n = n, p.k = k;
  p.alpha = alpha, p.beta = beta;
  p.a = a, p.lda = lda, p.b = b, p.ldb = ldb, p.c = c, p.ldc = ldc;
  return p;
}

Status check_packed_alignment(const void* packed) {
  if (reinterpret_cast<uintptr_t>(packed) % alignof(float) == 0) return Status::ok;
  return detail::fail(Status::invalid_argument, "packed must be aligned to %zu bytes",
                      alignof(float));
}

char trans_char(bool t) { return t ? 'T' : 'N'; }

// Plans one product on the table t, runs it, and prints the TESSERA_VERBOSE line.
Status run_product(const char* op, const arch::KernelTable& t, const detail::GemmProblem& p) {
  const detail::GemmPlan plan = detail::plan_gemm(t.gemm, detail::active_tuning(), p, true,
                                                  tbb::this_task_arena::max_concurrency());
  const detail::Verbose vb;
  const Status st = detail::gemm_execute(plan, p);
  if (vb.on()) {
    char names[96];
    detail::gemm_kernel_names(plan, p.m, t.name, names, sizeof names);
    vb.print(op, st, plan.rule, names, plan.threads, "m:%lld n:%lld k:%lld ta:%c tb:%c",
             (long long)p.m, (long long)p.n, (long long)p.k, trans_char(p.ta), trans_char(p.tb));
  }
  return st;
}

// Asks for the lines of a rows x cols block (rows ld floats apart) to be brought into L2, one
// request per 128-byte pair of lines (the L2's spatial prefetcher fetches the other line; a
// request per line made the 64^3 x 256 batch 3% slower on 1 and 2 threads).
__attribute__((always_inline)) inline void prefetch_block(const float* p, int64_t rows,
                                                          int64_t cols, int64_t ld) {
  if (cols <= 0) return;  // an empty B may have any leading dimension: r * ld could overflow
  for (int64_t r = 0; r < rows; ++r) arch::prefetch_span<2, 32>(p + r * ld, cols);
}

// Items in turn, each parallel over its own blocks. Atomic on a failure to allocate: every item
// has the first one's plan and scratch (the same shape on the same thread), so if the first
// reserved its scratch, the others find it there.
template <class Item>
Status run_in_turn(const arch::GemmKernels& kt, int64_t batch, const Item& item) {
  for (int64_t i = 0; i < batch; ++i) TESSERA_CHECK(detail::gemm_run(kt, item(i)));
  return Status::ok;
}

// One item per task, parallel over the batch.
template <class Item>
Status run_per_task(const arch::GemmKernels& kt, int64_t batch, const Item& item) {
  const detail::GemmProblem first = item(0);
  const int64_t m = first.m, n = first.n, k = first.k, ldb = first.ldb;
  const float* b = first.b;
  const int64_t stride_b = batch > 1 ? item(1).b - b : 0;
  // Each thread takes one contiguous run of items (they are the same size), and while it
  // multiplies one it asks for the next one's B: a small item's operands come from L3 (the
  // 64^3 x 256 batch is 12 MB), and fetched on demand by the packing of B^T, which starts the
  // item, their misses were not hidden by any FMAs. 64^3 x 256 with B^T, 1 thread, 10
  // alternated runs, medians: 132.7 -> 167.4 GFLOP/s and 147.9 -> 169.2. The kernels read A
  // front to back, which the hardware prefetcher follows: asking for it as well was 2% slower
  // (1 thread, two sets of 8 alternated runs: 209.3 against 213.1, 210.9 against 214.6; 2
  // threads the same). So was the next C, and spreading the requests over the item's
  // micro-kernel calls rather than issuing them before its packing (3%). Packing the next
  // item's B^T itself in pieces between this item's micro-kernel calls, into a second buffer,
  // so that its shuffles ran beside the FMAs, was 4% slower on 1 and 2 threads (212.4 against
  // 203.3): two packed B, A and C are 64 KB, more than L1.
  const bool prefetch_next = 4.0 * (double(m) * double(k) + double(k) * double(n)) <=
                             detail::active_tuning().prefetch_next_item_bytes;
  const bool b_rows = !first.tb;
  // Every task's scratch, reserved here before any item writes C: a slice per task running at
  // once, as large as any item's plan needs. Plans can differ only by the operands' alignment,
  // and every pointer's offset within a 64-byte line repeats every 16 items.
  const detail::Tuning& tn = detail::active_tuning();
  size_t floats = 0;
  for (int64_t i = 0; i < std::min<int64_t>(batch, 16); ++i)
    floats = std::max(
        floats, detail::gemm_serial_floats(detail::plan_gemm(kt, tn, item(i), false, 1), item(i)));
  detail::gemm_split::TaskScratch scratch;
  if (!scratch.reserve(floats, true))
    return detail::fail(Status::out_of_memory, "cannot allocate the scratch of the batch's tasks");
  detail::TaskStatus status;
  const auto items = [&](int64_t i0, int64_t i1, float* buf) {
    for (int64_t i = i0; i < i1; ++i) {
      if (prefetch_next && i + 1 < i1)
        prefetch_block(b + (i + 1) * stride_b, b_rows ? k : n, b_rows ? n : k, ldb);
      const detail::GemmProblem p = item(i);
      status.record(detail::gemm_execute(detail::plan_gemm(kt, tn, p, false, 1), p, buf));
    }
  };
  detail::ForkJoin fj;
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, batch),
        detail::task_body(fj,
                          [&](const tbb::blocked_range<int64_t>& r) {
                            scratch.with_slice([&](float* buf) { items(r.begin(), r.end(), buf); });
                          }),
        tbb::static_partitioner());
  });
  fj.join();
  return status.result();
}

}  // namespace

Status sgemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha,
             const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
             int64_t ldc) {
  return detail::in_arena([&] {
    TESSERA_CHECK(detail::check_gemm_sizes(m, n, k));
    TESSERA_CHECK(detail::check_gemm_a(ta, m, k, a, lda));
    TESSERA_CHECK(detail::check_gemm_b(tb, k, n, b, ldb));
    TESSERA_CHECK(detail::check_gemm_c(m, n, c, ldc));
    detail::GemmSpans s;
    TESSERA_CHECK(detail::gemm_spans(ta, tb, m, n, k, lda, ldb, ldc, s));
    TESSERA_CHECK(
        detail::check_disjoint(detail::region("c", c, s.c, 4),
                               {detail::region("a", a, s.a, 4), detail::region("b", b, s.b, 4)}));
    return run_product("sgemm", detail::active_table(),
                       problem(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
  });
}

Status sgemm_strided_batched(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k,
                             float alpha, const float* a, int64_t lda, int64_t stride_a,
                             const float* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                             int64_t ldc, int64_t stride_c, int64_t batch) {
  return detail::in_arena([&] {
    TESSERA_CHECK(detail::check_gemm_sizes(m, n, k));
    TESSERA_CHECK(detail::check_nonneg("batch", batch));
    TESSERA_CHECK(detail::check_gemm_a(ta, m, k, a, lda));
    TESSERA_CHECK(detail::check_gemm_b(tb, k, n, b, ldb));
    TESSERA_CHECK(detail::check_gemm_c(m, n, c, ldc));
    TESSERA_CHECK(detail::check_nonneg("stride_a", stride_a));
    TESSERA_CHECK(detail::check_nonneg("stride_b", stride_b));
    detail::GemmSpans one;
    TESSERA_CHECK(detail::gemm_spans(ta, tb, m, n, k, lda, ldb, ldc, one));
    if (batch > 1 && one.c > 0 && stride_c < one.c) {
      return detail::fail(Status::invalid_argument,
                          "stride_c = %lld makes the C matrices overlap (needs >= %lld)",
                          static_cast<long long>(stride_c), static_cast<long long>(one.c));
    }
    // The whole batch of each operand: (batch - 1) strides past the span of one matrix.
    auto whole = [&](const char* name, int64_t stride, int64_t span, int64_t& out) {
      const int64_t strides[2] = {stride, 1}, extents[2] = {span > 0 ? batch : 0, span};
      return detail::tensor_span(name, strides, extents, 2, sizeof(float), out);
    };
    detail::GemmSpans all;
    TESSERA_CHECK(whole("a", stride_a, one.a, all.a));
    TESSERA_CHECK(whole("b", stride_b, one.b, all.b));
    TESSERA_CHECK(whole("c", stride_c, one.c, all.c));
    TESSERA_CHECK(detail::check_disjoint(
        detail::region("c", c, all.c, 4),
        {detail::region("a", a, all.a, 4), detail::region("b", b, all.b, 4)}));
    if (m == 0 || n == 0 || batch == 0) return Status::ok;
    const arch::KernelTable& table = detail::active_table();
    const arch::GemmKernels& kt = table.gemm;
    auto item = [&](int64_t i) {
      return problem(ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
                     c + i * stride_c, ldc);
    };
    // Problems too small to keep every thread busy on their own (attention's per-head products)
    // run one per task, parallel over the batch; so do larger ones when the batch divides among
    // the threads with at least 90% of them busy (512^3 x 8 on 2 threads: 177 GFLOP/s one after
    // another, each parallel over its blocks with two fork-joins per KC block, against ~2x the
    // 1-thread 133 one per task). Otherwise they run one after another, each parallel over its
    // own blocks. Either way each C matrix is summed in the same order.
    const int64_t threads = tbb::this_task_arena::max_concurrency();
    const int64_t rounds = (batch + threads - 1) / threads;
    const bool per_task =
        double(m) * n * k <= 256.0 * 256 * 256 || double(batch) >= 0.9 * double(rounds * threads);
    const bool one_by_one = batch == 1 || !per_task;
    const detail::Verbose vb;
    const Status st = one_by_one ? run_in_turn(kt, batch, item) : run_per_task(kt, batch, item);
    if (vb.on()) {
      const detail::GemmPlan plan =
          detail::plan_gemm(kt, detail::active_tuning(), item(0), one_by_one, int(threads));
      char names[96], rule[96];
      detail::gemm_kernel_names(plan, m, table.name, names, sizeof names);
      std::snprintf(rule, sizeof rule, "%s-%s", one_by_one ? "items-in-turn" : "item-per-task",
                    plan.rule);
      vb.print("sgemm_batched", st, rule, names, int(threads),
               "batch:%lld m:%lld n:%lld k:%lld ta:%c tb:%c", (long long)batch, (long long)m,
               (long long)n, (long long)k, trans_char(ta == Transpose::trans),
               trans_char(tb == Transpose::trans));
    }
    return st;
  });
}

namespace {

// The bytes a packed op(B) takes under table t, or 0 when that does not fit in size_t.
size_t packed_bytes(const arch::KernelTable& t, int64_t k, int64_t n) {
  const int64_t nr = detail::blocked_kernels(t.gemm, k, n).nr;
  int64_t floats = 0;
  if (!detail::mul_ok(k, (n + nr - 1) / nr * nr, floats) ||
      uint64_t(floats) > (uint64_t(SIZE_MAX) - kHeaderBytes) / sizeof(float))
    return 0;
  return kHeaderBytes + sizeof(float) * size_t(floats);
}

Status check_pack_dims(Transpose tb, int64_t k, int64_t n) {
  TESSERA_CHECK(detail::check_transpose("tb", tb));
  TESSERA_CHECK(detail::check_nonneg("k", k));
  return detail::check_nonneg("n", n);
}

}  // namespace

size_t sgemm_pack_b_size(Transpose tb, int64_t k, int64_t n) {
  if (check_pack_dims(tb, k, n) != Status::ok) return 0;
  const size_t bytes = packed_bytes(detail::active_table(), k, n);
  if (bytes == 0)
    detail::fail(Status::invalid_argument, "k = %lld, n = %lld: the packed size overflows size_t",
                 (long long)k, (long long)n);
  return bytes;
}

namespace {

// Columns of op(B) widened at a time by pack_b_widened: 16 panels of NR.
constexpr int64_t kWidenPanels = 16;

// op(B) stored in 16 bits, packed where gemm_pack_b_full puts the float32 B's panels (element
// (p, j) of a kc block at out[j / NR NR kc + p NR + j % NR], panels in column order): each kc
// block is widened kWidenPanels panels of columns at a time into buf (table conversions, exact)
// and packed from there, so the packed bytes are those of the widened B.
void pack_b_widened(const arch::KernelTable& t, bool tb, int64_t k, int64_t n, DType bt,
                    const uint16_t* b, int64_t ldb, float* buf, float* out) {
  const arch::GemmKernels& kt = detail::blocked_kernels(t.gemm, k, n);
  const int64_t nr = kt.nr, n_padded = (n + nr - 1) / nr * nr, cols = nr * kWidenPanels;
  const auto widen = bt == DType::f16 ? t.convert.f16_to_f32 : t.convert.bf16_to_f32;
  for (int64_t pc = 0; pc < k; pc += kt.kc) {
    const int64_t kc = std::min<int64_t>(kt.kc, k - pc);
    for (int64_t j0 = 0; j0 < n; j0 += cols) {
      const int64_t w = std::min(cols, n - j0);
      if (tb) {  // B stored n x k: op(B)'s columns are its rows
        for (int64_t r = 0; r < w; ++r) widen(kc, b + (j0 + r) * ldb + pc, buf + r * kc);
        kt.pack_b(true, kc, w, buf, kc, out + pc * n_padded + j0 * kc);
      } else {
        for (int64_t p = 0; p < kc; ++p) widen(w, b + (pc + p) * ldb + j0, buf + p * w);
        kt.pack_b(false, kc, w, buf, w, out + pc * n_padded + j0 * kc);
      }
    }
  }
}

}  // namespace

Status sgemm_pack_b_ex(Transpose tb, int64_t k, int64_t n, DType b_type, const void* b, int64_t ldb,
                       void* packed, size_t packed_bytes_given) {
  return detail::in_arena([&] {
    TESSERA_CHECK(detail::check_dtype("b_type", b_type));
    TESSERA_CHECK(check_pack_dims(tb, k, n));
    TESSERA_CHECK(detail::check_ld("ldb", ldb, tb == Transpose::no_trans ? n : k));
    TESSERA_CHECK(detail::check_ptr("b", b, k > 0 && n > 0));
    TESSERA_CHECK(detail::check_ptr("packed", packed, true));
    TESSERA_CHECK(check_packed_alignment(packed));
    int64_t b_span;
    TESSERA_CHECK(detail::matrix_span("b", tb == Transpose::trans ? n : k,
                                      tb == Transpose::trans ? k : n, ldb, b_span));
    // One read of the active table: the size, the layout and the kernels all come from it, so a
    // tessera_set_isa on another thread cannot make the layout outgrow the size checked here.
    const arch::KernelTable& t = detail::active_table();
    const size_t need = packed_bytes(t, k, n);
    if (need == 0)
      return detail::fail(Status::invalid_argument,
                          "k = %lld, n = %lld: the packed size overflows size_t", (long long)k,
                          (long long)n);
    if (packed_bytes_given < need)
      return detail::fail(Status::invalid_argument,
                          "packed_bytes = %zu is below the %zu bytes kernel table \"%s\" needs "
                          "(tessera_sgemm_pack_b_size)",
                          packed_bytes_given, need, t.name);
    TESSERA_CHECK(
        detail::check_disjoint(detail::region("packed", packed, int64_t(need), 1),
                               {detail::region("b", b, b_span, detail::dtype_bytes(b_type))}));
    const arch::GemmKernels& blocked = detail::blocked_kernels(t.gemm, k, n);
    float* buf = nullptr;
    if (b_type != DType::f32 && k > 0 && n > 0) {  // reserved before anything is written
      buf =
          detail::thread_scratch(detail::ScratchSlot::gemm_b)
              .floats(size_t(std::min<int64_t>(blocked.kc, k)) * size_t(blocked.nr * kWidenPanels));
      if (!buf) return detail::fail(Status::out_of_memory, "cannot allocate the widened block");
    }
    PackedBHeader h{};
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    std::strncpy(h.isa, t.name, sizeof h.isa - 1);
    h.k = k;
    h.n = n;
    h.nr = blocked.nr;
    h.kc = blocked.kc;
    std::memcpy(packed, &h, sizeof h);
    // The panels follow the 64-byte header in the caller's float-aligned buffer.
    // cppcheck-suppress invalidPointerCast
    float* out = reinterpret_cast<float*>(static_cast<char*>(packed) + kHeaderBytes);
    if (b_type == DType::f32)
      detail::gemm_pack_b_full(t.gemm, tb == Transpose::trans, k, n, static_cast<const float*>(b),
                               ldb, out);
    else
      pack_b_widened(t, tb == Transpose::trans, k, n, b_type, static_cast<const uint16_t*>(b), ldb,
                     buf, out);
    return Status::ok;
  });
}

Status sgemm_pack_b(Transpose tb, int64_t k, int64_t n, const float* b, int64_t ldb, void* packed,
                    size_t packed_bytes_given) {
  return sgemm_pack_b_ex(tb, k, n, DType::f32, b, ldb, packed, packed_bytes_given);
}

Status sgemm_packed(Transpose ta, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const void* packed, float beta, float* c, int64_t ldc) {
  return detail::in_arena([&] {
    TESSERA_CHECK(detail::check_gemm_sizes(m, n, k));
    TESSERA_CHECK(detail::check_gemm_a(ta, m, k, a, lda));
    TESSERA_CHECK(detail::check_ptr("packed", packed, true));
    TESSERA_CHECK(detail::check_gemm_c(m, n, c, ldc));
    TESSERA_CHECK(check_packed_alignment(packed));
    detail::GemmSpans s;
    TESSERA_CHECK(detail::gemm_spans(ta, Transpose::no_trans, m, n, k, lda, n > 0 ? n : 1, ldc, s));
    PackedBHeader h;
    std::memcpy(&h, packed, sizeof h);
    if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0)
      return detail::fail(Status::invalid_argument,
                          "packed was not written by tessera_sgemm_pack_b");
    if (h.k != k || h.n != n)
      return detail::fail(Status::invalid_argument,
                          "packed holds a %lld x %lld B but k = %lld, n = %lld", (long long)h.k,
                          (long long)h.n, (long long)k, (long long)n);
    const arch::KernelTable& t = detail::active_table();  // read once per call
    h.isa[sizeof h.isa - 1] = '\0';
    if (std::strcmp(h.isa, t.name) != 0)
      return detail::fail(Status::invalid_argument,
                          "packed was packed for kernel table \"%s\" but \"%s\" is active", h.isa,
                          t.name);
    const arch::GemmKernels& blocked = detail::blocked_kernels(t.gemm, k, n);
    if (h.nr != blocked.nr || h.kc != blocked.kc)
      return detail::fail(Status::invalid_argument, "packed was written with another blocking");
    TESSERA_CHECK(detail::check_disjoint(
        detail::region("c", c, s.c, 4),
        {detail::region("a", a, s.a, 4),
         detail::region("packed", packed, int64_t(packed_bytes(t, k, n)), 1)}));
    detail::GemmProblem p =
        problem(ta, Transpose::no_trans, m, n, k, alpha, a, lda, nullptr, 1, beta, c, ldc);
    // cppcheck-suppress invalidPointerCast
    p.b_packed = reinterpret_cast<const float*>(static_cast<const char*>(packed) + kHeaderBytes);
    return run_product("sgemm_packed", t, p);
  });
}

}  // namespace tessera
