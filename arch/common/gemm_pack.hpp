// SGEMM packing: op(A) into MR-row panels and op(B) into NR-column panels, zero-padded to full
// panels, so that one micro-kernel serves all four transpose cases and never reads past a
// partial tile. Panel layouts (the micro-kernel contract):
//   A: panel q holds rows [q MR, q MR + MR): element (r, p) at out[q MR kc + p MR + r]
//   B: panel q holds columns [q NR, q NR + NR): element (p, c) at out[q NR kc + p NR + c]
// Both are the same operation: cut a k x n matrix into P-wide column panels stored k step by k
// step. A packed A panel is a panel of op(A)^T, so packing A (not transposed) is packing B^T.
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <cstdint>
#include <cstring>

#include "gemm_ukernel.hpp"  // TESSERA_ALWAYS_INLINE

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include "../x86/transpose_x86.hpp"
#endif

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

// Transposes 4 rows of W floats in 128-bit pieces: after two perfect-shuffle rounds (pairing
// rows i and i + 2), 128-bit lane L of row t holds column entries (4L + t) of the four source
// rows. xsimd 8.1's zip_lo/zip_hi are full-width on SSE2/NEON (W = 4) but interleave within
// each 128-bit lane on AVX/AVX-512, so the scheme is built on 4-float lanes: correct on both.
// About 0.5 operations per element on AVX-512, against a load and a strided store each.
template <class Arch>
inline void transpose_4_rows(xsimd::batch<float, Arch>* r) {
  const auto t0 = xsimd::zip_lo(r[0], r[2]), t1 = xsimd::zip_hi(r[0], r[2]);
  const auto t2 = xsimd::zip_lo(r[1], r[3]), t3 = xsimd::zip_hi(r[1], r[3]);
  r[0] = xsimd::zip_lo(t0, t2);
  r[1] = xsimd::zip_hi(t0, t2);
  r[2] = xsimd::zip_lo(t1, t3);
  r[3] = xsimd::zip_hi(t1, t3);
}

// Copies W k steps of `lanes` source rows (lanes = 4 or 2; row c at src + c ld) into a panel
// whose k steps are `pitch` floats apart. With 2 rows one shuffle round leaves pairs
// (row 0, row 1) of consecutive k steps in each 128-bit lane.
template <class Arch, int lanes>
TESSERA_ALWAYS_INLINE void transpose_block(const float* src, int64_t ld, float* dst,
                                           int64_t pitch) {
  using V = xsimd::batch<float, Arch>;
  constexpr int64_t W = V::size;
  alignas(64) float piece[4][W];
  if constexpr (lanes == 4) {
    V r[4];
    for (int i = 0; i < 4; ++i) r[i] = V::load_unaligned(src + i * ld);
    transpose_4_rows<Arch>(r);
    for (int t = 0; t < 4; ++t) r[t].store_aligned(piece[t]);
    for (int64_t lane = 0; lane < W / 4; ++lane)
      for (int64_t t = 0; t < 4; ++t)
        std::memcpy(dst + (4 * lane + t) * pitch, piece[t] + 4 * lane, 4 * sizeof(float));
  } else {
    static_assert(lanes == 2, "4 or 2 rows");
    const V r0 = V::load_unaligned(src), r1 = V::load_unaligned(src + ld);
    xsimd::zip_lo(r0, r1).store_aligned(piece[0]);
    xsimd::zip_hi(r0, r1).store_aligned(piece[1]);
    for (int64_t lane = 0; lane < W / 4; ++lane)
      for (int64_t t = 0; t < 4; ++t)
        std::memcpy(dst + (4 * lane + t) * pitch, piece[t / 2] + 4 * lane + 2 * (t % 2),
                    2 * sizeof(float));
  }
}

// Packs k x n, each k step a contiguous row (element (p, j) at src[p ld + j]: B, or A
// transposed), into P-column panels. Whole panels are copied row by row across all panels, so
// the source is read front to back (the hardware prefetcher follows it; panel by panel, the
// reads strode down the rows 128 bytes at a time: 4% of a 512^3 product); a partial last panel
// is copied and zero-padded on its own.
template <class Arch, int P>
void pack_rows(int64_t k, int64_t n, const float* src, int64_t ld, float* out) {
  using V = xsimd::batch<float, Arch>;
  constexpr int64_t W = V::size;
  const int64_t whole = P % W == 0 ? n / P : 0;
  for (int64_t p = 0; p < k; ++p)
    for (int64_t q = 0; q < whole; ++q)
      for (int64_t c = 0; c < P; c += W)
        V::load_unaligned(src + p * ld + q * P + c).store_unaligned(out + q * P * k + p * P + c);
  for (int64_t j0 = whole * P; j0 < n; j0 += P) {
    const int64_t cols = n - j0 < P ? n - j0 : P;
    float* panel = out + j0 * k;
    for (int64_t p = 0; p < k; ++p) {
      float* dst = panel + p * P;
      std::memcpy(dst, src + p * ld + j0, sizeof(float) * size_t(cols));
      for (int64_t c = cols; c < P; ++c) dst[c] = 0.0f;
    }
  }
}

