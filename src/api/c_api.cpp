// The C API: a forwarding layer over the C++ API. Exceptions never cross it (when the build has
// them, an allocation failure becomes TESSERA_OUT_OF_MEMORY).
#include <new>
#include <string>

#include "runtime/error.hpp"
#include "tessera/attention.hpp"
#include "tessera/convert.hpp"
#include "tessera/gemm.hpp"
#include "tessera/layers.hpp"
#include "tessera/softmax.hpp"
#include "tessera/tessera.h"
#include "tessera/threading.hpp"

namespace {

using tessera::Status;
using tessera::Transpose;

tessera_status to_c(Status s) { return static_cast<tessera_status>(s); }
Transpose to_cpp(tessera_transpose t) { return static_cast<Transpose>(t); }

template <class F>
tessera_status guarded(F&& f) {
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
  try {
    return to_c(f());
  } catch (const std::bad_alloc&) {
    return to_c(tessera::detail::fail(Status::out_of_memory, "out of memory"));
  } catch (...) {
    return to_c(tessera::detail::fail(Status::internal, "internal error"));
  }
#else
  return to_c(f());
#endif
}

tessera_status null_desc() {
  return to_c(tessera::detail::fail(Status::invalid_argument, "desc is NULL"));
}

}  // namespace

extern "C" {

const char* tessera_version(void) {
  static const std::string v = std::to_string(TESSERA_VERSION_MAJOR) + "." +
                               std::to_string(TESSERA_VERSION_MINOR) + "." +
                               std::to_string(TESSERA_VERSION_PATCH);
  return v.c_str();
}
int tessera_version_number(void) { return TESSERA_VERSION; }

const char* tessera_status_string(tessera_status s) {
  return tessera::status_string(static_cast<Status>(s));
}
const char* tessera_last_error(void) { return tessera::last_error(); }
const char* tessera_isa_name(void) { return tessera::isa_name(); }
tessera_status tessera_set_isa(const char* name) { return to_c(tessera::set_isa(name)); }
int tessera_isa_supported(const char* name) { return tessera::isa_supported(name) ? 1 : 0; }
size_t tessera_scratch_bytes(void) { return tessera::scratch_bytes(); }
tessera_status tessera_release_scratch(void) { return to_c(tessera::release_scratch()); }
tessera_status tessera_bind_workspace(void* buffer, size_t bytes) {
  return guarded([&] { return tessera::bind_workspace(buffer, bytes); });
}
size_t tessera_workspace_peak(void) { return tessera::workspace_peak(); }
tessera_status tessera_convert(tessera_dtype from, tessera_dtype to, int64_t n, const void* x,
                               void* y) {
  return guarded([&] {
    return tessera::convert(static_cast<tessera::DType>(from), static_cast<tessera::DType>(to), n,
                            x, y);
  });
}
size_t tessera_dtype_size(tessera_dtype t, int64_t n) {
  return tessera::dtype_size(static_cast<tessera::DType>(t), n);
}
tessera_status tessera_set_num_threads(int n) {
  return guarded([&] { return tessera::set_num_threads(n); });
}

tessera_status tessera_sgemm(tessera_transpose ta, tessera_transpose tb, int64_t m, int64_t n,
                             int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                             int64_t ldb, float beta, float* c, int64_t ldc) {
  return guarded([&] {
    return tessera::sgemm(to_cpp(ta), to_cpp(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  });
}

tessera_status tessera_gemm_ex(tessera_transpose ta, tessera_transpose tb, int64_t m, int64_t n,
                               int64_t k, float alpha, tessera_dtype a_type, const void* a,
                               int64_t lda, tessera_dtype b_type, const void* b, int64_t ldb,
                               float beta, float* c, int64_t ldc) {
  return guarded([&] {
    return tessera::gemm_ex(to_cpp(ta), to_cpp(tb), m, n, k, alpha,
                            static_cast<tessera::DType>(a_type), a, lda,
                            static_cast<tessera::DType>(b_type), b, ldb, beta, c, ldc);
  });
}

tessera_status tessera_hgemm(tessera_transpose ta, tessera_transpose tb, int64_t m, int64_t n,
                             int64_t k, float alpha, const void* a, int64_t lda, const void* b,
                             int64_t ldb, float beta, void* c, int64_t ldc) {
  return guarded([&] {
    return tessera::hgemm(to_cpp(ta), to_cpp(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  });
}

tessera_status tessera_sgemm_strided_batched(tessera_transpose ta, tessera_transpose tb, int64_t m,
                                             int64_t n, int64_t k, float alpha, const float* a,
                                             int64_t lda, int64_t stride_a, const float* b,
                                             int64_t ldb, int64_t stride_b, float beta, float* c,
                                             int64_t ldc, int64_t stride_c, int64_t batch) {
  return guarded([&] {
    return tessera::sgemm_strided_batched(to_cpp(ta), to_cpp(tb), m, n, k, alpha, a, lda, stride_a,
                                          b, ldb, stride_b, beta, c, ldc, stride_c, batch);
  });
}

size_t tessera_sgemm_pack_b_size(tessera_transpose tb, int64_t k, int64_t n) {
  return tessera::sgemm_pack_b_size(to_cpp(tb), k, n);
}

tessera_status tessera_sgemm_pack_b(tessera_transpose tb, int64_t k, int64_t n, const float* b,
                                    int64_t ldb, void* packed, size_t packed_bytes) {
  return guarded(
      [&] { return tessera::sgemm_pack_b(to_cpp(tb), k, n, b, ldb, packed, packed_bytes); });
}

tessera_status tessera_sgemm_pack_b_ex(tessera_transpose tb, int64_t k, int64_t n,
                                       tessera_dtype b_type, const void* b, int64_t ldb,
                                       void* packed, size_t packed_bytes) {
  return guarded([&] {
    return tessera::sgemm_pack_b_ex(to_cpp(tb), k, n, tessera::DType(b_type), b, ldb, packed,
                                    packed_bytes);
  });
}

size_t tessera_sgemm_pack_b16_size(tessera_transpose tb, int64_t k, int64_t n) {
  return tessera::sgemm_pack_b16_size(to_cpp(tb), k, n);
}

tessera_status tessera_sgemm_pack_b16(tessera_transpose tb, int64_t k, int64_t n,
                                      tessera_dtype b_type, const void* b, int64_t ldb,
                                      void* packed, size_t packed_bytes) {
  return guarded([&] {
    return tessera::sgemm_pack_b16(to_cpp(tb), k, n, tessera::DType(b_type), b, ldb, packed,
                                   packed_bytes);
  });
}

size_t tessera_sgemm_pack_bq_size(tessera_transpose tb, int64_t k, int64_t n,
                                  tessera_dtype b_type) {
  return tessera::sgemm_pack_bq_size(to_cpp(tb), k, n, tessera::DType(b_type));
}

tessera_status tessera_sgemm_pack_bq(tessera_transpose tb, int64_t k, int64_t n,
                                     tessera_dtype b_type, const void* b, int64_t ldb, void* packed,
                                     size_t packed_bytes) {
  return guarded([&] {
    return tessera::sgemm_pack_bq(to_cpp(tb), k, n, tessera::DType(b_type), b, ldb, packed,
                                  packed_bytes);
  });
}

tessera_status tessera_sgemm_packed(tessera_transpose ta, int64_t m, int64_t n, int64_t k,
                                    float alpha, const float* a, int64_t lda, const void* packed,
                                    float beta, float* c, int64_t ldc) {
  return guarded([&] {
    return tessera::sgemm_packed(to_cpp(ta), m, n, k, alpha, a, lda, packed, beta, c, ldc);
  });
}

tessera_status tessera_softmax(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y,
                               int64_t ldy, float scale) {
  return guarded([&] { return tessera::softmax(rows, cols, x, ldx, y, ldy, scale); });
}

tessera_status tessera_log_softmax(int64_t rows, int64_t cols, const float* x, int64_t ldx,
                                   float* y, int64_t ldy, float scale) {
  return guarded([&] { return tessera::log_softmax(rows, cols, x, ldx, y, ldy, scale); });
}

tessera_status tessera_logsumexp(int64_t rows, int64_t cols, const float* x, int64_t ldx,
                                 float scale, float* out) {
  return guarded([&] { return tessera::logsumexp(rows, cols, x, ldx, scale, out); });
}

tessera_status tessera_attention_desc_init(tessera_attention_desc* desc, int64_t batch,
                                           int64_t q_heads, int64_t kv_heads, int64_t q_len,
                                           int64_t kv_len, int64_t head_dim, int64_t value_dim) {
  if (!desc) return null_desc();
  return guarded([&] {
    return tessera::attention_desc_init(*desc, batch, q_heads, kv_heads, q_len, kv_len, head_dim,
                                        value_dim);
  });
}

tessera_status tessera_attention(const tessera_attention_desc* desc, const float* q, const void* k,
                                 const void* v, float* o) {
  if (!desc) return null_desc();
  return guarded([&] { return tessera::attention(*desc, q, k, v, o); });
}
tessera_status tessera_hadamard(int64_t rows, int64_t dim, int64_t n, const float* x, int64_t ldx,
                                float* y, int64_t ldy) {
  return guarded([&] { return tessera::hadamard(rows, dim, n, x, ldx, y, ldy); });
}

tessera_status tessera_rope(const tessera_rope_desc* rope, int64_t batch, int64_t heads,
                            int64_t seq, int64_t head_dim, const int64_t stride[3],
                            const int64_t* positions, int64_t start, float* x) {
  if (rope == nullptr) return to_c(tessera::detail::fail(Status::invalid_argument, "rope is NULL"));
  return guarded([&] {
    return tessera::rope(*rope, batch, heads, seq, head_dim, stride, positions, start, x);
  });
}

tessera_status tessera_additive_attention(int64_t enc_len, int64_t enc_dim, int64_t dec_dim,
                                          int64_t attn_dim, const float* enc, const float* dec,
                                          const float* w_enc, const float* w_dec, const float* v,
                                          float* context, float* weights) {
  return guarded([&] {
    return tessera::additive_attention(enc_len, enc_dim, dec_dim, attn_dim, enc, dec, w_enc, w_dec,
                                       v, context, weights);
  });
}

tessera_status tessera_additive_attention_batch(int64_t batch, int64_t enc_len, int64_t enc_dim,
                                                int64_t dec_dim, int64_t attn_dim, const float* enc,
                                                const float* keys, const int32_t* enc_lens,
                                                const float* dec, const float* w_dec,
                                                const float* v, float* context, float* weights) {
  return guarded([&] {
    return tessera::additive_attention_batch(batch, enc_len, enc_dim, dec_dim, attn_dim, enc, keys,
                                             enc_lens, dec, w_dec, v, context, weights);
  });
}

tessera_status tessera_additive_keys(int64_t enc_len, int64_t enc_dim, int64_t attn_dim,
                                     const float* enc, const float* w_enc, float* keys) {
  return guarded(
      [&] { return tessera::additive_keys(enc_len, enc_dim, attn_dim, enc, w_enc, keys); });
}

tessera_status tessera_additive_attention_step(int64_t enc_len, int64_t enc_dim, int64_t dec_dim,
                                               int64_t attn_dim, const float* enc,
                                               const float* keys, const float* dec,
                                               const float* w_dec, const float* v, float* context,
                                               float* weights) {
  return guarded([&] {
    return tessera::additive_attention_step(enc_len, enc_dim, dec_dim, attn_dim, enc, keys, dec,
                                            w_dec, v, context, weights);
  });
}

tessera_status tessera_mha_desc_init(tessera_mha_desc* desc, int64_t batch, int64_t q_len,
                                     int64_t kv_len, int64_t model_dim, int64_t heads) {
  if (!desc) return null_desc();
  return guarded(
      [&] { return tessera::mha_desc_init(*desc, batch, q_len, kv_len, model_dim, heads); });
}

tessera_status tessera_mha_workspace_size(const tessera_mha_desc* desc, size_t* bytes) {
  if (!desc) return null_desc();
  if (!bytes) return to_c(tessera::detail::fail(Status::invalid_argument, "bytes is NULL"));
  return guarded([&] { return tessera::mha_workspace_size(*desc, *bytes); });
}

tessera_status tessera_mha_forward(const tessera_mha_desc* desc, const float* x_q,
                                   const float* x_kv, float* out, void* workspace,
                                   size_t workspace_bytes) {
  if (!desc) return null_desc();
  return guarded(
      [&] { return tessera::mha_forward(*desc, x_q, x_kv, out, workspace, workspace_bytes); });
}

struct tessera_mha_layer {
  tessera::MhaLayer layer;
};

tessera_status tessera_mha_create(const tessera_mha_desc* desc, tessera_mha_layer** layer) {
  if (!desc) return null_desc();
  if (!layer) return to_c(tessera::detail::fail(Status::invalid_argument, "layer is NULL"));
  return guarded([&] {
    auto* made = new (std::nothrow) tessera_mha_layer;
    if (!made) return tessera::detail::fail(Status::out_of_memory, "layer: cannot allocate");
    const Status s = made->layer.init(*desc);
    if (s != Status::ok) {
      delete made;
      return s;
    }
    *layer = made;
    return s;
  });
}

void tessera_mha_destroy(tessera_mha_layer* layer) { delete layer; }

tessera_status tessera_mha_layer_workspace_size(const tessera_mha_layer* layer,
                                                const tessera_mha_desc* desc, size_t* bytes) {
  if (!layer) return to_c(tessera::detail::fail(Status::invalid_argument, "layer is NULL"));
  if (!desc) return null_desc();
  if (!bytes) return to_c(tessera::detail::fail(Status::invalid_argument, "bytes is NULL"));
  return guarded([&] { return layer->layer.workspace_size(*desc, *bytes); });
}

tessera_status tessera_mha_layer_forward(const tessera_mha_layer* layer,
                                         const tessera_mha_desc* desc, const float* x_q,
                                         const float* x_k, const float* x_v, float* out,
                                         void* workspace, size_t workspace_bytes) {
  if (!layer) return to_c(tessera::detail::fail(Status::invalid_argument, "layer is NULL"));
  if (!desc) return null_desc();
  return guarded(
      [&] { return layer->layer.forward(*desc, x_q, x_k, x_v, out, workspace, workspace_bytes); });
}

tessera_status tessera_norm(tessera_norm_kind kind, int64_t rows, int64_t dim, float* x,
                            int64_t ldx, const float* residual, int64_t ldr, const float* gain,
                            const float* bias, float eps, float* y, int64_t ldy) {
  return guarded([&] {
    return tessera::norm(kind, rows, dim, x, ldx, residual, ldr, gain, bias, eps, y, ldy);
  });
}

tessera_status tessera_glu(tessera_activation act, int64_t rows, int64_t dim, const float* gate,
                           int64_t ldg, const float* up, int64_t ldu, float* y, int64_t ldy) {
  return guarded([&] { return tessera::glu(act, rows, dim, gate, ldg, up, ldu, y, ldy); });
}

struct tessera_linear {
  tessera::Linear layer;
};

tessera_status tessera_linear_create(const tessera_linear_desc* desc, tessera_linear** linear) {
  if (!desc) return null_desc();
  if (!linear) return to_c(tessera::detail::fail(Status::invalid_argument, "linear is NULL"));
  return guarded([&] {
    auto* made = new (std::nothrow) tessera_linear;
    if (!made) return tessera::detail::fail(Status::out_of_memory, "linear: cannot allocate");
    const Status s = made->layer.init(*desc);
    if (s != Status::ok) {
      delete made;
      return s;
    }
    *linear = made;
    return s;
  });
}

void tessera_linear_destroy(tessera_linear* linear) { delete linear; }

tessera_status tessera_linear_forward(const tessera_linear* linear, int64_t rows, const float* x,
                                      int64_t ldx, float beta, float* y, int64_t ldy) {
  if (!linear) return to_c(tessera::detail::fail(Status::invalid_argument, "linear is NULL"));
  return guarded([&] { return linear->layer.forward(rows, x, ldx, beta, y, ldy); });
}

struct tessera_ffn {
  tessera::Ffn layer;
};

tessera_status tessera_ffn_create(const tessera_ffn_desc* desc, tessera_ffn** ffn) {
  if (!desc) return null_desc();
  if (!ffn) return to_c(tessera::detail::fail(Status::invalid_argument, "ffn is NULL"));
  return guarded([&] {
    auto* made = new (std::nothrow) tessera_ffn;
    if (!made) return tessera::detail::fail(Status::out_of_memory, "ffn: cannot allocate");
    const Status s = made->layer.init(*desc);
    if (s != Status::ok) {
      delete made;
      return s;
    }
    *ffn = made;
    return s;
  });
}

void tessera_ffn_destroy(tessera_ffn* ffn) { delete ffn; }

size_t tessera_ffn_workspace_size(const tessera_ffn* ffn, int64_t rows) {
  if (!ffn) {
    tessera::detail::fail(Status::invalid_argument, "ffn is NULL");
    return 0;
  }
  return ffn->layer.workspace_size(rows);
}

tessera_status tessera_ffn_forward(const tessera_ffn* ffn, int64_t rows, const float* x,
                                   int64_t ldx, float beta, float* y, int64_t ldy, void* workspace,
                                   size_t workspace_bytes) {
  if (!ffn) return to_c(tessera::detail::fail(Status::invalid_argument, "ffn is NULL"));
  return guarded(
      [&] { return ffn->layer.forward(rows, x, ldx, beta, y, ldy, workspace, workspace_bytes); });
}

}  // extern "C"
