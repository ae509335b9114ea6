// tessera_convert: argument checks, then the active table's conversion kernels over fixed
// chunks of the array, in parallel for arrays large enough to be bound by memory.
#include "tessera/convert.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <cstring>

#include "runtime/check.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/threading.hpp"
#include "runtime/tsan.hpp"
#include "runtime/verbose.hpp"

namespace tessera {
namespace {

using detail::check_dtype;
using detail::dtype_bytes;
using detail::dtype_name;

// Elements [0, n) of one chunk, from -> to, through the table's kernels (16-bit to 16-bit by
// way of f32, a block at a time on the stack).
void convert_chunk(const arch::ConvertKernels& k, DType from, DType to, int64_t n, const void* x,
                   void* y) {
  if (from == to) {
    if (x != y) std::memcpy(y, x, size_t(n) * dtype_bytes(from));
    return;
  }
  const auto* h = static_cast<const uint16_t*>(x);
  auto* out = static_cast<uint16_t*>(y);
  if (from == DType::f32) {
    (to == DType::f16 ? k.f32_to_f16 : k.f32_to_bf16)(n, static_cast<const float*>(x), out);
  } else if (to == DType::f32) {
    (from == DType::f16 ? k.f16_to_f32 : k.bf16_to_f32)(n, h, static_cast<float*>(y));
  } else {
    constexpr int64_t kBlock = 256;
    float f[kBlock];
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = std::min(kBlock, n - i);
      (from == DType::f16 ? k.f16_to_f32 : k.bf16_to_f32)(m, h + i, f);
      (to == DType::f16 ? k.f32_to_f16 : k.f32_to_bf16)(m, f, out + i);
    }
  }
}

}  // namespace

Status convert(DType from, DType to, int64_t n, const void* x, void* y) {
  return detail::in_arena([&] {
    TESSERA_CHECK(check_dtype("from", from));
    TESSERA_CHECK(check_dtype("to", to));
    TESSERA_CHECK(detail::check_nonneg("n", n));
    TESSERA_CHECK(detail::check_ptr("x", x, n > 0));
    TESSERA_CHECK(detail::check_ptr("y", y, n > 0));
    int64_t x_bytes, y_bytes;
    if (!detail::mul_ok(n, int64_t(dtype_bytes(from)), x_bytes) ||
        !detail::mul_ok(n, int64_t(dtype_bytes(to)), y_bytes))
      return detail::fail(Status::invalid_argument, "n = %lld: the arrays' bytes overflow",
                          (long long)n);
    if (!(from == to && x == y))
      TESSERA_CHECK(detail::check_disjoint(detail::region("y", y, y_bytes, 1),
                                           {detail::region("x", x, x_bytes, 1)}));
    const detail::Verbose vb;
    const arch::KernelTable& t = detail::active_table();
    // Chunks of 64K elements (256 KB of f32): each a task when there are several; the
    // conversion of an element never depends on the split.
    constexpr int64_t kChunk = int64_t(1) << 16;
    const auto part = [&](int64_t c0, int64_t c1) {
      const int64_t i0 = c0 * kChunk, i1 = std::min(n, c1 * kChunk);
      convert_chunk(t.convert, from, to, i1 - i0,
                    static_cast<const char*>(x) + size_t(i0) * dtype_bytes(from),
                    static_cast<char*>(y) + size_t(i0) * dtype_bytes(to));
    };
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    if (chunks <= 1) {
      part(0, chunks);
    } else {
      detail::ForkJoin fj;
      tbb::this_task_arena::isolate([&] {
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, chunks),
                          detail::task_body(fj, [&](const tbb::blocked_range<int64_t>& r) {
                            part(r.begin(), r.end());
                          }));
      });
      fj.join();
    }
    if (vb.on()) {
      char kernels[64];
      std::snprintf(kernels, sizeof kernels, "convert_%s_%s_%s", dtype_name(from), dtype_name(to),
                    t.name);
      vb.print("convert", Status::ok, chunks > 1 ? "chunks-in-parallel" : "one-chunk", kernels,
               tbb::this_task_arena::max_concurrency(), "n:%lld from:%s to:%s", (long long)n,
               dtype_name(from), dtype_name(to));
    }
    return Status::ok;
  });
}

}  // namespace tessera
