// A few rows of A against consecutive panels of a prepacked B, read as several streams at once.
//
// Contract, for gemm_row_panels<Arch, R, NV, P> (B float32) and gemm_row_panels_b16<Arch, Widen,
// R, NV, P> (B stored in f16 or bf16 and widened exactly as it is loaded, gemm_dot_b16.hpp's
// Widen):
//  - B is one KC block of the prepacked layout (sgemm_pack_b): panel q (NR = NV vectors of
//    columns) is kc rows of NR elements at b + q * NR * kc, zero-padded past the last column.
//    The 16-bit form reads the same layout at half the bytes: a decode step's weights.
//  - A is R rows, A(i, p) at a[i * a_rs + p * a_cs]; C's rows are ldc apart.
//  - computes, for each of `panels` panels q and row i, acc = sum_{p < kc} A(i, p) B_q(p, :)
//    with one fused multiply-add per accumulator per k step, then writes C(i, q * NR + j) =
//    alpha acc[j] + beta C(i, q * NR + j) for the columns j < cols - q * NR only. beta == 0
//    never reads C.
//  - P panels at a time: P concurrent streams through memory. One stream (the packed 1 x NR
//    tile, panel after panel) left the hardware prefetchers one sequential stream to follow and
//    read a prepared layer's 16 MB weight at ~60% of the rate that several streams reach.
//  - kc may be 0 (C = beta C); stateless, no allocation, reads and writes nothing else.
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <cstdint>

#include "../kernels.hpp"
#include "fmadd.hpp"
#include "gemm_ukernel.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

// The float32 panels' load, in the form of a Widen.
template <class Arch>
struct FloatLoad {
  static xsimd::batch<float, Arch> load(const float* p) {
    return xsimd::batch<float, Arch>::load_unaligned(p);
  }
};

template <class Arch, class Load, int R, int NV, int P, class T>
TESSERA_ALWAYS_INLINE void row_panel_group(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
                                           const T* b, float* c, int64_t ldc, int64_t cols,
                                           float alpha, float beta) {
  using B = xsimd::batch<float, Arch>;
  constexpr int W = static_cast<int>(B::size), NR = NV * W;
  B acc[P][R][NV];
  TESSERA_UNROLL for (int q = 0; q < P; ++q) TESSERA_UNROLL for (int i = 0; i < R; ++i)
      TESSERA_UNROLL for (int v = 0; v < NV; ++v) acc[q][i][v] = B(0.0f);
  // Pointers advanced each k step (64-bit index products in the loop cost ARMv7 ~10
  // instructions per FMA).
  const T* row[P];
  TESSERA_UNROLL for (int q = 0; q < P; ++q) row[q] = b + q * NR * kc;
  const float* ap = a;
  for (int64_t p = 0; p < kc; ++p, ap += a_cs) {
    B av[R];
    TESSERA_UNROLL for (int i = 0; i < R; ++i) av[i] = B(ap[i * a_rs]);
    TESSERA_UNROLL for (int q = 0; q < P; ++q) {
      TESSERA_UNROLL for (int v = 0; v < NV; ++v) {
        const B bv = Load::load(row[q] + v * W);
        TESSERA_UNROLL for (int i = 0; i < R; ++i) acc[q][i][v] = fmadd(av[i], bv, acc[q][i][v]);
      }
      row[q] += NR;
    }
  }
  TESSERA_UNROLL for (int q = 0; q < P; ++q) {
    const int64_t nr = cols - q * NR < NR ? cols - q * NR : NR;
    if (nr > 0) store_tile<Arch, R, NV>(acc[q], c + q * NR, ldc, nr, alpha, beta);
  }
}

template <class Arch, class Load, int R, int NV, int P, class T>
TESSERA_ALWAYS_INLINE void row_panels_of(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
                                         const T* b, int64_t panels, float* c, int64_t ldc,
                                         int64_t cols, float alpha, float beta) {
  constexpr int NR = NV * static_cast<int>(xsimd::batch<float, Arch>::size);
  int64_t q = 0;
  for (; q + P <= panels; q += P)
    row_panel_group<Arch, Load, R, NV, P>(kc, a, a_rs, a_cs, b + q * NR * kc, c + q * NR, ldc,
                                          cols - q * NR, alpha, beta);
  for (; q < panels; ++q)
    row_panel_group<Arch, Load, R, NV, 1>(kc, a, a_rs, a_cs, b + q * NR * kc, c + q * NR, ldc,
                                          cols - q * NR, alpha, beta);
}

template <class Arch, int R, int NV, int P>
void gemm_row_panels(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                     int64_t panels, float* c, int64_t ldc, int64_t cols, float alpha, float beta) {
  row_panels_of<Arch, FloatLoad<Arch>, R, NV, P>(kc, a, a_rs, a_cs, b, panels, c, ldc, cols, alpha,
                                                 beta);
}

template <class Arch, class Widen, int R, int NV, int P>
void gemm_row_panels_b16(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const uint16_t* b,
                         int64_t panels, float* c, int64_t ldc, int64_t cols, float alpha,
                         float beta) {
  row_panels_of<Arch, Widen, R, NV, P>(kc, a, a_rs, a_cs, b, panels, c, ldc, cols, alpha, beta);
}

// The row-panel kernels of a tile NV vectors wide, r = 1..kMaxRowPanelRows rows where r NV fits
// the 8 accumulators (null past that: the planner then takes the blocked path).
template <class Arch, int NV, class F16Widen, class Bf16Widen, int... R>
void fill_row_panels(GemmKernels& k, std::integer_sequence<int, R...>) {
  constexpr auto fits = [](int r) { return r * NV <= 8; };
  ((k.row_panels[R + 1] = fits(R + 1)
                              ? &gemm_row_panels<Arch, R + 1, NV, row_panels_at_once(NV * (R + 1))>
                              : nullptr),
   ...);
  ((k.row_panels16[0][R + 1] =
        fits(R + 1)
            ? &gemm_row_panels_b16<Arch, F16Widen, R + 1, NV, row_panels_at_once(NV * (R + 1))>
            : nullptr),
   ...);
  ((k.row_panels16[1][R + 1] =
        fits(R + 1)
            ? &gemm_row_panels_b16<Arch, Bf16Widen, R + 1, NV, row_panels_at_once(NV * (R + 1))>
            : nullptr),
   ...);
  k.row_panels_rows = 0;
  ((k.row_panels_rows = fits(R + 1) ? R + 1 : k.row_panels_rows), ...);
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
