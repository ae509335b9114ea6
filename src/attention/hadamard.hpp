// The orthonormal Walsh-Hadamard transform of blocks of n values along rows (tessera_hadamard;
// fused attention's `hadamard` rotation of the queries and of its output rows).
#pragma once

#include <cstdint>

#include "tessera/attention.hpp"

namespace tessera::detail {

// y[r, :] = H x[r, :] blockwise (n a power of two dividing dim; y may be x): float32 butterflies
// for strides 1, 2, .. n/2, then times 1/sqrt(n) rounded to float (tessera.h).
void hadamard_rows(int64_t rows, int64_t dim, int64_t n, const float* x, int64_t ldx, float* y,
                   int64_t ldy);

}  // namespace tessera::detail
