// Half-precision GEMM: C = f16(alpha op(A) op(B) + beta C), A, B and C f16. Two executors:
//  - fp16 arithmetic (the table has HalfGemmKernels: FEAT_FP16 on AArch64): op(B) is packed whole
//    into NR-column f16 panels, then tasks over a grid of C blocks (the tuning row's
//    hgemm_block_rows x hgemm_block_panels NR columns) pack their rows of op(A) into MR-row f16
//    panels and call the tile kernel over all of k into a float32 copy of their C block, rounded
//    into C at the end. The kernel sums chunks of k in fp16 (twice the lanes of float32 per FMA:
//    the point) and adds the chunks in float32 (the bound in tessera.h). Each C element is one
//    kernel call's, so C is the same for any thread count and block size.
//  - float32 arithmetic elsewhere: gemm_ex on the f16 operands (widened exactly as packed) into
//    a float32 block of C rows, then rounded into C. Tighter than the fp16 bound, same contract.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "gemm/gemm_check.hpp"
#include "gemm/gemm_split.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/error.hpp"
#include "runtime/scratch.hpp"
#include "runtime/threading.hpp"
#include "runtime/tsan.hpp"
#include "runtime/tuning.hpp"
#include "runtime/verbose.hpp"
#include "tessera/gemm.hpp"

