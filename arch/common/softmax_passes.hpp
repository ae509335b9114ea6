// Softmax row passes (arch/common/softmax.hpp has the family's contract): the one-read
// stream kernel, the max pass, the exp-and-sum pass, the affine pass and the next row's
// prefetch, written once over the xsimd arch.
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <cstdint>
#include <limits>
#include <utility>

#include "../kernels.hpp"
#include "exp.hpp"
#include "fmadd.hpp"
#include "lanes.hpp"
#include "prefetch.hpp"
#include "realign.hpp"
#include "softmax_base.hpp"
#include "stream.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

namespace softmax_detail {

constexpr int kBlock = 4;

// How far a tile's max may rise above fused attention's running max before the running max
// moves (lazy rescaling). Below it the tile's exps are taken against the old max: they may reach
// e^4 ~ 55 instead of 1, which costs that factor of float's headroom in the sums and in O and
// nothing in relative precision, and the row's O and l need no rescale. With the max moving by
// any amount, O was rescaled for about half the rows of every second tile (3% of fused attention
// at L = 512).
constexpr float kRescaleSlack = 4.0f;

}  // namespace softmax_detail

// How far ahead the stream kernel prefetches, into L1: the hardware prefetcher alone kept only
// a third of the read rate under ~10 operations per line (4096 x 4096 logsumexp, 1 thread: 8
// GB/s against 17-27 for a bare read), as it tracks demand loads that the exps hold back; 8 KB
// ahead, across page boundaries where it stops, a synthetic read with 10 FMAs per line ran at
// 25-27 GB/s into L1 and 22-23 into L2 (1 KB ahead: 11-12). Here, 10 interleaved runs, 4096 x
// 4096: to L2 23.3 (1 thread) / 43.0 (2) GB/s, to L1 25.6 / 48.2; rows in L2 unchanged.
// Prefetches past the row's end are harmless (no fault) and, for consecutive rows, the next
// row's.
constexpr int64_t kStreamAhead = 2048;

// (max, sum) of one row in a single read, for rows that come from memory: Milakov &
// Gimelshein's online normalizer, per lane. Each lane keeps a reference max and a sum relative
// to it. The paper's form moves the reference at every step (with blocks of 4 vectors, 1.25
// exps per element); here a block moves it only where it exceeds it by more than kRescaleSlack
// (the lazy rescale of fused attention: terms up to e^4, which costs float's headroom that
// factor and no precision), so after a row's first block the reference almost never moves
// (uniform or Gaussian data: never), and the pass is one exp per element plus a max per vector
// and a compare per block (against a threshold kept in x's units), one stream of loads, the
// lines prefetched kStreamAhead ahead. (Moving it whenever some lane's max rose made 4096-column
// rows 20% slower: in the first 16 blocks nearly every block raises one of the 16 lanes.) The
// reported max is the reference (the largest lane's): (max, sum) give the same lse. Sums in two
// levels as exp_sum's.
template <class Arch>
void softmax_stats_stream(int64_t n, const float* x, float scale, float* out_max, float* out_sum) {
  using namespace softmax_detail;
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  constexpr int64_t kSumBlock = 512;
  static_assert(kBlock == 4);
  const ShiftedExp<Arch, 5, true> ex(scale);  // statistics only: see ShiftedExp
  const B vs(scale);
  // Per lane: the reference m (scaled units), the threshold (m + slack) / scale in x's units
  // (inf when that overflows: then no float x exceeds it, and a +inf x shows as an inf sum), the
  // exps' offset (0 while m = -inf, so that -inf entries give exp 0 rather than NaN).
  B m(kNegInf), threshold(kNegInf), off(0.0f), s0(0.0f), s1(0.0f), total(0.0f);
  auto raise = [&](B xmax) {
    const auto up = xmax > threshold;
    const B m_new = xsimd::select(up, xmax * vs, m);
    const B factor = xsimd::select(up, exp_vec_nonpositive<Arch>(m - m_new), B(1.0f));
    s0 *= factor;
    s1 *= factor;
    total *= factor;
    m = m_new;
    threshold = (m + B(kRescaleSlack)) / vs;
    off = xsimd::select(m == B(kNegInf), B(0.0f), ex.offset(m));
  };
  int64_t i = 0;
  while (i + kBlock * W <= n) {
    const int64_t block_end = n - i > kSumBlock ? i + kSumBlock : n;
    for (; i + kBlock * W <= block_end; i += kBlock * W) {
      prefetch_lines<kBlock * W, 0, 3>(x + i + kStreamAhead);
      const B v0 = B::load_unaligned(x + i), v1 = B::load_unaligned(x + i + W);
      const B v2 = B::load_unaligned(x + i + 2 * W), v3 = B::load_unaligned(x + i + 3 * W);
      const B bmax = xsimd::max(xsimd::max(v0, v1), xsimd::max(v2, v3));
      if (xsimd::any(bmax > threshold)) raise(bmax);
      s0 += ex(v0, off) + ex(v1, off);
      s1 += ex(v2, off) + ex(v3, off);
    }
    total += s0 + s1;
    s0 = B(0.0f);
    s1 = B(0.0f);
  }
  for (; i < n; i += W) {
    const B v = i + W <= n ? B::load_unaligned(x + i) : load_tail<Arch>(x + i, n - i);
    if (xsimd::any(v > threshold)) raise(v);
    total += ex(v, off);
  }
  reduce_lanes<Arch>(m, total, out_max, out_sum);
}

