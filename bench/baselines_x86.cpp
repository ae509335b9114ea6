// Hand-written baselines for the softmax rows, compiled for AVX-512 with -ffast-math so that GCC
// vectorises expf into glibc's libmvec (_ZGVeN16v_expf): the usual three-pass softmax users
// write before reaching for a library.
// Only built on x86-64; run only where AVX-512 is available.
#include <cmath>
#include <cstdint>

namespace bench {

void mvec_softmax_rows(int64_t r0, int64_t r1, int64_t cols, const float* x, float* y) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < cols; ++j) {
      yr[j] = expf(xr[j] - m);
      s += yr[j];
    }
    const float inv = 1.0f / s;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) yr[j] *= inv;
  }
}

}  // namespace bench

#include <xsimd/xsimd.hpp>

namespace bench {

// The exp peers over an array: libmvec (vectorised by the compiler) and xsimd's own exp.
void mvec_exp(int64_t n, const float* x, float* y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = expf(x[i]);
}

void xsimd_exp(int64_t n, const float* x, float* y) {
  using B = xsimd::batch<float, xsimd::avx512f>;
  int64_t i = 0;
  for (; i + int64_t(B::size) <= n; i += B::size)
    xsimd::exp(B::load_unaligned(x + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = std::exp(x[i]);
}

}  // namespace bench
