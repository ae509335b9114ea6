// Reference additive (Bahdanau 2014) attention: e_j = v . tanh(s W_dec + h_j W_enc).
#include <cmath>
#include <limits>
#include <vector>

#include "tessera/reference.hpp"

namespace tessera::reference {

void additive_keys(int64_t enc_len, int64_t enc_dim, int64_t attn_dim, const float* enc,
                   const float* w_enc, float* keys) {
  reference::sgemm(Transpose::no_trans, Transpose::no_trans, enc_len, attn_dim, enc_dim, 1.0f, enc,
                   enc_dim, w_enc, attn_dim, 0.0f, keys, attn_dim);
}

void additive_attention_step(int64_t enc_len, int64_t enc_dim, int64_t dec_dim, int64_t attn_dim,
                             const float* enc, const float* keys, const float* dec,
                             const float* w_dec, const float* v, float* context, float* weights) {
  std::vector<double> query(static_cast<size_t>(attn_dim), 0.0);
  for (int64_t d = 0; d < dec_dim; ++d)
    for (int64_t a = 0; a < attn_dim; ++a) query[a] += double(dec[d]) * w_dec[d * attn_dim + a];

  std::vector<double> e(static_cast<size_t>(enc_len));
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < enc_len; ++j) {
    double ej = 0.0;
    for (int64_t a = 0; a < attn_dim; ++a)
      ej += double(v[a]) * std::tanh(query[a] + keys[j * attn_dim + a]);
    e[j] = ej;
    if (ej > m) m = ej;
  }
  bool nan = false;
  for (int64_t j = 0; j < enc_len; ++j) nan |= std::isnan(e[j]);
  if (enc_len == 0 || (m == -std::numeric_limits<double>::infinity() && !nan)) {
    // Nothing to attend to (no key, or every score -inf; a NaN score makes all NaN below): a
    // zero context and zero weights, as
    // attention's empty rows and softmax's all -inf rows.
    for (int64_t c = 0; c < enc_dim; ++c) context[c] = 0.0f;
    if (weights)
      for (int64_t j = 0; j < enc_len; ++j) weights[j] = 0.0f;
    return;
  }
  double sum = 0.0;
  if (m == std::numeric_limits<double>::infinity() && !nan) {
    // +inf scores take all the mass, shared equally (the softmax reference's limit).
    for (int64_t j = 0; j < enc_len; ++j) sum += (e[j] = e[j] == m ? 1.0 : 0.0);
  } else {
    for (int64_t j = 0; j < enc_len; ++j) sum += (e[j] = std::exp(e[j] - m));
  }
  for (int64_t c = 0; c < enc_dim; ++c) {
    double acc = 0.0;
    for (int64_t j = 0; j < enc_len; ++j) acc += e[j] * enc[j * enc_dim + c];
    context[c] = static_cast<float>(acc / sum);
  }
  if (weights) {
    for (int64_t j = 0; j < enc_len; ++j) weights[j] = static_cast<float>(e[j] / sum);
  }
}

void additive_attention(int64_t enc_len, int64_t enc_dim, int64_t dec_dim, int64_t attn_dim,
                        const float* enc, const float* dec, const float* w_enc, const float* w_dec,
                        const float* v, float* context, float* weights) {
  std::vector<float> keys(static_cast<size_t>(enc_len * attn_dim));
  additive_keys(enc_len, enc_dim, attn_dim, enc, w_enc, keys.data());
  additive_attention_step(enc_len, enc_dim, dec_dim, attn_dim, enc, keys.data(), dec, w_dec, v,
                          context, weights);
}

void additive_attention_batch(int64_t batch, int64_t enc_len, int64_t enc_dim, int64_t dec_dim,
                              int64_t attn_dim, const float* enc, const float* keys,
                              const int32_t* enc_lens, const float* dec, const float* w_dec,
                              const float* v, float* context, float* weights) {
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = enc_lens ? enc_lens[b] : enc_len;
    float* w = weights ? weights + b * enc_len : nullptr;
    additive_attention_step(n, enc_dim, dec_dim, attn_dim, enc + b * enc_len * enc_dim,
                            keys + b * enc_len * attn_dim, dec + b * dec_dim, w_dec, v,
                            context + b * enc_dim, w);
    if (w)
      for (int64_t j = n; j < enc_len; ++j) w[j] = 0.0f;
  }
}

}  // namespace tessera::reference
