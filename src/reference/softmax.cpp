// Reference softmax family, in double. The special rows are defined here once:
//  - NaN anywhere in a row makes the whole row NaN (the sum is NaN);
//  - +inf entries take all the mass, shared equally (the limit of softmax as they grow);
//  - an all -inf row has no mass: softmax 0, log-softmax and logsumexp -inf.
#include "tessera/reference.hpp"

#include <cmath>
#include <limits>
#include <vector>

namespace tessera::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One row in log space: out[j] = log softmax(s x)_j; returns log sum exp(s x).
double log_softmax_row(int64_t cols, const float* x, double scale, double* out) {
  double m = -kInf;
  bool nan = false;
  for (int64_t j = 0; j < cols; ++j) {
    const double s = scale * x[j];
    if (std::isnan(s)) nan = true;
    if (s > m) m = s;
  }
  if (nan) {
    for (int64_t j = 0; j < cols; ++j) out[j] = kNaN;
    return kNaN;
  }
  if (m == -kInf) {
    for (int64_t j = 0; j < cols; ++j) out[j] = -kInf;
    return -kInf;
  }
  if (m == kInf) {
    double count = 0;
    for (int64_t j = 0; j < cols; ++j) count += (scale * x[j] == kInf) ? 1 : 0;
    for (int64_t j = 0; j < cols; ++j) out[j] = scale * x[j] == kInf ? -std::log(count) : -kInf;
    return kInf;
  }
  double sum = 0.0;
  for (int64_t j = 0; j < cols; ++j) sum += std::exp(scale * x[j] - m);
  // sum >= 1 here: the entry equal to the finite max contributes exp(0).
  // cppcheck-suppress invalidFunctionArg
  const double lse = m + std::log(sum);
  for (int64_t j = 0; j < cols; ++j) out[j] = scale * x[j] - lse;
  return lse;
}

}  // namespace

void log_softmax(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
                 float scale) {
  std::vector<double> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    log_softmax_row(cols, x + r * ldx, scale, row.data());
    for (int64_t j = 0; j < cols; ++j) y[r * ldy + j] = static_cast<float>(row[j]);
  }
}

void softmax(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
             float scale) {
  std::vector<double> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    log_softmax_row(cols, x + r * ldx, scale, row.data());
    for (int64_t j = 0; j < cols; ++j) y[r * ldy + j] = static_cast<float>(std::exp(row[j]));
  }
}

void logsumexp(int64_t rows, int64_t cols, const float* x, int64_t ldx, float scale, float* out) {
  std::vector<double> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    out[r] = static_cast<float>(log_softmax_row(cols, x + r * ldx, scale, row.data()));
  }
}

}  // namespace tessera::reference
