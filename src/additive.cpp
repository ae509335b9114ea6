// Additive (Bahdanau) attention driver.
#include "check.hpp"
#include "tessera/layers.hpp"
#include "tessera/reference.hpp"

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
  reference::additive_keys(enc_len, enc_dim, attn_dim, enc, w_enc, keys);
  return Status::ok;
}

Status additive_attention_step(int64_t enc_len, int64_t enc_dim, int64_t dec_dim,
                               int64_t attn_dim, const float* enc, const float* keys,
                               const float* dec, const float* w_dec, const float* v,
                               float* context, float* weights) {
  TESSERA_CHECK(check_dims(enc_len, enc_dim, dec_dim, attn_dim));
  TESSERA_CHECK(detail::check_ptr("keys", keys, true));
  TESSERA_CHECK(check_step(enc, dec, w_dec, v, context));
  reference::additive_attention_step(enc_len, enc_dim, dec_dim, attn_dim, enc, keys, dec, w_dec, v,
                                     context, weights);
  return Status::ok;
}

Status additive_attention(int64_t enc_len, int64_t enc_dim, int64_t dec_dim, int64_t attn_dim,
                          const float* enc, const float* dec, const float* w_enc,
                          const float* w_dec, const float* v, float* context, float* weights) {
  TESSERA_CHECK(check_dims(enc_len, enc_dim, dec_dim, attn_dim));
  TESSERA_CHECK(detail::check_ptr("w_enc", w_enc, true));
  TESSERA_CHECK(check_step(enc, dec, w_dec, v, context));
  reference::additive_attention(enc_len, enc_dim, dec_dim, attn_dim, enc, dec, w_enc, w_dec, v,
                                context, weights);
  return Status::ok;
}

}  // namespace tessera