// max_j x_j (unscaled; NaN may or may not win, the sums catch it).
template <class Arch>
float row_max(int64_t n, const float* x) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  B m0(softmax_detail::kNegInf), m1(softmax_detail::kNegInf);
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    m0 = xsimd::max(m0, B::load_unaligned(x + i));
    m1 = xsimd::max(m1, B::load_unaligned(x + i + W));
  }
  if (i + W <= n) {
    m0 = xsimd::max(m0, B::load_unaligned(x + i));
    i += W;
  }
  float m = softmax_detail::max_across<Arch>(xsimd::max(m0, m1));
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// The next row's lines, fetched while this row's exp pass computes (about 10 cycles of exp per
// 64-byte line on AVX-512): its x for reading, its y (when written) for writing. The next row's
// max pass then reads L1 or L2 instead of waiting on memory at every page, where the hardware
// prefetcher starts over; the exp pass's stores find their lines already owned. x goes to L1
// when two rows fit there beside the rest (rows up to kL1Row floats), else to L2, also while the
// previous row streams out (its exps then make a third row in L1). On an x86-intel-avx512 core
// L2 had looked better in that case (4096 x 4096, 2 threads, noisy: ~36 -> ~38 GB/s); on x86-zen5,
// interleaved, medians of 3 x 5 runs, L2 -> L1: 27.7 -> 33.5 GB/s on 1 thread (copy: 37.0),
// 43.9 -> 46.4 on 2 (copy: 45.5).
struct NextRow {
  const float* x = nullptr;
  float* y = nullptr;
};

inline constexpr int64_t kL1Row = 4096;

template <int64_t kFloats>
TESSERA_ALWAYS_INLINE void prefetch_next(NextRow next, int64_t i, bool x_to_l1) {
  if (next.x) {
    if (x_to_l1)
      prefetch_lines<kFloats, 0, 3>(next.x + i);
    else
      prefetch_lines<kFloats, 0, 2>(next.x + i);
  }
  if (next.y) prefetch_lines<kFloats, 1, 2>(next.y + i);
}

// y = src * mul with streaming stores (src in cache, y headed for memory), in steps: the
// unaligned head and the tail store normally, the aligned body streams. softmax_rows_each runs
// it for the previous row inside the current row's exp pass (two vectors per exp step), so the
// stores drain to memory while the exps compute instead of after them: run as a pass of its
// own, it left the core waiting on the write-combining buffers for a third of each row
// (4096 x 4096, 2 threads: see softmax_rows_each).
template <class Arch>
class ScaleStream {
  using B = xsimd::batch<float, Arch>;
  static constexpr int64_t W = B::size;

