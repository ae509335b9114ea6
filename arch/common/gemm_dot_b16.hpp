// Dot-product and few-row kernels with B stored in 16 bits (f16 or bf16) and widened in registers
// as it is loaded: the decode shapes whose B is the weights (a Linear layer's rows) or a K cache,
// read once, at half the bytes of float32, with no pass that widens them into memory first.
//
// Contract (as gemm_dot.hpp's gemm_dot_nt): C(i, j) = alpha sum_p A(i, p) B(j, p) + beta C(i, j)
// for R rows of A (float32, rows lda apart) and NJ rows of B (16-bit, rows ldb elements apart),
// both contiguous along p; k >= 0; beta == 0 never reads C. Each B element is widened exactly
// (f16 and bf16 are subsets of float32), so the products and sums are those of the float32
// kernel on the widened B. The sum order (SIMD lanes, lane reduction, scalar tail) depends on
// k alone.
//
// Widen: a type with `static xsimd::batch<float, Arch> load(const uint16_t*)` (W elements) and
// `static float scalar(uint16_t)`. The portable forms are below; an ISA with instructions for
// it passes its own (arch/x86/widen_x86.hpp, arch/arm/widen_neon64.hpp): xsimd 8.1 has no
// 16-bit float type.
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "blocking.hpp"
#include "convert.hpp"
#include "fmadd.hpp"
#include "gemm_dot.hpp"
#include "gemm_rows_stream.hpp"
#include "lanes.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

// f16 through the scalar conversion (ISAs without f16 lanes: SSE2; ARMv7, whose VCVT flushes
// subnormals).
template <class Arch>
struct ScalarF16Widen {
  using B = xsimd::batch<float, Arch>;
  static B load(const uint16_t* p) {
    alignas(64) float t[B::size];
    for (size_t l = 0; l < B::size; ++l) t[l] = convert_detail::f16_to_f32(p[l]);
    return B::load_aligned(t);
  }
  static float scalar(uint16_t h) { return convert_detail::f16_to_f32(h); }
};

// bf16 is the top half of a float32: a shift, which the compiler vectorises for the ISA.
template <class Arch>
struct ShiftBf16Widen {
  using B = xsimd::batch<float, Arch>;
  static B load(const uint16_t* p) {
    alignas(64) float f[B::size];
    for (size_t l = 0; l < B::size; ++l) f[l] = scalar(p[l]);
    return B::load_aligned(f);
  }
  static float scalar(uint16_t h) {
    const uint32_t b = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  }
};

template <class Arch, class Widen, int R, int NJ>
void gemm_dot_nt_b16(int64_t k, const float* a, int64_t lda, const uint16_t* b, int64_t ldb,
                     float* c, int64_t ldc, float alpha, float beta, RowsAhead ahead) {
  gemm_dot_nt_of<Arch, Widen, R, NJ>(k, a, lda, b, ldb, c, ldc, alpha, beta, ahead);
}

// gemm_wide_b16's whole-vector case (nr = NV W), in a body of its own: sharing the function
// with the partial case's loop, which takes the accumulators by index, GCC for AArch64 kept
// them in memory too and stored all of them every k step.
template <class Arch, class Widen, int R, int NV>
TESSERA_ALWAYS_INLINE void wide_b16_whole(int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                                          const B16Rows& b, float* c, int64_t ldc, float alpha,
                                          float beta) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  B acc[R][NV];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = B(0.0f);
  int64_t p = 0;
  for (int g = 0; g < b.count && p < k; ++g) {
    const int64_t ldb = b.ld, p0 = p, p1 = std::min(k, b.end[g]);
    const uint16_t* run = b.at[g];
    // The same columns a run's length on (the caller's next block of keys; a prefetch past
    // the array does not fault): column strips of rows ldb apart are a pattern the hardware
    // prefetcher misses, and this loop waited on memory for most of its time. Or the rows
    // `ahead` names.
    const RowsAhead own{reinterpret_cast<const uint8_t*>(run + (p1 - p0) * ldb), 2 * ldb};
    const RowsAhead ahead = b.ahead[g].at ? b.ahead[g] : own;
    for (; p < p1; ++p) {
      const uint16_t* row = run + (p - p0) * ldb;
      for (int64_t q = 0; q < NV * W; q += 32)
        __builtin_prefetch(ahead.at + (p - p0) * ahead.ld + 2 * q, 0, 3);
      B bv[NV];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) bv[v] = Widen::load(row + v * W);
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        const B ai(a[i * a_rs + p * a_cs]);
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[i][v] = fmadd(ai, bv[v], acc[i][v]);
      }
    }
  }
  if (beta == 0.0f) {
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) (acc[i][v] * B(alpha)).store_unaligned(c + i * ldc + v * W);
    return;
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      float* cv = c + i * ldc + v * W;
      fmadd(B(beta), B::load_unaligned(cv), acc[i][v] * B(alpha)).store_unaligned(cv);
    }
}

