// The fused attention driver (FlashAttention-2 on a CPU): see flash_attention.cpp.
#pragma once

#include "tessera/attention.hpp"

namespace tessera::detail {

// Computes desc's attention into o (and desc.lse); arguments already checked.
Status flash_attention(const tessera_attention_desc& d, const float* q, const float* k,
                       const float* v, float* o);

}  // namespace tessera::detail
