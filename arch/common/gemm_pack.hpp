// SGEMM packing: op(A) into MR-row panels and op(B) into NR-column panels, zero-padded to full
// panels, so that one micro-kernel serves all four transpose cases and never reads past a
// partial tile. Panel layouts (the micro-kernel contract):
//   A: panel q holds rows [q MR, q MR + MR): element (r, p) at out[q MR kc + p MR + r]
//   B: panel q holds columns [q NR, q NR + NR): element (p, c) at out[q NR kc + p NR + c]
#pragma once

#include <xsimd/xsimd.hpp>

#include <cstdint>
#include <cstring>

namespace tessera::arch {

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

// op(A) is mc x kc; trans means A is stored kc x mc (element (i, p) at a[p lda + i]).
template <int MR>
void gemm_pack_a(bool trans, int64_t mc, int64_t kc, const float* a, int64_t lda, float* out) {
  for (int64_t i0 = 0; i0 < mc; i0 += MR, out += MR * kc) {
    const int64_t rows = mc - i0 < MR ? mc - i0 : MR;
    if (trans) {
      // Each k step is MR contiguous floats of the stored matrix.
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = a + p * lda + i0;
        float* dst = out + p * MR;
        for (int64_t r = 0; r < rows; ++r) dst[r] = src[r];
        for (int64_t r = rows; r < MR; ++r) dst[r] = 0.0f;
      }
    } else {
      // Rows are read contiguously and interleaved; a padded row is all zeros.
      for (int64_t r = 0; r < MR; ++r) {
        float* dst = out + r;
        if (r < rows) {
          const float* src = a + (i0 + r) * lda;
          for (int64_t p = 0; p < kc; ++p) dst[p * MR] = src[p];
        } else {
          for (int64_t p = 0; p < kc; ++p) dst[p * MR] = 0.0f;
        }
      }
    }
  }
}

// op(B) is kc x nc; trans means B is stored nc x kc (element (p, j) at b[j ldb + p]).
template <class Arch, int NR>
void gemm_pack_b(bool trans, int64_t kc, int64_t nc, const float* b, int64_t ldb, float* out) {
  using V = xsimd::batch<float, Arch>;
  constexpr int64_t W = V::size;
  for (int64_t j0 = 0; j0 < nc; j0 += NR, out += NR * kc) {
    const int64_t cols = nc - j0 < NR ? nc - j0 : NR;
    if (!trans) {
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = b + p * ldb + j0;
        float* dst = out + p * NR;
        if (cols == NR) {
          std::memcpy(dst, src, sizeof(float) * NR);
        } else {
          for (int64_t c = 0; c < cols; ++c) dst[c] = src[c];
          for (int64_t c = cols; c < NR; ++c) dst[c] = 0.0f;
        }
      }
      continue;
    }
    // B^T (the K of Q K^T): groups of 4 columns x W k-steps of a full panel, transposed in
    // registers (transpose_4_rows) and stored as 4-float pieces of the panel rows.
    int64_t p_done = 0;
    if (cols == NR && NR % 4 == 0 && W % 4 == 0) {
      for (; p_done + W <= kc; p_done += W) {
        for (int64_t c0 = 0; c0 < NR; c0 += 4) {
          V r[4];
          for (int64_t i = 0; i < 4; ++i)
            r[i] = V::load_unaligned(b + (j0 + c0 + i) * ldb + p_done);
          transpose_4_rows<Arch>(r);
          alignas(64) float lanes[4][W];
          for (int64_t t = 0; t < 4; ++t) r[t].store_aligned(lanes[t]);
          for (int64_t lane = 0; lane < W / 4; ++lane)
            for (int64_t t = 0; t < 4; ++t)
              std::memcpy(out + (p_done + 4 * lane + t) * NR + c0, lanes[t] + 4 * lane,
                          4 * sizeof(float));
        }
      }
    }
    // The rest (a partial panel, or the last kc % W steps): element by element, zero-padded.
    for (int64_t c = 0; c < NR; ++c) {
      float* dst = out + c;
      if (c < cols) {
        const float* src = b + (j0 + c) * ldb;
        for (int64_t p = p_done; p < kc; ++p) dst[p * NR] = src[p];
      } else {
        for (int64_t p = p_done; p < kc; ++p) dst[p * NR] = 0.0f;
      }
    }
  }
}

}  // namespace tessera::arch
