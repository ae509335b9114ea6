#include "runtime/check.hpp"

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

Status tensor_span(const char* name, const int64_t* strides, const int64_t* extents, int count,
                   size_t elem_bytes, int64_t& span) {
  span = 0;
  for (int i = 0; i < count; ++i)
    if (extents[i] == 0) return Status::ok;  // empty, whatever its strides
  int64_t last = 0;                          // offset of the last element
  for (int i = 0; i < count; ++i) {
    int64_t step;
    if (!mul_ok(extents[i] - 1, strides[i], step) || !add_ok(last, step, last))
      return fail(Status::invalid_argument, "%s: the sizes and strides overflow 64 bits", name);
  }
  const auto max_elements = static_cast<uint64_t>(PTRDIFF_MAX) / elem_bytes;
  if (static_cast<uint64_t>(last) >= max_elements)
    return fail(Status::invalid_argument,
                "%s spans %lld elements, more than this target can address", name,
                (long long)last + 1);
  span = last + 1;
  return Status::ok;
}

Status checked_count(const char* name, std::initializer_list<int64_t> factors, int64_t& out) {
  out = 1;
  for (int64_t f : factors)
    if (!mul_ok(out, f, out))
      return fail(Status::invalid_argument, "%s: the sizes overflow 64 bits", name);
  if (static_cast<uint64_t>(out) > static_cast<uint64_t>(PTRDIFF_MAX) / sizeof(float))
    return fail(Status::invalid_argument,
                "%s spans %lld elements, more than this target can address", name, (long long)out);
  return Status::ok;
}

Status matrix_span(const char* name, int64_t rows, int64_t cols, int64_t ld, int64_t& span) {
  const int64_t strides[2] = {ld, 1}, extents[2] = {rows, cols};
  return tensor_span(name, strides, extents, 2, sizeof(float), span);
}

Status check_disjoint(const Region& out, std::initializer_list<Region> others) {
  if (out.hi == out.lo) return Status::ok;
  for (const Region& r : others) {
    if (r.hi != r.lo && out.lo < r.hi && r.lo < out.hi)
      return fail(Status::invalid_argument,
                  "%s overlaps %s (an output may not share memory with "
                  "any other argument)",
                  out.name, r.name);
  }
  return Status::ok;
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
  for (int i = 0; i < count; ++i)
    if (extents[i] == 0) return Status::ok;  // no elements: nothing can overlap
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
