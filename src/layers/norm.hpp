// The activations' executor without the public checks: the feed-forward layer's gate and up
// halves interleave row by row in its workspace, which the public overlap rule (whole rows
// only) would refuse.
#pragma once

#include "tessera/layers.hpp"

namespace tessera::detail {

void glu_rows(Activation act, int64_t rows, int64_t dim, const float* gate, int64_t ldg,
              const float* up, int64_t ldu, float* y, int64_t ldy);

}  // namespace tessera::detail