 public:
  ScaleStream() = default;
  ScaleStream(int64_t n, const float* src, float mul, float* y)
      : n_(n), src_(src), y_(y), mul_(mul) {
    const int64_t misaligned = int64_t(reinterpret_cast<uintptr_t>(y) / sizeof(float)) % W;
    const int64_t head = misaligned == 0 ? 0 : (W - misaligned < n ? W - misaligned : n);
    for (; j_ < head; ++j_) y_[j_] = src_[j_] * mul_;
  }
  bool active() const { return y_ != nullptr; }
  // Up to two vectors.
  void step() {
    for (int v = 0; v < 2 && j_ + W <= n_; ++v, j_ += W)
      store_stream<Arch>(B::load_unaligned(src_ + j_) * B(mul_), y_ + j_);
  }
  void finish() {
    if (!y_) return;
    for (; j_ + W <= n_; j_ += W)
      store_stream<Arch>(B::load_unaligned(src_ + j_) * B(mul_), y_ + j_);
    for (; j_ < n_; ++j_) y_[j_] = src_[j_] * mul_;
    y_ = nullptr;
  }

 private:
  int64_t n_ = 0, j_ = 0;
  const float* src_ = nullptr;
  float* y_ = nullptr;
  float mul_ = 0.0f;
};

// sum_j exp(scale x_j - shift), storing the terms in y when y is not null (y may equal x).
// shift is the row's max, so every argument is <= 0 (up to one rounding): ShiftedExp.
// kOneShift: these exps are never combined with exps taken against another shift (a whole
// softmax row, normalised by their own sum), so the shift may be folded into the exp's first
// FMA (ShiftedExp's kFoldShift; 16384 x 128 softmax, 1 thread: 3% faster).
template <class Arch, bool kOneShift = false>
float exp_sum_next(int64_t n, const float* x, float scale, float shift, float* y, NextRow next,
                   ScaleStream<Arch> drain = {}) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  // Two-level sum: partial sums over blocks of kSumBlock floats, then a sum of those, so the
  // rounding error grows with n / kSumBlock + kSumBlock / (2 W) rather than n / (2 W) (on SSE2 a
  // 16K-column row otherwise put 2048 terms in each accumulator: 1.5e-6 relative).
  constexpr int64_t kSumBlock = 512;
  B s0(0.0f), s1(0.0f), total(0.0f);
  const ShiftedExp<Arch, 6, kOneShift> ex(scale);
  const B off = ex.offset(B(shift));
  int64_t i = 0;
  // x through aligned loads (realign.hpp): same lanes, no line-split loads. 4096 x 4096, x and y
  // 16 bytes off a line (std::vector), 2 threads, median of 100: 42.1 -> 44.2 GB/s (43.3 -> 45.6
  // in a second run); aligned rows unchanged.
  SequentialReader<Arch> xs(x, n / (2 * W) * 2);
  while (i + 2 * W <= n) {
    const int64_t block_end = n - i > kSumBlock ? i + kSumBlock : n;
    for (; i + 2 * W <= block_end; i += 2 * W) {
      prefetch_next<2 * W>(next, i, n <= kL1Row);
      if (drain.active()) drain.step();
      const B e0 = ex(xs.next(), off);
      const B e1 = ex(xs.next(), off);
      if (y) {
        e0.store_unaligned(y + i);
        e1.store_unaligned(y + i + W);
      }
      s0 += e0;
      s1 += e1;
    }
    total += s0 + s1;
    s0 = B(0.0f);
    s1 = B(0.0f);
  }
  for (; i < n; i += W) {
    const int64_t len = n - i < W ? n - i : W;
    const B e = ex(softmax_detail::load_tail<Arch>(x + i, len), off);
    if (y) softmax_detail::store_tail<Arch>(e, y + i, len);
    total += e;
  }
  drain.finish();
  return softmax_detail::sum_across<Arch>(total);
}

template <class Arch>
float exp_sum(int64_t n, const float* x, float scale, float shift, float* y) {
  return exp_sum_next<Arch>(n, x, scale, shift, y, NextRow{});
}

// y = x * mul + add (the normalising pass of the exp-store variant, and log-softmax's
// scale x - lse).
template <class Arch>
void affine(int64_t n, const float* x, float mul, float add, float* y) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  const B vmul(mul), vadd(add);
  int64_t i = 0;
  for (; i + W <= n; i += W) fmadd(B::load_unaligned(x + i), vmul, vadd).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = x[i] * mul + add;
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