// Packs k x n with each column contiguous (element (p, j) at src[j ld + p]: B^T, or A not
// transposed) into P-column panels: W k steps of a group of columns at a time, transposed in
// registers (16 columns where the ISA has a 16 x 16 transpose, and the P % 16 left of a whole
// panel by the same transpose under a store mask; then 4, then 2).
template <class Arch, int P>
void pack_columns(int64_t k, int64_t n, const float* src, int64_t ld, float* out) {
  constexpr int64_t W = xsimd::batch<float, Arch>::size;
  const int64_t k_vec = W >= 4 ? k - k % W : 0;
  for (int64_t j0 = 0; j0 < n; j0 += P, out += P * k) {
    const int64_t cols = n - j0 < P ? n - j0 : P;
    int64_t c = 0;
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
    if constexpr (x86::kHasTranspose16<Arch>) {
      for (; c + 16 <= cols; c += 16)
        for (int64_t p = 0; p < k_vec; p += W)
          x86::transpose_16x16<Arch>(src + (j0 + c) * ld + p, ld, out + p * P + c, P);
      if constexpr (P % 16 != 0) {
        if (cols == P)
          for (int64_t p = 0; p < k_vec; p += W)
            x86::transpose_16x16<Arch, P % 16>(src + (j0 + c) * ld + p, ld, out + p * P + c, P);
        c = cols == P ? P : c;
      }
    }
#endif
    if constexpr (W >= 4) {
      for (; c + 4 <= cols; c += 4)
        for (int64_t p = 0; p < k_vec; p += W)
          transpose_block<Arch, 4>(src + (j0 + c) * ld + p, ld, out + p * P + c, P);
      for (; c + 2 <= cols; c += 2)
        for (int64_t p = 0; p < k_vec; p += W)
          transpose_block<Arch, 2>(src + (j0 + c) * ld + p, ld, out + p * P + c, P);
    }
    // What is left: the last k % W steps of the transposed columns (none when W divides k:
    // walking their P empty ranges was ~10% of packing a 64 x 64 B^T), then the columns after
    // them, whole, and zero padding.
    const int64_t c_vec = c;
    if (k_vec < k)
      for (c = 0; c < c_vec; ++c) {
        const float* col = src + (j0 + c) * ld;
        for (int64_t p = k_vec; p < k; ++p) out[p * P + c] = col[p];
      }
    for (c = c_vec; c < P; ++c) {
      float* dst = out + c;
      if (c < cols) {
        const float* col = src + (j0 + c) * ld;
        for (int64_t p = 0; p < k; ++p) dst[p * P] = col[p];
      } else {
        for (int64_t p = 0; p < k; ++p) dst[p * P] = 0.0f;
      }
    }
  }
}

// Packs a k x n matrix into P-column panels (element (p, j) -> out[(j / P) P k + p P + j % P],
// zero-padded to whole panels).
template <class Arch, int P>
void pack_panels(bool columns_contiguous, int64_t k, int64_t n, const float* src, int64_t ld,
                 float* out) {
  if (columns_contiguous)
    pack_columns<Arch, P>(k, n, src, ld, out);
  else
    pack_rows<Arch, P>(k, n, src, ld, out);
}

// op(A) is mc x kc; trans means A is stored kc x mc (element (i, p) at a[p lda + i]).
template <class Arch, int MR>
void gemm_pack_a(bool trans, int64_t mc, int64_t kc, const float* a, int64_t lda, float* out) {
  pack_panels<Arch, MR>(!trans, kc, mc, a, lda, out);
}

// op(B) is kc x nc; trans means B is stored nc x kc (element (p, j) at b[j ldb + p]).
template <class Arch, int NR>
void gemm_pack_b(bool trans, int64_t kc, int64_t nc, const float* b, int64_t ldb, float* out) {
  pack_panels<Arch, NR>(trans, kc, nc, b, ldb, out);
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
