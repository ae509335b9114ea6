// The fused attention driver (FlashAttention-2 on a CPU): see flash_attention.cpp.
#pragma once

#include "tessera/attention.hpp"

namespace tessera::detail {

// Computes desc's attention into o (and desc.lse); arguments already checked. rule, if not
// null, is set to the path taken ("decode-split-kv", "prefill-key-tiles").
Status flash_attention(const tessera_attention_desc& d, const float* q, const void* k,
                       const void* v, float* o, const char** rule = nullptr);

}  // namespace tessera::detail
