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

namespace tessera {

// Streaming softmax (Milakov & Gimelshein 2018): the running maximum and the sum of
// exp(score - max) of the scores seen so far. States of disjoint parts merge exactly (up to
// rounding) and deterministically: merging the same parts in the same order gives the same bits.
// A state with no mass has max = -inf and sum = 0; NaN scores make the state NaN; +inf scores
// take all the mass (the limit the reference defines): max = +inf and sum counts them.
struct TESSERA_API OnlineSoftmaxState {
  float max = -__builtin_huge_valf();
  float sum = 0.0f;

  void add(float score);
  void merge(const OnlineSoftmaxState& other);
  // log sum exp of everything added: -inf when empty.
  float lse() const;
};

// Flash-decoding's combine step: a holds (state_a, o_a), an output row accumulated as
// sum_j exp(s_j - state_a.max) v_j (unnormalised); b likewise. Afterwards a holds the merge:
// o_a = o_a exp(m_a - m) + o_b exp(m_b - m) with m the merged max. Divide by a.sum at the end.
TESSERA_API void merge_partial_output(OnlineSoftmaxState& a, float* o_a,
                                      const OnlineSoftmaxState& b, const float* o_b, int64_t dim);

}  // namespace tessera
