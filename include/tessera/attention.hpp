// Tessera C++ API: fused masked attention (see tessera.h for the score and visibility rules).
#pragma once

#include "tessera/common.hpp"

namespace tessera {

using AttentionDesc = tessera_attention_desc;

TESSERA_API Status attention_desc_init(AttentionDesc& desc, int64_t batch, int64_t q_heads,
                                       int64_t kv_heads, int64_t q_len, int64_t kv_len,
                                       int64_t head_dim, int64_t value_dim);
// k and v hold elements of desc.k_type and desc.v_type (float32 unless set).
TESSERA_API Status attention(const AttentionDesc& desc, const float* q, const void* k,
                             const void* v, float* o);
// y rows = H x rows blockwise (tessera_hadamard): the rotation desc.hadamard expects of K.
TESSERA_API Status hadamard(int64_t rows, int64_t dim, int64_t n, const float* x, int64_t ldx,
                            float* y, int64_t ldy);
// Rotary embeddings in place (tessera_rope).
using RopeDesc = tessera_rope_desc;
TESSERA_API Status rope(const RopeDesc& rope, int64_t batch, int64_t heads, int64_t seq,
                        int64_t head_dim, const int64_t stride[3], const int64_t* positions,
                        int64_t start, float* x);

}  // namespace tessera
