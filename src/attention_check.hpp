// Validation of a tessera_attention_desc and its tensors (shared by the attention entry point
// and the layers that build descriptors).
#pragma once

#include "check.hpp"

namespace tessera::detail {

Status check_attention(const tessera_attention_desc& d, const float* q, const float* k,
                       const float* v, const float* o);

}  // namespace tessera::detail
