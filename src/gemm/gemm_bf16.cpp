// bf16 x bf16 -> float32 on the bf16 dot-product tile, in BLIS's loops with k counted in pairs:
// op(B) is packed whole, once, into NR-column panels of k pairs cut into k blocks of KC (each
// B micro-panel KC x NR read from L2 by every tile of a row block); tasks over row blocks of
// at most MC rows (and over columns when rows are too few for the threads) pack their rows of
// op(A) for one k block into MR-row panels (kept in L2) and run the tile over every panel of
// their columns. The k blocks are added into C in order (beta on the first, 1 after), so each C
// element is summed in the same order for any thread count or grid.
#include "gemm/gemm_bf16.hpp"

#include <algorithm>

#include "gemm/gemm_split.hpp"
#include "runtime/error.hpp"
#include "runtime/scratch.hpp"

namespace tessera::detail {
namespace {

using gemm_split::line_floats;
using gemm_split::round_up;

// Halves as the float scratch holds them.
uint16_t* halves(float* p) { return static_cast<uint16_t*>(static_cast<void*>(p)); }

}  // namespace

Status gemm_bf16_dot(const arch::Bf16DotKernels& d, const Bf16Gemm& q) {
  const int64_t MR = d.mr, NR = d.nr, KC = d.kc;
  const int64_t panels = ceil_div(q.n, NR), k_blocks = ceil_div(q.k, KC);
  // Row blocks as even as whole MR-row tiles allow.
  const int64_t row_blocks = ceil_div(q.m, d.mc);
  const int64_t block_rows = round_up(ceil_div(q.m, row_blocks), MR);
  // k block kb (kw elements, kw2 rounded up to a pair) starts at kb KC panels NR halves; its
  // panel jp at jp NR kw2 after that.
  const size_t b_halves = size_t(panels * NR * round_up(q.k, 2));
  float* b_buf = thread_scratch(ScratchSlot::gemm_b).floats(b_halves / 2);
  gemm_split::TaskScratch scratch;  // both reserved before any task writes C
  if (b_buf == nullptr || !scratch.reserve(line_floats(size_t(block_rows * KC / 2)), true))
    return fail(Status::out_of_memory, "cannot allocate the packed bf16 panels");
  uint16_t* bp = halves(b_buf);
  const auto k_block = [&](int64_t kb, int64_t& p0, int64_t& kw, int64_t& kw2) {
    p0 = kb * KC, kw = std::min(KC, q.k - p0), kw2 = round_up(kw, 2);
  };
  // B: (lane j, k index p) of op(B) is b[p ldb + j], or b[j ldb + p] when B^T is stored.
  constexpr int64_t kPanelsPerTask = 16;
  const int64_t panel_tasks = ceil_div(panels, kPanelsPerTask);
  gemm_split::for_each_task(k_blocks * panel_tasks, [&](int64_t t) {
    int64_t p0, kw, kw2;
    k_block(t / panel_tasks, p0, kw, kw2);
    const int64_t jp0 = t % panel_tasks * kPanelsPerTask;
    for (int64_t jp = jp0; jp < std::min(panels, jp0 + kPanelsPerTask); ++jp) {
      const int64_t j0 = jp * NR;
      const uint16_t* src = q.tb ? q.b + j0 * q.ldb + p0 : q.b + p0 * q.ldb + j0;
      d.pack(!q.tb, std::min(NR, q.n - j0), kw, src, q.ldb, NR,
             bp + p0 * panels * NR + jp * NR * kw2);
    }
  });
  gemm_split::for_grid(
      row_blocks, panels, true, [&](int64_t rb0, int64_t rb1, int64_t jp0, int64_t jp1) {
        scratch.with_slice([&](float* slice) {
          uint16_t* ap = halves(slice);
          for (int64_t rb = rb0; rb < rb1; ++rb) {
            const int64_t i0 = rb * block_rows, rows = std::min(block_rows, q.m - i0);
            for (int64_t kb = 0; kb < k_blocks; ++kb) {
              int64_t p0, kw, kw2;
              k_block(kb, p0, kw, kw2);
              for (int64_t r0 = 0; r0 < rows; r0 += MR) {
                const int64_t i = i0 + r0;
                const uint16_t* src = q.ta ? q.a + p0 * q.lda + i : q.a + i * q.lda + p0;
                d.pack(q.ta, std::min(MR, rows - r0), kw, src, q.lda, MR, ap + r0 * kw2);
              }
              const float beta = kb == 0 ? q.beta : 1.0f;
              const uint16_t* b_block = bp + p0 * panels * NR;
              const auto tile = [&](int64_t r0, int64_t jp) {
                const int64_t r = std::min(MR, rows - r0), j0 = jp * NR;
                d.packed[r](kw2 / 2, ap + r0 * kw2, b_block + jp * NR * kw2,
                            q.c + (i0 + r0) * q.ldc + j0, q.ldc, std::min(NR, q.n - j0), q.alpha,
                            beta);
              };
              if (kw <= d.rows_outer_k) {  // each MR-row strip of C across the columns
                for (int64_t r0 = 0; r0 < rows; r0 += MR)
                  for (int64_t jp = jp0; jp < jp1; ++jp) tile(r0, jp);
              } else {  // each B micro-panel down the row block
                for (int64_t jp = jp0; jp < jp1; ++jp)
                  for (int64_t r0 = 0; r0 < rows; r0 += MR) tile(r0, jp);
              }
            }
          }
        });
      });
  return Status::ok;
}

bool bf16_dot_rows_fit(const arch::Bf16DotKernels& d, const Bf16Gemm& q) {
  return d.dot_rows > 0 && q.tb && !q.ta && q.m <= 2 * d.dot_rows;
}

// Tasks over chunks of 256 columns; each C element is one call's sum (k in order), whatever the
// split. A packed path would read and write all of B to use it once or twice.
Status gemm_bf16_dot_rows(const arch::Bf16DotKernels& d, const Bf16Gemm& q) {
  constexpr int64_t kChunk = 256;
  gemm_split::for_each_task(ceil_div(q.n, kChunk), [&](int64_t t) {
    const int64_t j0 = t * kChunk, j1 = std::min(q.n, j0 + kChunk);
    for (int64_t i = 0; i < q.m; i += d.dot_rows) {
      const int rows = int(std::min<int64_t>(d.dot_rows, q.m - i));
      const int64_t J = d.dot_cols[rows];
      const uint16_t* a = q.a + i * q.lda;
      float* c = q.c + i * q.ldc;
      int64_t j = j0;
      for (; j + J <= j1; j += J)
        d.dot[rows](q.k, a, q.lda, q.b + j * q.ldb, q.ldb, c + j, q.ldc, q.alpha, q.beta);
      for (; j < j1; ++j)
        d.dot1[rows](q.k, a, q.lda, q.b + j * q.ldb, q.ldb, c + j, q.ldc, q.alpha, q.beta);
    }
  });
  return Status::ok;
}

}  // namespace tessera::detail
