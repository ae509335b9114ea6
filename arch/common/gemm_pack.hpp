// SGEMM packing: op(A) into MR-row panels and op(B) into NR-column panels, zero-padded to full
// panels, so that one micro-kernel serves all four transpose cases and never reads past a
// partial tile. Panel layouts (the micro-kernel contract):
//   A: panel q holds rows [q MR, q MR + MR): element (r, p) at out[q MR kc + p MR + r]
//   B: panel q holds columns [q NR, q NR + NR): element (p, c) at out[q NR kc + p NR + c]
#pragma once

#include <cstdint>
#include <cstring>

namespace tessera::arch {

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
template <int NR>
void gemm_pack_b(bool trans, int64_t kc, int64_t nc, const float* b, int64_t ldb, float* out) {
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
    } else {
      for (int64_t c = 0; c < NR; ++c) {
        float* dst = out + c;
        if (c < cols) {
          const float* src = b + (j0 + c) * ldb;
          for (int64_t p = 0; p < kc; ++p) dst[p * NR] = src[p];
        } else {
          for (int64_t p = 0; p < kc; ++p) dst[p * NR] = 0.0f;
        }
      }
    }
  }
}

}  // namespace tessera::arch
