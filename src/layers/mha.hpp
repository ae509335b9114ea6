// The multi-head attention layer's executor, shared by tessera_mha_forward (the caller's
// weights) and the prepared layer (weights packed at creation).
#pragma once

#include "layers/mha_check.hpp"

namespace tessera::detail {

// One weight matrix as the layer reads it: row-major in its type, or packed by sgemm_pack_b
// (float32) or sgemm_pack_b16 (kept in 16 bits).
struct MhaMatrix {
  const void* w = nullptr;
  DType type = DType::f32;
  bool packed = false;
};

struct MhaWeights {
  MhaMatrix q, k, v, o;
  const float *b_q = nullptr, *b_k = nullptr, *b_v = nullptr, *b_o = nullptr;
};

// Runs a call already checked by check_mha and check_mha_aliasing. `name` labels the verbose line.
Status mha_run(const char* name, const MhaWeights& w, const MhaDesc& d, const MhaCounts& c,
               const float* x_q, const float* x_k, const float* x_v, float* out, void* workspace);

// The checks and workspace handling both entry points share, then mha_run.
Status mha_call(const char* name, const MhaWeights& w, const MhaDesc& d, bool weights_in_desc,
                const float* x_q, const float* x_k, const float* x_v, float* out, void* workspace,
                size_t workspace_bytes);

}  // namespace tessera::detail
