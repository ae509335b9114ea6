// The fused attention driver (FlashAttention-2 on a CPU): see flash_attention.cpp.
#pragma once

#include "tessera/attention.hpp"

namespace tessera::detail {

// Computes desc's attention into o (and desc.lse); arguments already checked.
Status flash_attention(const tessera_attention_desc& d, const float* q, const float* k,
                       const float* v, float* o);

// One query row straight from the definition (double precision), for the rare rows the
// arithmetic path cannot finish (a score of +inf, where the reference shares the mass among
// the +inf keys). Shared with the reference so the two cannot disagree.
void attention_row_exact(const tessera_attention_desc& d, int64_t b, int64_t h, int64_t i,
                         const float* q, const float* k, const float* v, float* o_row, float* lse);

}  // namespace tessera::detail
