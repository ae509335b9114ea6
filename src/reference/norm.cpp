// The specification of a decoder block's parts: norms, activations, the linear and feed-forward
// layers, in double.
#include <cmath>
#include <vector>

#include "tessera/reference.hpp"

namespace tessera::reference {

void norm(tessera_norm_kind kind, int64_t rows, int64_t dim, float* x, int64_t ldx,
          const float* residual, int64_t ldr, const float* gain, const float* bias, float eps,
          float* y, int64_t ldy) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * ldx;
    if (residual)
      for (int64_t i = 0; i < dim; ++i) xr[i] += residual[r * ldr + i];
    double mean = 0, var = 0;
    if (kind == TESSERA_NORM_LAYER) {
      for (int64_t i = 0; i < dim; ++i) mean += xr[i];
      mean /= double(dim);
    }
    for (int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const double s = 1.0 / std::sqrt(var / double(dim) + double(eps));
    for (int64_t i = 0; i < dim; ++i)
      y[r * ldy + i] = float((xr[i] - mean) * s * (gain ? gain[i] : 1.0) + (bias ? bias[i] : 0.0));
  }
}

static double activation(tessera_activation act, double g) {
  if (act == TESSERA_ACT_SILU) return g / (1.0 + std::exp(-g));
  const double c = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * g * (1.0 + std::tanh(c * (g + 0.044715 * g * g * g)));
}

void glu(tessera_activation act, int64_t rows, int64_t dim, const float* gate, int64_t ldg,
         const float* up, int64_t ldu, float* y, int64_t ldy) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < dim; ++i)
      y[r * ldy + i] =
          float(activation(act, gate[r * ldg + i]) * (up ? double(up[r * ldu + i]) : 1.0));
}

void linear(const tessera_linear_desc& d, int64_t rows, const float* x, int64_t ldx, float beta,
            float* y, int64_t ldy) {
  const int64_t k = d.in_features, n = d.out_features;
  if (d.weight_type == TESSERA_Q8_0 || d.weight_type == TESSERA_Q4_0) {
    gemm_block_b(Transpose::no_trans, rows, n, k, 1.0f, x, ldx, d.weight_type, d.weight, k, beta, y,
                 ldy, true);
  } else {
    std::vector<float> w(size_t(n * k));
    for (int64_t i = 0; i < n * k; ++i) w[size_t(i)] = element(d.weight_type, d.weight, i);
    reference::sgemm(Transpose::no_trans, Transpose::trans, rows, n, k, 1.0f, x, ldx, w.data(), k,
                     beta, y, ldy);
  }
  if (d.bias)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) y[r * ldy + j] += d.bias[j];
}

void ffn(const tessera_ffn_desc& d, int64_t rows, const float* x, int64_t ldx, float beta, float* y,
         int64_t ldy) {
  const int64_t h = d.hidden;
  std::vector<float> g(size_t(rows * h)), u(g.size());
  linear({d.dim, h, d.weight_type, d.w_up, d.b_up}, rows, x, ldx, 0.0f, u.data(), h);
  if (d.gated) {
    linear({d.dim, h, d.weight_type, d.w_gate, d.b_gate}, rows, x, ldx, 0.0f, g.data(), h);
    glu(d.activation, rows, h, g.data(), h, u.data(), h, g.data(), h);
  } else {
    glu(d.activation, rows, h, u.data(), h, nullptr, 0, g.data(), h);
  }
  linear({h, d.dim, d.weight_type, d.w_down, d.b_down}, rows, g.data(), h, beta, y, ldy);
}

}  // namespace tessera::reference
