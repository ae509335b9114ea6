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

// ---- a decoder block's parts (see tessera.h) --------------------------------------------------

using NormKind = tessera_norm_kind;
using Activation = tessera_activation;

TESSERA_API Status norm(NormKind kind, int64_t rows, int64_t dim, float* x, int64_t ldx,
                        const float* residual, int64_t ldr, const float* gain, const float* bias,
                        float eps, float* y, int64_t ldy);
TESSERA_API Status glu(Activation act, int64_t rows, int64_t dim, const float* gate, int64_t ldg,
                       const float* up, int64_t ldu, float* y, int64_t ldy);

using LinearDesc = tessera_linear_desc;

// A prepared linear layer (tessera_linear_create). Movable, not copyable; forward may run on
// several threads at once.
class TESSERA_API Linear {
 public:
  Linear() = default;
  Linear(const Linear&) = delete;
  Linear& operator=(const Linear&) = delete;
  Linear(Linear&& o) noexcept : impl_(o.impl_) { o.impl_ = nullptr; }
  Linear& operator=(Linear&& o) noexcept;
  ~Linear();

  Status init(const LinearDesc& desc);  // replaces what the layer held, or on failure keeps it
  bool ready() const { return impl_ != nullptr; }
  int64_t in_features() const;
  int64_t out_features() const;
  Status forward(int64_t rows, const float* x, int64_t ldx, float beta, float* y,
                 int64_t ldy) const;

  struct Impl;

 private:
  Impl* impl_ = nullptr;
};

using FfnDesc = tessera_ffn_desc;

// A prepared feed-forward layer (tessera_ffn_create): gate and up as one linear layer, then the
// activation, then down.
class TESSERA_API Ffn {
 public:
  Ffn() = default;
  Ffn(const Ffn&) = delete;
  Ffn& operator=(const Ffn&) = delete;
  Ffn(Ffn&& o) noexcept;
  Ffn& operator=(Ffn&& o) noexcept;
  ~Ffn() = default;

  Status init(const FfnDesc& desc);
  bool ready() const { return down_.ready(); }
  size_t workspace_size(int64_t rows) const;  // 0 for bad arguments
  Status forward(int64_t rows, const float* x, int64_t ldx, float beta, float* y, int64_t ldy,
                 void* workspace = nullptr, size_t workspace_bytes = 0) const;

 private:
  Linear gate_up_, down_;
  int64_t dim_ = 0, hidden_ = 0;
  Activation act_ = TESSERA_ACT_SILU;
  bool gated_ = true;
};

}  // namespace tessera
