// Additive (Bahdanau) attention driver.
// keys = enc W_enc is one SGEMM; a step is a GEMV for the query, the vector tanh and a dot per
// key for the scores, the softmax kernels, and a GEMV for the context.
#include <vector>

#include "check.hpp"
#include "dispatch.hpp"
#include "tessera/gemm.hpp"
#include "tessera/layers.hpp"
#include "tessera/softmax.hpp"

namespace tessera {
namespace {

Status check_dims(int64_t enc_len, int64_t enc_dim, int64_t dec_dim, int64_t attn_dim) {
  TESSERA_CHECK(detail::check_positive("enc_len", enc_len));
  TESSERA_CHECK(detail::check_positive("enc_dim", enc_dim));
  TESSERA_CHECK(detail::check_positive("dec_dim", dec_dim));
  return detail::check_positive("attn_dim", attn_dim);
}

Status check_step(const float* enc, const float* dec, const float* w_dec, const float* v,
                  const float* context) {
  TESSERA_CHECK(detail::check_ptr("enc", enc, true));
  TESSERA_CHECK(detail::check_ptr("dec", dec, true));
  TESSERA_CHECK(detail::check_ptr("w_dec", w_dec, true));
  TESSERA_CHECK(detail::check_ptr("v", v, true));
  return detail::check_ptr("context", context, true);
}

}  // namespace

Status additive_keys(int64_t enc_len, int64_t enc_dim, int64_t attn_dim, const float* enc,
                     const float* w_enc, float* keys) {
  TESSERA_CHECK(detail::check_positive("enc_len", enc_len));
  TESSERA_CHECK(detail::check_positive("enc_dim", enc_dim));
  TESSERA_CHECK(detail::check_positive("attn_dim", attn_dim));
  TESSERA_CHECK(detail::check_ptr("enc", enc, true));
  TESSERA_CHECK(detail::check_ptr("w_enc", w_enc, true));
  TESSERA_CHECK(detail::check_ptr("keys", keys, true));
  return sgemm(Transpose::no_trans, Transpose::no_trans, enc_len, attn_dim, enc_dim, 1.0f, enc,
               enc_dim, w_enc, attn_dim, 0.0f, keys, attn_dim);
}

Status additive_attention_step(int64_t enc_len, int64_t enc_dim, int64_t dec_dim, int64_t attn_dim,
                               const float* enc, const float* keys, const float* dec,
                               const float* w_dec, const float* v, float* context, float* weights) {
  TESSERA_CHECK(check_dims(enc_len, enc_dim, dec_dim, attn_dim));
  TESSERA_CHECK(detail::check_ptr("keys", keys, true));
  TESSERA_CHECK(check_step(enc, dec, w_dec, v, context));
  const arch::SoftmaxKernels& k = detail::active_table().softmax;
  std::vector<float> query(static_cast<size_t>(attn_dim)), t(static_cast<size_t>(attn_dim));
  std::vector<float> e(static_cast<size_t>(enc_len));
  TESSERA_CHECK(sgemm(Transpose::no_trans, Transpose::no_trans, 1, attn_dim, dec_dim, 1.0f, dec,
                      dec_dim, w_dec, attn_dim, 0.0f, query.data(), attn_dim));
  for (int64_t j = 0; j < enc_len; ++j) {
    const float* kj = keys + j * attn_dim;
    for (int64_t a = 0; a < attn_dim; ++a) t[size_t(a)] = query[size_t(a)] + kj[a];
    k.tanh(attn_dim, t.data(), t.data());
    double dot = 0.0;  // attn_dim terms, summed in a fixed order
    for (int64_t a = 0; a < attn_dim; ++a) dot += double(v[a]) * t[size_t(a)];
    e[size_t(j)] = static_cast<float>(dot);
  }
  TESSERA_CHECK(softmax(1, enc_len, e.data(), enc_len, e.data(), enc_len, 1.0f));
  TESSERA_CHECK(sgemm(Transpose::no_trans, Transpose::no_trans, 1, enc_dim, enc_len, 1.0f, e.data(),
                      enc_len, enc, enc_dim, 0.0f, context, enc_dim));
  if (weights) std::copy(e.begin(), e.end(), weights);
  return Status::ok;
}

Status additive_attention(int64_t enc_len, int64_t enc_dim, int64_t dec_dim, int64_t attn_dim,
                          const float* enc, const float* dec, const float* w_enc,
                          const float* w_dec, const float* v, float* context, float* weights) {
  TESSERA_CHECK(check_dims(enc_len, enc_dim, dec_dim, attn_dim));
  TESSERA_CHECK(detail::check_ptr("w_enc", w_enc, true));
  TESSERA_CHECK(check_step(enc, dec, w_dec, v, context));
  std::vector<float> keys(static_cast<size_t>(enc_len * attn_dim));
  TESSERA_CHECK(additive_keys(enc_len, enc_dim, attn_dim, enc, w_enc, keys.data()));
  return additive_attention_step(enc_len, enc_dim, dec_dim, attn_dim, enc, keys.data(), dec, w_dec,
                                 v, context, weights);
}

}  // namespace tessera
