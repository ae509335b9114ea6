// One row of A against consecutive panels of a prepacked B, read as several streams at once.
//
// Contract, for gemm_row_panels<Arch, NV, P> (B float32) and gemm_row_panels_b16<Arch, Widen,
// NV, P> (B stored in f16 or bf16 and widened exactly as it is loaded, gemm_dot_b16.hpp's Widen):
//  - B is one KC block of the prepacked layout (sgemm_pack_b): panel q (NR = NV vectors of
//    columns) is kc rows of NR elements at b + q * NR * kc, zero-padded past the last column.
//    The 16-bit form reads the same layout at half the bytes: a decode step's weights.
//  - computes, for each of `panels` panels q, acc = sum_{p < kc} a[p * a_cs] B_q(p, :) with one
//    fused multiply-add per accumulator per k step, then writes C[q * NR + j] = alpha acc[j] +
//    beta C[q * NR + j] for the columns j < cols - q * NR only. beta == 0 never reads C.
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

template <class Arch, class Load, int NV, int P, class T>
TESSERA_ALWAYS_INLINE void row_panel_group(int64_t kc, const float* a, int64_t a_cs, const T* b,
                                           float* c, int64_t cols, float alpha, float beta) {
  using B = xsimd::batch<float, Arch>;
  constexpr int W = static_cast<int>(B::size), NR = NV * W;
  B acc[P][1][NV];
  TESSERA_UNROLL for (int q = 0; q < P; ++q) TESSERA_UNROLL for (int v = 0; v < NV; ++v)
      acc[q][0][v] = B(0.0f);
  // Pointers advanced each k step (64-bit index products in the loop cost ARMv7 ~10
  // instructions per FMA).
  const T* row[P];
  TESSERA_UNROLL for (int q = 0; q < P; ++q) row[q] = b + q * NR * kc;
  const float* ap = a;
  for (int64_t p = 0; p < kc; ++p, ap += a_cs) {
    const B av(*ap);
    TESSERA_UNROLL for (int q = 0; q < P; ++q) {
      TESSERA_UNROLL for (int v = 0; v < NV; ++v) acc[q][0][v] =
          fmadd(av, Load::load(row[q] + v * W), acc[q][0][v]);
      row[q] += NR;
    }
  }
  TESSERA_UNROLL for (int q = 0; q < P; ++q) {
    const int64_t nr = cols - q * NR < NR ? cols - q * NR : NR;
    if (nr > 0) store_tile<Arch, 1, NV>(acc[q], c + q * NR, 0, nr, alpha, beta);
  }
}

template <class Arch, class Load, int NV, int P, class T>
TESSERA_ALWAYS_INLINE void row_panels_of(int64_t kc, const float* a, int64_t a_cs, const T* b,
                                         int64_t panels, float* c, int64_t cols, float alpha,
                                         float beta) {
  constexpr int NR = NV * static_cast<int>(xsimd::batch<float, Arch>::size);
  int64_t q = 0;
  for (; q + P <= panels; q += P)
    row_panel_group<Arch, Load, NV, P>(kc, a, a_cs, b + q * NR * kc, c + q * NR, cols - q * NR,
                                       alpha, beta);
  for (; q < panels; ++q)
    row_panel_group<Arch, Load, NV, 1>(kc, a, a_cs, b + q * NR * kc, c + q * NR, cols - q * NR,
                                       alpha, beta);
}

template <class Arch, int NV, int P>
void gemm_row_panels(int64_t kc, const float* a, int64_t a_cs, const float* b, int64_t panels,
                     float* c, int64_t cols, float alpha, float beta) {
  row_panels_of<Arch, FloatLoad<Arch>, NV, P>(kc, a, a_cs, b, panels, c, cols, alpha, beta);
}

template <class Arch, class Widen, int NV, int P>
void gemm_row_panels_b16(int64_t kc, const float* a, int64_t a_cs, const uint16_t* b,
                         int64_t panels, float* c, int64_t cols, float alpha, float beta) {
  row_panels_of<Arch, Widen, NV, P>(kc, a, a_cs, b, panels, c, cols, alpha, beta);
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