namespace tessera {
namespace {

using detail::gemm_split::line_floats;

// The float32 executor's C rows per gemm_ex call (its widened block of C).
constexpr int64_t kWideRows = 256;

struct Problem {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  const uint16_t *a, *b;
  int64_t lda, ldb;
  uint16_t* c;
  int64_t ldc;
  uint16_t a_at(int64_t i, int64_t p) const { return ta ? a[p * lda + i] : a[i * lda + p]; }
  uint16_t b_at(int64_t p, int64_t j) const { return tb ? b[j * ldb + p] : b[p * ldb + j]; }
};

// C = f16(beta C) (alpha = 0 or k = 0: A and B unread; beta = 0 writes zeros, C unread).
void scale_c(const arch::ConvertKernels& cv, const Problem& q) {
  float row[256];
  for (int64_t i = 0; i < q.m; ++i)
    for (int64_t j = 0; j < q.n; j += 256) {
      const int64_t w = std::min<int64_t>(256, q.n - j);
      uint16_t* c = q.c + i * q.ldc + j;
      if (q.beta == 0.0f) {
        std::fill(row, row + w, 0.0f);
      } else {
        cv.f16_to_f32(w, c, row);
        for (int64_t x = 0; x < w; ++x) row[x] *= q.beta;
      }
      cv.f32_to_f16(w, row, c);
    }
}

Status fp16_arithmetic(const arch::KernelTable& t, const Problem& q) {
  const arch::HalfGemmKernels& h = t.hgemm;
  const detail::Tuning& tn = detail::active_tuning();
  const int64_t block_rows = tn.hgemm_block_rows, block_panels = tn.hgemm_block_panels;
  const int64_t MR = h.mr, NR = h.nr, panels = (q.n + NR - 1) / NR, ldw = block_panels * NR;
  const size_t b_halves = size_t(panels * NR * q.k);
  const size_t a_floats = line_floats(size_t(block_rows * q.k + 1) / 2);
  float* b_buf = detail::thread_scratch(detail::ScratchSlot::gemm_b).floats(b_halves / 2 + 1);
  detail::gemm_split::TaskScratch scratch;  // both reserved before any task writes C
  if (b_buf == nullptr || !scratch.reserve(a_floats + size_t(block_rows * ldw), true))
    return detail::fail(Status::out_of_memory, "cannot allocate the packed f16 panels");
  auto* bp = static_cast<uint16_t*>(static_cast<void*>(b_buf));  // scratch is raw bytes
  detail::gemm_split::for_each_task(panels, [&](int64_t jp) {
    uint16_t* out = bp + jp * NR * q.k;
    const int64_t j0 = jp * NR, w = std::min(NR, q.n - j0);
    for (int64_t p = 0; p < q.k; ++p, out += NR) {
      for (int64_t j = 0; j < w; ++j) out[j] = q.b_at(p, j0 + j);
      std::fill(out + w, out + NR, uint16_t(0));
    }
  });
  const int64_t row_blocks = (q.m + block_rows - 1) / block_rows;
  const int64_t col_blocks = (panels + block_panels - 1) / block_panels;
  detail::gemm_split::for_each_task(row_blocks * col_blocks, [&](int64_t task) {
    const int64_t i0 = (task / col_blocks) * block_rows, rows = std::min(block_rows, q.m - i0);
    const int64_t jp0 = (task % col_blocks) * block_panels;
    const int64_t j0 = jp0 * NR, cols = std::min(ldw, q.n - j0);
    scratch.with_slice([&](float* slice) {
      auto* ap = static_cast<uint16_t*>(static_cast<void*>(slice));
      float* wide = slice + a_floats;              // the block of C in float32, rows ldw apart
      for (int64_t r0 = 0; r0 < rows; r0 += MR) {  // A(i0 + r0 + i, p) at ap[r0 k + p MR + i]
        uint16_t* out = ap + r0 * q.k;
        const int64_t r = std::min(MR, rows - r0);
        for (int64_t p = 0; p < q.k; ++p)
          for (int64_t i = 0; i < r; ++i) out[p * MR + i] = q.a_at(i0 + r0 + i, p);
      }
      uint16_t* c = q.c + i0 * q.ldc + j0;
      if (q.beta != 0.0f)
        for (int64_t i = 0; i < rows; ++i)
          t.convert.f16_to_f32(cols, c + i * q.ldc, wide + i * ldw);
      for (int64_t j = 0; j < cols; j += NR)
        for (int64_t r0 = 0; r0 < rows; r0 += MR) {
          const int64_t r = std::min(MR, rows - r0);
          h.packed[r](q.k, ap + r0 * q.k, bp + (jp0 + j / NR) * NR * q.k, wide + r0 * ldw + j, ldw,
                      std::min(NR, cols - j), q.alpha, q.beta);
        }
      for (int64_t i = 0; i < rows; ++i) t.convert.f32_to_f16(cols, wide + i * ldw, c + i * q.ldc);
    });
  });
  return Status::ok;
}

// gemm_ex reserves all its scratch before writing C; the first block's reservation is kept by
// this thread (grown to the largest need), so a later block's cannot fail after C is written.
Status fp32_arithmetic(const arch::ConvertKernels& cv, const Problem& q) {
  const int64_t rows = std::min(q.m, kWideRows);
  float* buf = detail::thread_scratch(detail::ScratchSlot::gemm_b).floats(size_t(rows * q.n));
  if (buf == nullptr) return detail::fail(Status::out_of_memory, "cannot allocate a block of C");
  for (int64_t i0 = 0; i0 < q.m; i0 += kWideRows) {
    const int64_t mw = std::min(kWideRows, q.m - i0);
    if (q.beta != 0.0f)
      for (int64_t i = 0; i < mw; ++i) cv.f16_to_f32(q.n, q.c + (i0 + i) * q.ldc, buf + i * q.n);
    const uint16_t* a = q.ta ? q.a + i0 : q.a + i0 * q.lda;
    TESSERA_CHECK(gemm_ex(q.ta ? Transpose::trans : Transpose::no_trans,
                          q.tb ? Transpose::trans : Transpose::no_trans, mw, q.n, q.k, q.alpha,
                          DType::f16, a, q.lda, DType::f16, q.b, q.ldb, q.beta, buf, q.n));
    for (int64_t i = 0; i < mw; ++i) cv.f32_to_f16(q.n, buf + i * q.n, q.c + (i0 + i) * q.ldc);
  }
  return Status::ok;
}

}  // namespace

Status hgemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha,
             const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c,
             int64_t ldc) {
  return detail::in_arena([&] {
    TESSERA_CHECK(detail::check_gemm_sizes(m, n, k));
    TESSERA_CHECK(detail::check_transpose("ta", ta));
    TESSERA_CHECK(detail::check_ld("lda", lda, ta == Transpose::no_trans ? k : m));
    TESSERA_CHECK(detail::check_ptr("a", a, m > 0 && k > 0));
    TESSERA_CHECK(detail::check_transpose("tb", tb));
    TESSERA_CHECK(detail::check_ld("ldb", ldb, tb == Transpose::no_trans ? n : k));
    TESSERA_CHECK(detail::check_ptr("b", b, k > 0 && n > 0));
    TESSERA_CHECK(detail::check_ld("ldc", ldc, n));
    TESSERA_CHECK(detail::check_ptr("c", c, m > 0 && n > 0));
    detail::GemmSpans s;
    TESSERA_CHECK(detail::gemm_spans(ta, tb, m, n, k, lda, ldb, ldc, s));
    TESSERA_CHECK(
        detail::check_disjoint(detail::region("c", c, s.c, 2),
                               {detail::region("a", a, s.a, 2), detail::region("b", b, s.b, 2)}));
    const arch::KernelTable& t = detail::active_table();
    const Problem q{ta == Transpose::trans,
                    tb == Transpose::trans,
                    m,
                    n,
                    k,
                    alpha,
                    beta,
                    static_cast<const uint16_t*>(a),
                    static_cast<const uint16_t*>(b),
                    lda,
                    ldb,
                    static_cast<uint16_t*>(c),
                    ldc};
    if (m == 0 || n == 0) return Status::ok;
    const bool fp16 = t.hgemm.packed[1] != nullptr;
    const detail::Verbose vb;
    Status st = Status::ok;
    if (k == 0 || alpha == 0.0f)
      scale_c(t.convert, q);
    else
      st = fp16 ? fp16_arithmetic(t, q) : fp32_arithmetic(t.convert, q);
    if (vb.on()) {
      char names[64];
      if (fp16)
        std::snprintf(names, sizeof names, "f16_hgemm_packed_%dx%d_%s", t.hgemm.mr, t.hgemm.nr,
                      t.name);
      else
        std::snprintf(names, sizeof names, "f16_f16_f32_gemm_widened_%s", t.name);
      vb.print("hgemm", st, fp16 ? "fp16-arithmetic" : "float32-arithmetic", names,
               tbb::this_task_arena::max_concurrency(), "m:%lld n:%lld k:%lld ta:%c tb:%c",
               (long long)m, (long long)n, (long long)k, ta == Transpose::trans ? 'T' : 'N',
               tb == Transpose::trans ? 'T' : 'N');
    }
    return st;
  });
}

}  // namespace tessera
