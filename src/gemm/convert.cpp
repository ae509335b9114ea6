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

using detail::dtype_bytes;
using detail::dtype_name;

// Elements [0, n) of one chunk, from -> to, through the table's kernels (16-bit to 16-bit by
// way of f32, a block at a time on the stack; the block types to and from f32 only).
void convert_chunk(const arch::KernelTable& t, DType from, DType to, int64_t n, const void* x,
                   void* y) {
  const arch::ConvertKernels& k = t.convert;
  if (from == to) {
    if (x != y) std::memcpy(y, x, size_t(detail::storage_bytes(from, n)));
    return;
  }
  if (detail::is_block(to)) {
    t.quant.quantize[detail::block_index(to)](n, static_cast<const float*>(x),
                                              static_cast<uint8_t*>(y));
    return;
  }
  if (detail::is_block(from)) {
    t.quant.dequantize[detail::block_index(from)](n, static_cast<const uint8_t*>(x),
                                                  static_cast<float*>(y));
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
    TESSERA_CHECK(detail::check_storage_type("from", from));
    TESSERA_CHECK(detail::check_storage_type("to", to));
    if (from != to && (detail::is_block(from) || detail::is_block(to)) && from != DType::f32 &&
        to != DType::f32)
      return detail::fail(Status::invalid_argument,
                          "from = %s, to = %s: a block type converts to and from f32 only",
                          dtype_name(from), dtype_name(to));
    TESSERA_CHECK(detail::check_block_kernels("from", from, detail::active_table()));
    TESSERA_CHECK(detail::check_block_kernels("to", to, detail::active_table()));
    TESSERA_CHECK(detail::check_nonneg("n", n));
    TESSERA_CHECK(detail::check_blocks("n", n, detail::is_block(from) ? from : to));
    TESSERA_CHECK(detail::check_ptr("x", x, n > 0));
    TESSERA_CHECK(detail::check_ptr("y", y, n > 0));
    int64_t x_bytes, y_bytes;
    if (!detail::mul_ok(n, int64_t(detail::is_block(from) ? 2 : dtype_bytes(from)), x_bytes) ||
        !detail::mul_ok(n, int64_t(detail::is_block(to) ? 2 : dtype_bytes(to)), y_bytes))
      return detail::fail(Status::invalid_argument, "n = %lld: the arrays' bytes overflow",
                          (long long)n);
    x_bytes = detail::storage_bytes(from, n), y_bytes = detail::storage_bytes(to, n);
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
      convert_chunk(t, from, to, i1 - i0,
                    static_cast<const char*>(x) + detail::storage_bytes(from, i0),
                    static_cast<char*>(y) + detail::storage_bytes(to, i0));
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

size_t dtype_size(DType t, int64_t n) {
  if (n < 0 || !(t == DType::f32 || t == DType::f16 || t == DType::bf16 || detail::is_block(t)))
    return 0;
  if (detail::is_block(t) && n % detail::kBlockValues != 0) return 0;
  if (n > INT64_MAX / 4) return 0;
  return size_t(detail::storage_bytes(t, n));
}

}  // namespace tessera
