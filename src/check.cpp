#include "check.hpp"

#include <cstdint>
#include <utility>

namespace tessera::detail {

bool partially_overlaps(const float* p, int64_t lp, const float* q, int64_t lq, int64_t rows,
                        int64_t cols) {
  if (rows <= 0 || cols <= 0 || (p == q && lp == lq)) return false;
  const auto lo_p = reinterpret_cast<uintptr_t>(p);
  const auto lo_q = reinterpret_cast<uintptr_t>(q);
  const auto hi_p = lo_p + sizeof(float) * static_cast<uintptr_t>((rows - 1) * lp + cols);
  const auto hi_q = lo_q + sizeof(float) * static_cast<uintptr_t>((rows - 1) * lq + cols);
  return lo_p < hi_q && lo_q < hi_p;
}

Status check_no_self_overlap(const char* name, const int64_t* strides, const int64_t* extents,
                             int count) {
  // Sort the dimensions that have more than one index by stride; each stride must step over
  // the whole span of the finer dimensions, which is exactly the non-overlap condition for a
  // nested layout (the innermost, contiguous dimension is passed as stride 1).
  struct Dim {
    int64_t stride, extent;
  };
  Dim dims[8];
  int n = 0;
  for (int i = 0; i < count && n < 8; ++i)
    if (extents[i] > 1) dims[n++] = {strides[i], extents[i]};
  for (int i = 1; i < n; ++i)  // insertion sort: at most 4 dimensions
    for (int j = i; j > 0 && dims[j].stride < dims[j - 1].stride; --j)
      std::swap(dims[j], dims[j - 1]);
  int64_t span = 1;
  for (int i = 0; i < n; ++i) {
    if (dims[i].stride < span) {
      return fail(Status::invalid_argument,
                  "%s: stride %lld overlaps the %lld elements spanned by the finer dimensions",
                  name, (long long)dims[i].stride, (long long)span);
    }
    span = dims[i].stride * (dims[i].extent - 1) + span;
  }
  return Status::ok;
}

}  // namespace tessera::detail
