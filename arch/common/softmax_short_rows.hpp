// Softmax of short rows a group at a time (arch/common/softmax.hpp has the family's
// contract), shared by the cached softmax rows and fused attention's tile softmax.
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <cstdint>

#include "softmax_passes.hpp"
#include "softmax_register_rows.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

// Short rows, kGroup at a time. A 128-column row is 8 AVX-512 vectors, and one row's chain
// (max loads, butterfly, exps, sum, reciprocal) is longer than its work: alone, a row left the
// FMA ports idle half the time; four independent rows in one loop fill them. Rows outside a
// group go through the same code with G = 1, so that a row's result never depends on whether
// the caller's blocking put it in a group (results must not change with the thread count).
namespace softmax_detail {

constexpr int64_t kShortCols = 256;
constexpr int kGroup = kSoftmaxRowGroup;

// G rows' vectors as named values: GCC 12 keeps an array of batches in memory, and the exp
// pass's four sums then went through the stack at every step.
template <class B, int G>
struct Rows;
template <class B>
struct Rows<B, 1> {
  B a;
  template <class F>
  void each(F f) {
    f(0, a);
  }
  B at(int) const { return a; }
};
template <class B>
struct Rows<B, 4> {
  B a, b, c, d;
  template <class F>
  void each(F f) {
    f(0, a);
    f(1, b);
    f(2, c);
    f(3, d);
  }
  B at(int g) const { return g == 0 ? a : g == 1 ? b : g == 2 ? c : d; }
};

// (max, sum) of G rows ldx apart, their exps stored in y (ldy apart) unless y is null; y may
// equal x. floor (null: none): per row, the reference the row's max replaces only when it
// exceeds it by more than kRescaleSlack (attention's running max; see attention_tile_rows). next:
// the next group's x and y (null: none), prefetched during the exp pass. Returns false, having
// written only out_max, when a row's max is not finite (the caller classifies the row).
// kOneShift as exp_sum_next's (not for attention, whose tiles meet different running maxima).
template <class Arch, int G, bool kOneShift>
bool group_exp_pass(int64_t n, const float* x, int64_t ldx, float scale, const float* floor,
                    float* y, int64_t ldy, float* out_max, float* out_sum, NextRow next) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  const int64_t body = n - n % W, tail = n % W;
  Rows<B, G> m;
  m.each([&](int, B& v) { v = B(kNegInf); });
  for (int64_t i = 0; i < body; i += W)
    m.each([&](int g, B& v) { v = xsimd::max(v, B::load_unaligned(x + g * ldx + i)); });
  if (tail)
    m.each([&](int g, B& v) { v = xsimd::max(v, load_tail<Arch>(x + g * ldx + body, tail)); });
  bool finite = true;
  const ShiftedExp<Arch, 6, kOneShift> ex(scale);
  Rows<B, G> shift = m;  // each row's offset(max)
  shift.each([&](int g, B& v) {
    out_max[g] = max_across<Arch>(v) * scale;
    // (A NaN row max stays NaN: the comparison is false for it.)
    if (floor && floor[g] + kRescaleSlack >= out_max[g]) out_max[g] = floor[g];
    finite &= out_max[g] > kNegInf && out_max[g] < -kNegInf;
    v = ex.offset(B(out_max[g]));
  });
  if (!finite) return false;
  Rows<B, G> s;
  s.each([&](int, B& v) { v = B(0.0f); });
  auto exp_step = [&](int64_t i, B xv, int g, B& sum) {
    const B e = ex(xv, shift.at(g));
    if (y) {
      if (i < body)
        e.store_unaligned(y + g * ldy + i);
      else
        store_tail<Arch>(e, y + g * ldy + i, tail);
    }
    sum += e;
  };
  for (int64_t i = 0; i < body; i += W) {
    // The next group's rows, one line per row per vector step (W floats <= 64 bytes): the next
    // max pass then reads L1 rather than waiting on L3 at every line, and its stores find their
    // lines owned.
    for (int g = 0; g < G; ++g) {
      if (next.x) __builtin_prefetch(next.x + g * ldx + i, 0, 3);
      if (next.y) __builtin_prefetch(next.y + g * ldy + i, 1, 2);
    }
    s.each([&](int g, B& sum) { exp_step(i, B::load_unaligned(x + g * ldx + i), g, sum); });
  }
  if (tail)
    s.each(
        [&](int g, B& sum) { exp_step(body, load_tail<Arch>(x + g * ldx + body, tail), g, sum); });
  s.each([&](int g, B& sum) { out_sum[g] = sum_across<Arch>(sum); });
  return true;
}

// Rows [0, rows) of at most kShortCols columns: groups of kGroup, then single rows, a group
// with a non-finite max row again row by row; each finished set of rows handed to
// done(first, count) after the next set's exp pass (its sums' latency then overlaps that work).
// A row whose max is not finite gets sum NaN and is not passed to done.
template <class Arch, bool kOneShift, class Done>
void short_rows(int64_t rows, int64_t n, const float* x, int64_t ldx, float scale,
                const float* floor, float* y, int64_t ldy, float* out_max, float* out_sum,
                Done done) {
  int64_t pending = 0, pending_count = 0;
  auto at = [&](int64_t r) { return floor ? floor + r : nullptr; };
  auto single = [&](int64_t r, NextRow next) {
    if (group_exp_pass<Arch, 1, kOneShift>(n, x + r * ldx, ldx, scale, at(r),
                                           y ? y + r * ldy : nullptr, ldy, out_max + r, out_sum + r,
                                           next))
      return true;
    out_sum[r] = std::numeric_limits<float>::quiet_NaN();
    return false;
  };
  for (int64_t r = 0; r < rows;) {
    const int64_t count = rows - r >= kGroup ? kGroup : 1;
    const bool more = r + count < rows;
    const NextRow next{more ? x + (r + count) * ldx : nullptr,
                       more && y ? y + (r + count) * ldy : nullptr};
    const bool whole =
        count == kGroup ? group_exp_pass<Arch, kGroup, kOneShift>(n, x + r * ldx, ldx, scale, at(r),
                                                                  y ? y + r * ldy : nullptr, ldy,
                                                                  out_max + r, out_sum + r, next)
                        : single(r, next);
    if (pending_count) done(pending, pending_count);
    pending_count = 0;
    if (whole) {
      pending = r, pending_count = count;
    } else if (count > 1) {
      for (int64_t i = r; i < r + count; ++i)
        if (single(i, NextRow{})) done(i, int64_t(1));
    }
    r += count;
  }
  if (pending_count) done(pending, pending_count);
}

}  // namespace softmax_detail

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