// C[0:R, 0:nr] = alpha A B + beta C for B's k rows stored in 16 bits, read in place from their
// runs (decode's P V against a 16-bit V cache, its pages or one matrix): A(i, p) at a[i a_rs + p
// a_cs] (float32), nr <= NV W columns; a last partial vector is widened element by element into
// a zero-padded one and stored element by element. R x NV accumulators: 11 vector registers at R
// = 4, NV = 2; 21 at NV = 4, which broadcasts each A element once per 4 vectors of B rather than
// per 2. Each C element is one accumulator lane summing the k rows in order, across the runs, so
// the result does not depend on where B's runs break. beta == 0 never reads C.
template <class Arch, class Widen, int R, int NV>
void gemm_wide_b16(int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const B16Rows& b,
                   float* c, int64_t ldc, int64_t nr, float alpha, float beta) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  if (nr == NV * W)
    return wide_b16_whole<Arch, Widen, R, NV>(k, a, a_rs, a_cs, b, c, ldc, alpha, beta);
  const int whole = int(nr / W);  // vectors loaded whole
  B acc[R][NV];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = B(0.0f);
  int64_t p = 0;
  for (int g = 0; g < b.count && p < k; ++g)
    for (const int64_t p0 = p, p1 = std::min(k, b.end[g]); p < p1; ++p) {
      const uint16_t* row = b.at[g] + (p - p0) * b.ld;
      B bv[NV];
      for (int v = 0; v < NV; ++v) {
        if (v < whole) {
          bv[v] = Widen::load(row + v * W);
        } else if (v * W < nr) {
          alignas(64) float t[W] = {};
          for (int64_t l = 0; l < nr - v * W; ++l) t[l] = Widen::scalar(row[v * W + l]);
          bv[v] = B::load_aligned(t);
        } else {
          bv[v] = B(0.0f);
        }
      }
      for (int i = 0; i < R; ++i) {
        const B ai(a[i * a_rs + p * a_cs]);
        for (int v = 0; v < NV; ++v) acc[i][v] = fmadd(ai, bv[v], acc[i][v]);
      }
    }
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < NV && v * W < nr; ++v) {
      float* cv = c + i * ldc + v * W;
      B r = acc[i][v] * B(alpha);
      if (v < whole) {
        if (beta != 0.0f) r = fmadd(B(beta), B::load_unaligned(cv), r);
        r.store_unaligned(cv);
        continue;
      }
      alignas(64) float t[W];
      r.store_aligned(t);
      for (int64_t l = 0; l < nr - v * W; ++l) cv[l] = beta != 0.0f ? t[l] + beta * cv[l] : t[l];
    }
}

template <class Arch, int StreamBcast, int NV, class F16Widen, class Bf16Widen, int... R>
void fill_wide16(GemmKernels& k, std::integer_sequence<int, R...>) {
  k.wide16_cols = NV * static_cast<int>(xsimd::batch<float, Arch>::size);
  ((k.wide16[0][R + 1] = &gemm_wide_b16<Arch, F16Widen, R + 1, NV>), ...);
  ((k.wide16[1][R + 1] = &gemm_wide_b16<Arch, Bf16Widen, R + 1, NV>), ...);
  ((k.rows_stream16[0][R + 1] = &gemm_rows_stream<Arch, R + 1, StreamBcast, F16Widen, uint16_t>),
   ...);
  ((k.rows_stream16[1][R + 1] = &gemm_rows_stream<Arch, R + 1, StreamBcast, Bf16Widen, uint16_t>),
   ...);
}

template <class Arch, int Cols, class F16Widen, class Bf16Widen, int... R>
void fill_dot16_rows(GemmKernels& k, std::integer_sequence<int, R...>) {
  constexpr int W = static_cast<int>(xsimd::batch<float, Arch>::size);
  ((k.dot16[0][R + 1] = &gemm_dot_nt_b16 < Arch, F16Widen, R + 1, R == 0 ? W : Cols >), ...);
  ((k.dot16[1][R + 1] = &gemm_dot_nt_b16 < Arch, Bf16Widen, R + 1, R == 0 ? W : Cols >), ...);
  ((k.dot16_1[0][R + 1] = &gemm_dot_nt_b16<Arch, F16Widen, R + 1, 1>), ...);
  ((k.dot16_1[1][R + 1] = &gemm_dot_nt_b16<Arch, Bf16Widen, R + 1, 1>), ...);
  ((k.dot16_cols[R + 1] = R == 0 ? W : Cols), ...);
}

// The table's 16-bit kernels ([0] f16, [1] bf16): the dot kernels r x dot16_cols[r] (one row: W
// columns) and r x 1, r = 1..dot16_rows (blocking.hpp), the wide and the streaming kernels.
template <class Arch, const GemmBlocking& G, class F16Widen, class Bf16Widen>
void fill_dot16(GemmKernels& k) {
  constexpr int rows = dot16_rows_of(G);
  static_assert(rows <= kMaxDotRows, "16-bit dot tile exceeds the table");
  k.dot16_rows = rows;
  fill_dot16_rows<Arch, dot16_cols_of(G), F16Widen, Bf16Widen>(
      k, std::make_integer_sequence<int, rows>());
  fill_wide16<Arch, G.stream16_bcast ? G.stream16_bcast : G.stream_bcast, G.wide16_nv, F16Widen,
              Bf16Widen>(k, std::make_integer_sequence<int, kMaxWideRows>());
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
