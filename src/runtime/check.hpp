// Argument checks shared by the drivers. Each returns Status::ok or records a message that
// names the argument (as the caller spelled it) and returns Status::invalid_argument.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "arch/kernels.hpp"
#include "runtime/error.hpp"

namespace tessera::detail {

// Early-return helper: TESSERA_CHECK(check_xxx(...));
#define TESSERA_CHECK(expr)                                                 \
  do {                                                                      \
    const ::tessera::Status tessera_check_s_ = (expr);                      \
    if (tessera_check_s_ != ::tessera::Status::ok) return tessera_check_s_; \
  } while (0)

inline Status check_nonneg(const char* name, int64_t v) {
  return v >= 0 ? Status::ok
                : fail(Status::invalid_argument, "%s = %lld must be >= 0", name, (long long)v);
}

inline Status check_positive(const char* name, int64_t v) {
  return v > 0 ? Status::ok
               : fail(Status::invalid_argument, "%s = %lld must be > 0", name, (long long)v);
}

inline Status check_transpose(const char* name, Transpose t) {
  return (t == Transpose::no_trans || t == Transpose::trans)
             ? Status::ok
             : fail(Status::invalid_argument, "%s = %d is not TESSERA_NO_TRANS or TESSERA_TRANS",
                    name, static_cast<int>(t));
}

inline Status check_dtype(const char* name, DType t) {
  if (t == DType::f32 || t == DType::f16 || t == DType::bf16) return Status::ok;
  return fail(Status::invalid_argument, "%s = %d is not TESSERA_F32, TESSERA_F16 or TESSERA_BF16",
              name, static_cast<int>(t));
}
inline size_t dtype_bytes(DType t) { return t == DType::f32 ? 4 : 2; }
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::q8_0:
      return "q8_0";
    case DType::q4_0:
      return "q4_0";
  }
  return "?";
}

// The block types (q8_0, q4_0): 32 values a block (arch/common/quant.hpp), an index t of the
// kernel tables' QuantKernels.
inline bool is_block(DType t) { return t == DType::q8_0 || t == DType::q4_0; }
inline int block_index(DType t) { return t == DType::q4_0 ? 1 : 0; }
inline constexpr int64_t kBlockValues = 32;
// The sum of a block's int8 (a row rounded to q8_0): the share of an unsigned operand's offset
// that the integer kernels take out (QuantRows::sums, QGemmRows::start).
inline int32_t block_sum(const int8_t* q) {
  int32_t sum = 0;
  for (int64_t i = 0; i < kBlockValues; ++i) sum += q[i];
  return sum;
}
inline int64_t block_bytes(DType t) { return t == DType::q8_0 ? 34 : 18; }
// Bytes of n values (n a multiple of the block for a block type).
inline int64_t storage_bytes(DType t, int64_t n) {
  return is_block(t) ? n / kBlockValues * block_bytes(t) : n * int64_t(dtype_bytes(t));
}
// A stored K/V array or cache: any of the five types.
inline Status check_storage_type(const char* name, DType t) {
  if (t == DType::f32 || t == DType::f16 || t == DType::bf16 || is_block(t)) return Status::ok;
  return fail(Status::invalid_argument,
              "%s = %d is not TESSERA_F32, TESSERA_F16, TESSERA_BF16, TESSERA_Q8_0 or TESSERA_Q4_0",
              name, static_cast<int>(t));
}
// A block type needs the table's quant kernels (none in a build with TESSERA_QUANTIZED=OFF).
inline Status check_block_kernels(const char* name, DType t, const arch::KernelTable& kt) {
  if (!is_block(t) || kt.quant.dequantize[block_index(t)] != nullptr) return Status::ok;
  return fail(Status::unsupported, "%s = %s: this build has no kernels for the block types", name,
              dtype_name(t));
}

// A dimension or stride of a block-type array counts whole blocks of values.
inline Status check_blocks(const char* name, int64_t values, DType t) {
  if (!is_block(t) || values % kBlockValues == 0) return Status::ok;
  return fail(Status::invalid_argument, "%s = %lld must be a multiple of 32 for a %s array", name,
              (long long)values, dtype_name(t));
}

// A row-major matrix of `cols` columns needs ld >= max(1, cols) (the BLAS rule).
inline Status check_ld(const char* name, int64_t ld, int64_t cols) {
  const int64_t need = cols > 1 ? cols : 1;
  return ld >= need ? Status::ok
                    : fail(Status::invalid_argument, "%s = %lld must be >= %lld", name,
                           (long long)ld, (long long)need);
}

// A pointer may be null only when it addresses nothing.
inline Status check_ptr(const char* name, const void* p, bool needed) {
  return (p != nullptr || !needed)
             ? Status::ok
             : fail(Status::invalid_argument, "%s is NULL but addresses a non-empty array", name);
}

inline Status check_finite(const char* name, float v) {
  return std::isfinite(v) ? Status::ok
                          : fail(Status::invalid_argument, "%s = %g must be finite", name, v);
}

// ---- size arithmetic: every product of caller sizes is checked ----------------------------

// a * b and a + b of non-negative sizes, or false on overflow of int64_t.
inline bool mul_ok(int64_t a, int64_t b, int64_t& out) {
  return !__builtin_mul_overflow(a, b, &out);
}
inline bool add_ok(int64_t a, int64_t b, int64_t& out) {
  return !__builtin_add_overflow(a, b, &out);
}

// The product of sizes as an element count of float arrays: fails, naming `name`, when it
// overflows or exceeds what this target can address (as tensor_span).
Status checked_count(const char* name, std::initializer_list<int64_t> factors, int64_t& out);

// Elements spanned by a tensor of `count` (stride, extent) dimensions: 0 if any extent is 0,
// else 1 + sum (extent_i - 1) stride_i (strides >= 0). Fails, naming `name`, when that many
// elements of elem_bytes each cannot be addressed (more bytes than PTRDIFF_MAX): such a size
// describes no array the caller can hold, and every index product below it is then in range.
Status tensor_span(const char* name, const int64_t* strides, const int64_t* extents, int count,
                   size_t elem_bytes, int64_t& span);

// A row-major rows x cols matrix with leading dimension ld (>= cols), as tensor_span.
Status matrix_span(const char* name, int64_t rows, int64_t cols, int64_t ld, int64_t& span);

// ---- aliasing ---------------------------------------------------------------------------------

// The bytes [lo, hi) an argument addresses; empty when hi == lo.
struct Region {
  const char* name;
  uintptr_t lo, hi;
};
inline Region region(const char* name, const void* p, int64_t elements, size_t elem_bytes) {
  const auto lo = reinterpret_cast<uintptr_t>(p);
  return {name, lo, p && elements > 0 ? lo + uintptr_t(elements) * elem_bytes : lo};
}

// Fails, naming the output, when `out` shares a byte with any of `others`. Outputs may not alias
// inputs or other outputs (the one exception, in-place softmax, is checked by its driver).
Status check_disjoint(const Region& out, std::initializer_list<Region> others);

// Do rows x cols matrices at p (ld lp) and q (ld lq) share memory without being the same?
// Used to allow exact in-place operation and reject partial overlap.
bool partially_overlaps(const float* p, int64_t lp, const float* q, int64_t lq, int64_t rows,
                        int64_t cols);

// Checks that a strided output of the given (stride, extent) dimensions maps distinct indices to
// distinct addresses (no two output elements share memory). dims are unordered.
Status check_no_self_overlap(const char* name, const int64_t* strides, const int64_t* extents,
                             int count);

}  // namespace tessera::detail
