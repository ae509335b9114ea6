// The scalar reference of every Tessera operation: the specification the kernels are tested
// against. Double accumulation, no SIMD, no threads, no argument checks (pass valid arguments;
// the checked API is in the other headers). Public so users can verify their own results.
#pragma once

#include "tessera/common.hpp"

namespace tessera::reference {

TESSERA_API void sgemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                       float* c, int64_t ldc);
TESSERA_API void sgemm_strided_batched(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k,
                                       float alpha, const float* a, int64_t lda, int64_t stride_a,
                                       const float* b, int64_t ldb, int64_t stride_b, float beta,
                                       float* c, int64_t ldc, int64_t stride_c, int64_t batch);

// One element between float32 and f16 / bf16: tessera_convert's specification (round to nearest
// even; a NaN quieted, the top bits of its payload kept; f16 overflow to inf; widening exact).
TESSERA_API uint16_t f32_to_f16(float x);
TESSERA_API float f16_to_f32(uint16_t h);
TESSERA_API uint16_t f32_to_bf16(float x);
TESSERA_API float bf16_to_f32(uint16_t h);
// Element i of an array of type t, widened (exactly) to float; and x stored there, rounded
// (store_element: f32, f16 and bf16 only; a block type is written a block at a time).
TESSERA_API float element(tessera_dtype t, const void* p, int64_t i);
TESSERA_API void store_element(tessera_dtype t, void* p, int64_t i, float x);

// The block types (TESSERA_Q8_0, TESSERA_Q4_0; tessera.h has the formats): n values (a multiple
// of 32) quantized into n / 32 blocks as ggml's reference quantizers do for finite values (a
// block with a NaN or an infinity: d = NaN, q = 0), and dequantized (exactly: d times the
// integer). tessera_convert's specification for the block types.
TESSERA_API void quantize(tessera_dtype t, int64_t n, const float* x, void* y);
TESSERA_API void dequantize(tessera_dtype t, int64_t n, const void* x, float* y);
// Bytes of n values of type t (n a multiple of 32 for a block type).
TESSERA_API size_t storage_bytes(tessera_dtype t, int64_t n);
// tessera_hadamard's transform: y rows = H x rows over blocks of n (float32 butterflies, then
// 1/sqrt(n)); y may be x.
TESSERA_API void hadamard(int64_t rows, int64_t dim, int64_t n, const float* x, int64_t ldx,
                          float* y, int64_t ldy);
// tessera_rope's rotation of one head's row at position pos, in double (angles, cosines and the
// rotation), rounded to float once.
TESSERA_API void rope_row(const tessera_rope_desc& rope, int64_t head_dim, double pos, float* x);

// C = f16(alpha op(A) op(B) + beta C) with A, B and C f16 (bits in uint16_t): exact products
// summed in double, rounded to f16 (through float32) once. tessera_hgemm's specification; the
// error it allows against this is stated in tessera.h.
TESSERA_API void hgemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta,
                       uint16_t* c, int64_t ldc);

// C = alpha op(A) B^T + beta C with B (n x k, rows ldb values apart) in a block type: each row
// of op(A) rounded to q8_0 as tessera_convert rounds it (round_a; otherwise taken as it is), B
// dequantized, the products summed in double. With round_a, tessera_gemm_ex's specification for
// block-type weights; without, the float32-activation product it approximates.
TESSERA_API void gemm_block_b(Transpose ta, int64_t m, int64_t n, int64_t k, float alpha,
                              const float* a, int64_t lda, tessera_dtype b_type, const void* b,
                              int64_t ldb, float beta, float* c, int64_t ldc, bool round_a);

TESSERA_API void softmax(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y,
                         int64_t ldy, float scale);
TESSERA_API void log_softmax(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y,
                             int64_t ldy, float scale);
TESSERA_API void logsumexp(int64_t rows, int64_t cols, const float* x, int64_t ldx, float scale,
                           float* out);

// Writes O and, when desc.lse is set, the log-sum-exp of each query row (k and v of
// desc.k_type and desc.v_type).
TESSERA_API void attention(const tessera_attention_desc& desc, const float* q, const void* k,
                           const void* v, float* o);

TESSERA_API void additive_keys(int64_t enc_len, int64_t enc_dim, int64_t attn_dim, const float* enc,
                               const float* w_enc, float* keys);
TESSERA_API void additive_attention_step(int64_t enc_len, int64_t enc_dim, int64_t dec_dim,
                                         int64_t attn_dim, const float* enc, const float* keys,
                                         const float* dec, const float* w_dec, const float* v,
                                         float* context, float* weights);
// additive_attention_step per state over its first enc_lens[b] keys (NULL: all), weights past
// them 0.
TESSERA_API void additive_attention_batch(int64_t batch, int64_t enc_len, int64_t enc_dim,
                                          int64_t dec_dim, int64_t attn_dim, const float* enc,
                                          const float* keys, const int32_t* enc_lens,
                                          const float* dec, const float* w_dec, const float* v,
                                          float* context, float* weights);
TESSERA_API void additive_attention(int64_t enc_len, int64_t enc_dim, int64_t dec_dim,
                                    int64_t attn_dim, const float* enc, const float* dec,
                                    const float* w_enc, const float* w_dec, const float* v,
                                    float* context, float* weights);

// The multi-head attention layer, composed of the reference operations (updates the KV cache
// and writes lse as the layer does); keys from x_k and values from x_v.
TESSERA_API void mha_forward(const tessera_mha_desc& desc, const float* x_q, const float* x_k,
                             const float* x_v, float* out);
TESSERA_API void mha_forward(const tessera_mha_desc& desc, const float* x_q, const float* x_kv,
                             float* out);

// tessera_norm: x += residual in float32 (where given, stored in x), then each row's mean and
// mean square of the stored x in double, y = (x - m) / sqrt(var + eps) gain + bias rounded once.
TESSERA_API void norm(tessera_norm_kind kind, int64_t rows, int64_t dim, float* x, int64_t ldx,
                      const float* residual, int64_t ldr, const float* gain, const float* bias,
                      float eps, float* y, int64_t ldy);
// tessera_glu: y = f(gate) up (up null: f(gate)) in double, rounded once.
TESSERA_API void glu(tessera_activation act, int64_t rows, int64_t dim, const float* gate,
                     int64_t ldg, const float* up, int64_t ldu, float* y, int64_t ldy);
// tessera_linear_forward: y = x W^T + beta y in double (a block type: gemm_block_b, each row of x
// rounded to q8_0), rounded, then the bias added in float32.
TESSERA_API void linear(const tessera_linear_desc& desc, int64_t rows, const float* x, int64_t ldx,
                        float beta, float* y, int64_t ldy);
// tessera_ffn_forward: linear for gate and up, glu over them (rounded to float32 as the layer
// stores them), linear for down with beta.
TESSERA_API void ffn(const tessera_ffn_desc& desc, int64_t rows, const float* x, int64_t ldx,
                     float beta, float* y, int64_t ldy);

}  // namespace tessera::reference
