// Tessera C++ API: attention layers built on the kernels (see tessera.h).
#pragma once

#include "tessera/common.hpp"

namespace tessera {

TESSERA_API Status additive_attention(int64_t enc_len, int64_t enc_dim, int64_t dec_dim,
                                      int64_t attn_dim, const float* enc, const float* dec,
                                      const float* w_enc, const float* w_dec, const float* v,
                                      float* context, float* weights = nullptr);
TESSERA_API Status additive_keys(int64_t enc_len, int64_t enc_dim, int64_t attn_dim,
                                 const float* enc, const float* w_enc, float* keys);
TESSERA_API Status additive_attention_step(int64_t enc_len, int64_t enc_dim, int64_t dec_dim,
                                           int64_t attn_dim, const float* enc, const float* keys,
                                           const float* dec, const float* w_dec, const float* v,
                                           float* context, float* weights = nullptr);
// Several decoder states at once; see tessera_additive_attention_batch.
TESSERA_API Status additive_attention_batch(int64_t batch, int64_t enc_len, int64_t enc_dim,
                                            int64_t dec_dim, int64_t attn_dim, const float* enc,
                                            const float* keys, const int32_t* enc_lens,
                                            const float* dec, const float* w_dec, const float* v,
                                            float* context, float* weights = nullptr);

using MhaDesc = tessera_mha_desc;

TESSERA_API Status mha_desc_init(MhaDesc& desc, int64_t batch, int64_t q_len, int64_t kv_len,
                                 int64_t model_dim, int64_t heads);
TESSERA_API Status mha_workspace_size(const MhaDesc& desc, size_t& bytes);
TESSERA_API Status mha_forward(const MhaDesc& desc, const float* x_q, const float* x_kv, float* out,
                               void* workspace = nullptr, size_t workspace_bytes = 0);

// A prepared layer (tessera_mha_create): init packs desc's weights; forward runs one call whose
// sizes, options and cache come from `desc`. Movable, not copyable; const methods may run on
// several threads at once.
class TESSERA_API MhaLayer {
 public:
  MhaLayer() = default;
  MhaLayer(const MhaLayer&) = delete;
  MhaLayer& operator=(const MhaLayer&) = delete;
  MhaLayer(MhaLayer&& o) noexcept : impl_(o.impl_) { o.impl_ = nullptr; }
  MhaLayer& operator=(MhaLayer&& o) noexcept;
  ~MhaLayer();

  Status init(const MhaDesc& desc);  // replaces what the layer held, or on failure keeps it
  bool ready() const { return impl_ != nullptr; }
  Status workspace_size(const MhaDesc& desc, size_t& bytes) const;
  Status forward(const MhaDesc& desc, const float* x_q, const float* x_k, const float* x_v,
                 float* out, void* workspace = nullptr, size_t workspace_bytes = 0) const;

  struct Impl;

 private:
  Impl* impl_ = nullptr;
};

}  // namespace tessera
