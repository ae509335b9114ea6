// Additive (Bahdanau) attention driver.
// keys = enc W_enc is one SGEMM; a step is a GEMV for the query, the vector tanh and a dot per
// key for the scores, the softmax kernels, and a GEMV for the context. A step's vectors live in
// the calling thread's scratch (grown once, then reused): the per-token call allocates nothing.
#include <algorithm>
#include <cstring>

#include "runtime/check.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/scratch.hpp"
#include "runtime/threading.hpp"
#include "tessera/gemm.hpp"
#include "tessera/layers.hpp"
#include "tessera/softmax.hpp"

namespace tessera {
namespace {

struct Counts {
  int64_t enc = 0, keys = 0, w_dec = 0, w_enc = 0;
};

Status check_dims(int64_t enc_len, int64_t enc_dim, int64_t dec_dim, int64_t attn_dim, Counts& c) {
  TESSERA_CHECK(detail::check_nonneg("enc_len", enc_len));
  TESSERA_CHECK(detail::check_nonneg("enc_dim", enc_dim));
  TESSERA_CHECK(detail::check_nonneg("dec_dim", dec_dim));
  TESSERA_CHECK(detail::check_nonneg("attn_dim", attn_dim));
  TESSERA_CHECK(detail::checked_count("enc", {enc_len, enc_dim}, c.enc));
  TESSERA_CHECK(detail::checked_count("keys", {enc_len, attn_dim}, c.keys));
  TESSERA_CHECK(detail::checked_count("w_dec", {dec_dim, attn_dim}, c.w_dec));
  return detail::checked_count("w_enc", {enc_dim, attn_dim}, c.w_enc);
}

// Pointers, and no output sharing memory with another argument. `keys` is an input here.
Status check_step(int64_t enc_len, int64_t enc_dim, int64_t dec_dim, int64_t attn_dim,
                  const Counts& c, const float* enc, const float* keys, const float* dec,
                  const float* w_dec, const float* v, const float* w_enc, const float* context,
                  const float* weights) {
  TESSERA_CHECK(detail::check_ptr("enc", enc, c.enc > 0));
  TESSERA_CHECK(detail::check_ptr("dec", dec, dec_dim > 0 && attn_dim > 0));
  TESSERA_CHECK(detail::check_ptr("w_dec", w_dec, c.w_dec > 0));
  TESSERA_CHECK(detail::check_ptr("v", v, attn_dim > 0 && enc_len > 0));
  TESSERA_CHECK(detail::check_ptr("context", context, enc_dim > 0));
  using detail::region;
  const std::initializer_list<detail::Region> inputs = {
      region("enc", enc, c.enc, 4),   region("keys", keys, keys ? c.keys : 0, 4),
      region("dec", dec, dec_dim, 4), region("w_dec", w_dec, c.w_dec, 4),
      region("v", v, attn_dim, 4),    region("w_enc", w_enc, w_enc ? c.w_enc : 0, 4)};
  const detail::Region out = region("context", context, enc_dim, 4);
  const detail::Region w = region("weights", weights, weights ? enc_len : 0, 4);
  TESSERA_CHECK(detail::check_disjoint(out, inputs));
  TESSERA_CHECK(detail::check_disjoint(out, {w}));
  return detail::check_disjoint(w, inputs);
}

// The step proper, arguments checked; `e` holds enc_len + 2 attn_dim floats of scratch.
Status step(int64_t enc_len, int64_t enc_dim, int64_t dec_dim, int64_t attn_dim, const float* enc,
            const float* keys, const float* dec, const float* w_dec, const float* v, float* context,
            float* weights, float* e) {
  const arch::SoftmaxKernels& k = detail::active_table().softmax;
  float* query = e + enc_len;
  float* t = query + attn_dim;
  TESSERA_CHECK(sgemm(Transpose::no_trans, Transpose::no_trans, 1, attn_dim, dec_dim, 1.0f, dec,
                      std::max<int64_t>(dec_dim, 1), w_dec, std::max<int64_t>(attn_dim, 1), 0.0f,
                      query, std::max<int64_t>(attn_dim, 1)));
  for (int64_t j = 0; j < enc_len; ++j) {
    const float* kj = keys + j * attn_dim;
    for (int64_t a = 0; a < attn_dim; ++a) t[a] = query[a] + kj[a];
    k.tanh(attn_dim, t, t);
    double dot = 0.0;  // attn_dim terms, summed in a fixed order
    for (int64_t a = 0; a < attn_dim; ++a) dot += double(v[a]) * t[a];
    e[j] = static_cast<float>(dot);
  }
  TESSERA_CHECK(softmax(1, enc_len, e, std::max<int64_t>(enc_len, 1), e,
                        std::max<int64_t>(enc_len, 1), 1.0f));
  TESSERA_CHECK(sgemm(Transpose::no_trans, Transpose::no_trans, 1, enc_dim, enc_len, 1.0f, e,
                      std::max<int64_t>(enc_len, 1), enc, std::max<int64_t>(enc_dim, 1), 0.0f,
                      context, std::max<int64_t>(enc_dim, 1)));
  if (weights && enc_len > 0) std::memcpy(weights, e, sizeof(float) * size_t(enc_len));
  return Status::ok;
}

Status no_scratch(size_t floats) {
  return detail::fail(Status::out_of_memory, "cannot allocate %zu floats of scratch", floats);
}

}  // namespace

Status additive_keys(int64_t enc_len, int64_t enc_dim, int64_t attn_dim, const float* enc,
                     const float* w_enc, float* keys) {
  return detail::in_arena([&] {
    Counts c;
    TESSERA_CHECK(check_dims(enc_len, enc_dim, 0, attn_dim, c));
    TESSERA_CHECK(detail::check_ptr("enc", enc, c.enc > 0 && attn_dim > 0));
    TESSERA_CHECK(detail::check_ptr("w_enc", w_enc, c.w_enc > 0 && enc_len > 0));
    TESSERA_CHECK(detail::check_ptr("keys", keys, c.keys > 0));
    TESSERA_CHECK(detail::check_disjoint(
        detail::region("keys", keys, c.keys, 4),
        {detail::region("enc", enc, c.enc, 4), detail::region("w_enc", w_enc, c.w_enc, 4)}));
    return sgemm(Transpose::no_trans, Transpose::no_trans, enc_len, attn_dim, enc_dim, 1.0f, enc,
                 std::max<int64_t>(enc_dim, 1), w_enc, std::max<int64_t>(attn_dim, 1), 0.0f, keys,
                 std::max<int64_t>(attn_dim, 1));
  });
}

Status additive_attention_step(int64_t enc_len, int64_t enc_dim, int64_t dec_dim, int64_t attn_dim,
                               const float* enc, const float* keys, const float* dec,
                               const float* w_dec, const float* v, float* context, float* weights) {
  return detail::in_arena([&] {
    Counts c;
    TESSERA_CHECK(check_dims(enc_len, enc_dim, dec_dim, attn_dim, c));
    TESSERA_CHECK(detail::check_ptr("keys", keys, c.keys > 0));
    TESSERA_CHECK(check_step(enc_len, enc_dim, dec_dim, attn_dim, c, enc, keys, dec, w_dec, v,
                             nullptr, context, weights));
    const size_t floats = size_t(enc_len) + 2 * size_t(attn_dim);
    float* e = detail::thread_scratch(detail::ScratchSlot::additive).floats(floats);
    if (!e) return no_scratch(floats);
    return step(enc_len, enc_dim, dec_dim, attn_dim, enc, keys, dec, w_dec, v, context, weights, e);
  });
}

Status additive_attention(int64_t enc_len, int64_t enc_dim, int64_t dec_dim, int64_t attn_dim,
                          const float* enc, const float* dec, const float* w_enc,
                          const float* w_dec, const float* v, float* context, float* weights) {
  return detail::in_arena([&] {
    Counts c;
    TESSERA_CHECK(check_dims(enc_len, enc_dim, dec_dim, attn_dim, c));
    TESSERA_CHECK(detail::check_ptr("w_enc", w_enc, c.w_enc > 0 && enc_len > 0));
    TESSERA_CHECK(check_step(enc_len, enc_dim, dec_dim, attn_dim, c, enc, nullptr, dec, w_dec, v,
                             w_enc, context, weights));
    // The keys, then the step's vectors, in one block of this thread's scratch.
    const size_t floats = size_t(c.keys) + size_t(enc_len) + 2 * size_t(attn_dim);
    float* keys = detail::thread_scratch(detail::ScratchSlot::additive).floats(floats);
    if (!keys) return no_scratch(floats);
    TESSERA_CHECK(sgemm(Transpose::no_trans, Transpose::no_trans, enc_len, attn_dim, enc_dim, 1.0f,
                        enc, std::max<int64_t>(enc_dim, 1), w_enc, std::max<int64_t>(attn_dim, 1),
                        0.0f, keys, std::max<int64_t>(attn_dim, 1)));
    return step(enc_len, enc_dim, dec_dim, attn_dim, enc, keys, dec, w_dec, v, context, weights,
                keys + c.keys);
  });
}

}  // namespace tessera
