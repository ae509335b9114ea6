// Tessera C++ API: row-wise softmax, log-softmax and logsumexp (see tessera.h).
#pragma once

#include "tessera/common.hpp"

namespace tessera {

TESSERA_API Status softmax(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y,
                           int64_t ldy, float scale = 1.0f);
TESSERA_API Status log_softmax(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y,
                               int64_t ldy, float scale = 1.0f);
TESSERA_API Status logsumexp(int64_t rows, int64_t cols, const float* x, int64_t ldx, float scale,
                             float* out);

}  // namespace tessera
