// Multi-head attention layer: projections as GEMMs, the fused attention over strided views of
// them (BSHD, so no transposes are copied), and the output projection.
#include "layers/mha.hpp"

#include <cstring>

#include "attention/hadamard.hpp"
#include "attention/rope.hpp"
#include "gemm/gemm_packed.hpp"
#include "layers/mha_paged.hpp"
#include "layers/mha_ring.hpp"
#include "runtime/arith.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/scratch.hpp"
#include "runtime/threading.hpp"
#include "runtime/verbose.hpp"
#include "tessera/attention.hpp"
#include "tessera/gemm.hpp"

namespace tessera {
namespace detail {
namespace {

// Element `i` of an array of `t` (a whole block's first for a block type).
void* at(void* p, DType t, int64_t i) { return static_cast<char*>(p) + storage_bytes(t, i); }

// C's rows set to the bias (the product then adds to them: beta 1), or left for beta 0.
float bias_rows(int64_t rows, int64_t cols, const float* bias, float* c, int64_t ldc) {
  for (int64_t r = 0; bias && r < rows; ++r)
    std::memcpy(c + r * ldc, bias, sizeof(float) * size_t(cols));
  return bias ? 1.0f : 0.0f;
}

// C (rows x cols, ldc) = X W (+ bias broadcast over rows): packed W (float32, 16-bit or block-type
// panels) through sgemm_packed, row-major 16-bit W through gemm_ex (widened in registers), a
// block-type W (stored out x in) through gemm_ex's integer path. The bias goes
// first, as C's initial value: on a failure C is partly written (callers put back what they must).
Status linear(int64_t rows, int64_t in, int64_t cols, const float* x, int64_t ldx,
              const MhaMatrix& w, const float* bias, float* c, int64_t ldc) {
  const float beta = bias_rows(rows, cols, bias, c, ldc);
  const auto nt = Transpose::no_trans;
  if (w.packed) return sgemm_packed(nt, rows, cols, in, 1.0f, x, ldx, w.w, beta, c, ldc);
  if (is_block(w.type))  // stored out x in: B^T
    return gemm_ex(nt, Transpose::trans, rows, cols, in, 1.0f, DType::f32, x, ldx, w.type, w.w, in,
                   beta, c, ldc);
  if (w.type == DType::f32)
    return sgemm(nt, nt, rows, cols, in, 1.0f, x, ldx, static_cast<const float*>(w.w), cols, beta,
                 c, ldc);
  return gemm_ex(nt, nt, rows, cols, in, 1.0f, DType::f32, x, ldx, w.type, w.w, cols, beta, c, ldc);
}

// The new rows into the cache, [b][hk][slot of cache_len + t][dim] from kp and vp
// ([b][t][hk][dim]), rounded to its type by the table's conversion kernels (tessera_convert's
// rounding, without a checked call per row; a block type's row quantized block by block).
// new_row(v_side, bh, t): new row t of (batch, kv head) bh.
template <class NewRow>
void append_rows(const MhaDesc& d, DType ct, const float* kp, const float* vp,
                 const NewRow& new_row) {
  const int64_t B = d.batch, Lkv = d.kv_len, D = d.head_dim, Dv = d.value_dim, Hk = d.kv_heads;
  const arch::KernelTable& kt = active_table();
  const auto store = [&](const float* row, int64_t n, void* dst) {
    if (ct == DType::f32)
      std::memcpy(dst, row, size_t(n) * sizeof(float));
    else if (is_block(ct))
      kt.quant.quantize[block_index(ct)](n, row, static_cast<uint8_t*>(dst));
    else
      (ct == DType::f16 ? kt.convert.f32_to_f16 : kt.convert.f32_to_bf16)(
          n, row, static_cast<uint16_t*>(dst));
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t hk = 0; hk < Hk; ++hk)
      for (int64_t t = 0; t < Lkv; ++t) {
        const int64_t row = (b * Lkv + t) * Hk + hk;
        store(kp + row * D, D, new_row(false, b * Hk + hk, t));
        store(vp + row * Dv, Dv, new_row(true, b * Hk + hk, t));
      }
}

// The cache row new row t of (batch, kv head) bh goes to: after cache_len (cache_lens[b] in a
// paged pool), in its slot of a ring.
void* cache_row(const MhaDesc& d, DType ct, bool v_side, int64_t bh, int64_t t) {
  const int64_t dim = v_side ? d.value_dim : d.head_dim, b = bh / d.kv_heads;
  const int64_t p = (paged_on(d) ? d.cache_lens[b] : d.cache_len) + t, cap = d.cache_capacity;
  const int64_t row = paged_on(d)  ? paged_row(d, b, bh % d.kv_heads, p)
                      : ring_on(d) ? bh * cap + ring_slot(d, p)
                                   : bh * cap + p;
  return at(v_side ? d.v_cache : d.k_cache, ct, row * dim);
}

// The workspace carved into the call's buffers, each 64-byte aligned.
struct MhaBuffers {
  float *qp, *kp, *vp, *op, *lse;
  void *save_k, *save_v;
  uint8_t* mask_rows;
  int32_t* paged_lens;
};
MhaBuffers carve_workspace(void* workspace, const MhaCounts& sz) {
  char* base = static_cast<char*>(workspace);
  base += (kLineBytes - reinterpret_cast<uintptr_t>(base) % kLineBytes) % kLineBytes;
  auto carve = [&](size_t floats) {
    // cppcheck-suppress invalidPointerCast
    float* p = reinterpret_cast<float*>(base);
    base += round_up_lines(floats * 4);
    return p;
  };
  MhaBuffers b{};
  b.qp = carve(sz.q), b.kp = carve(sz.kv_k), b.vp = carve(sz.kv_v), b.op = carve(sz.o);
  b.lse = carve(sz.lse);
  b.save_k = carve(sz.save_k), b.save_v = carve(sz.save_v);
  // cppcheck-suppress invalidPointerCast
  b.mask_rows = reinterpret_cast<uint8_t*>(carve(sz.ring_mask));
  // cppcheck-suppress invalidPointerCast
  b.paged_lens = reinterpret_cast<int32_t*>(carve(sz.paged_lens));
  return b;
}

// Q of the queries, K and V of the new tokens ([batch][len][head][dim]): one product each; of
// one input through packed weights (self-attention in a prepared layer), the three as one call
// (the input rounded once for block types, and one parallel region: a decode step's K and V
// projections are too small to keep two threads streaming alone).
Status project_inputs(const MhaWeights& w, const MhaDesc& d, const float* x_q, const float* x_k,
                      const float* x_v, const MhaBuffers& b) {
  const int64_t rows_q = d.batch * d.q_len, rows_kv = d.batch * d.kv_len;
  const int64_t nq = d.q_heads * d.head_dim, nk = d.kv_heads * d.head_dim;
  if (x_q == x_k && x_k == x_v && rows_q == rows_kv && d.q_in_dim == d.kv_in_dim && w.q.packed &&
      w.k.packed && w.v.packed) {
    const int64_t nv = d.kv_heads * d.value_dim;
    const MhaMatrix* m[3] = {&w.q, &w.k, &w.v};
    const float* bias[3] = {w.b_q, w.b_k, w.b_v};
    float* c[3] = {b.qp, b.kp, b.vp};
    const int64_t cols[3] = {nq, nk, nv};
    PackedProduct p[3];
    for (int i = 0; i < 3; ++i)
      p[i] = {cols[i], m[i]->w, bias_rows(rows_q, cols[i], bias[i], c[i], cols[i]), c[i], cols[i]};
    return sgemm_packed_shared_a(rows_q, d.q_in_dim, x_q, d.q_in_dim, p, 3);
  }
  Status s = linear(rows_q, d.q_in_dim, nq, x_q, d.q_in_dim, w.q, w.b_q, b.qp, nq);
  if (s == Status::ok) s = linear(rows_kv, d.kv_in_dim, nk, x_k, d.kv_in_dim, w.k, w.b_k, b.kp, nk);
  const int64_t nv = d.kv_heads * d.value_dim;
  if (s == Status::ok) s = linear(rows_kv, d.kv_in_dim, nv, x_v, d.kv_in_dim, w.v, w.b_v, b.vp, nv);
  return s;
}

// Rotary embeddings (a token's query and key heads turned at its position; q_len == kv_len),
// then the Hadamard rotation of each new key (value) head before the cache or the attention.
void rotate_new_rows(const MhaDesc& d, const MhaBuffers& bf) {
  const int64_t Lq = d.q_len, Lkv = d.kv_len, D = d.head_dim, Dv = d.value_dim;
  const int64_t Hq = d.q_heads, Hk = d.kv_heads;
  if (d.rope.style != TESSERA_ROPE_NONE)
    for (int64_t b = 0; b < d.batch; ++b) {
      const int64_t first = paged_on(d) ? d.cache_lens[b] : d.k_cache ? d.cache_len : 0;
      const RopePositions pos{d.rope_positions ? d.rope_positions + b * Lkv : nullptr, first, Lkv};
      rope_tokens(d.rope, D, Lkv, pos, {bf.qp + b * Lq * Hq * D, Hq, Hq * D, D},
                  {bf.kp + b * Lkv * Hk * D, Hk, Hk * D, D});
    }
  const int64_t rows = d.batch * Lkv * Hk;
  if (d.hadamard) hadamard_rows(rows, D, d.hadamard, bf.kp, D, bf.kp, D);
  if (d.hadamard_v) hadamard_rows(rows, Dv, d.hadamard, bf.vp, Dv, bf.vp, Dv);
}

// The cache rows this call writes (positions [cache_len, cache_len + kv_len) in their slots: a
// ring's wrap, a paged pool's pages), saved before the append and put back if a later step
// fails, so that a failed call leaves the cache as it found it.
void copy_cache_rows(const MhaDesc& d, DType ct, const MhaBuffers& b, bool save) {
  for (int64_t bh = 0; bh < d.batch * d.kv_heads; ++bh)
    for (const bool v_side : {false, true})
      for (int64_t t = 0; t < d.kv_len; ++t) {
        const int64_t dim = v_side ? d.value_dim : d.head_dim;
        void* saved = at(v_side ? b.save_v : b.save_k, ct, (bh * d.kv_len + t) * dim);
        void* row = cache_row(d, ct, v_side, bh, t);
        const size_t bytes = size_t(storage_bytes(ct, dim));
        std::memcpy(save ? saved : row, save ? row : saved, bytes);
      }
}

// out = O W_o (+ b_o): one product that fails with nothing written, then the bias.
Status project_output(const MhaWeights& w, const MhaDesc& d, const float* op, float* out) {
  const int64_t rows = d.batch * d.q_len, in = d.q_heads * d.value_dim;
  const Status s = linear(rows, in, d.out_dim, op, in, w.o, nullptr, out, d.out_dim);
  if (s == Status::ok && w.b_o)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < d.out_dim; ++j) out[r * d.out_dim + j] += w.b_o[j];
  return s;
}

void log_call(const Verbose& vb, const char* name, Status s, const MhaWeights& w, const MhaDesc& d,
              DType ct) {
  const bool cached = d.k_cache != nullptr;
  vb.print(name, s, cached ? "cache-append" : "no-cache", "sgemm+attention (lines above)",
           tbb::this_task_arena::max_concurrency(),
           "batch:%lld q:%lld kv:%lld cache:%lld heads:%lld/%lld d:%lld dv:%lld causal:%d "
           "weights:%s%s cache:%s",
           (long long)d.batch, (long long)d.q_len, (long long)d.kv_len,
           cached ? (long long)d.cache_len : 0LL, (long long)d.q_heads, (long long)d.kv_heads,
           (long long)d.head_dim, (long long)d.value_dim, int(d.causal), dtype_name(w.q.type),
           w.q.packed ? "-packed" : "", dtype_name(ct));
}

}  // namespace

Status mha_run(const char* name, const MhaWeights& w, const MhaDesc& d, const MhaCounts& sz,
               const float* x_q, const float* x_k, const float* x_v, float* out, void* workspace) {
  const Verbose vb;
  const MhaBuffers b = carve_workspace(workspace, sz);
  const bool cached = d.k_cache != nullptr;
  const DType ct = cached ? DType(d.cache_type) : DType::f32;
  Status s = project_inputs(w, d, x_q, x_k, x_v, b);
  if (s == Status::ok) rotate_new_rows(d, b);

  tessera_attention_desc a = mha_attention_desc(d);
  a.lse = d.lse ? b.lse : nullptr;  // copied to the caller's once nothing can fail
  if (paged_on(d)) paged_attention(d, b.paged_lens, a);
  if (ring_on(d) && sz.ring_mask > 0) {
    ring_mask(d, b.mask_rows);
    ring_attention(d, b.mask_rows, a);
  }
  const void *keys = b.kp, *values = b.vp;
  const bool saved = cached && s == Status::ok;
  if (saved) {
    copy_cache_rows(d, ct, b, true);
    append_rows(d, ct, b.kp, b.vp, [&](bool v_side, int64_t bh, int64_t t) {
      return cache_row(d, ct, v_side, bh, t);
    });
    keys = d.k_cache, values = d.v_cache;
  }
  if (s == Status::ok) s = attention(a, b.qp, keys, values, b.op);
  if (s == Status::ok) s = project_output(w, d, b.op, out);
  if (s == Status::ok && d.lse) std::memcpy(d.lse, b.lse, size_t(sz.lse) * sizeof(float));
  if (saved && s != Status::ok) copy_cache_rows(d, ct, b, false);
  log_call(vb, name, s, w, d, ct);
  return s;
}

Status mha_call(const char* name, const MhaWeights& w, const MhaDesc& d, bool weights_in_desc,
                const float* x_q, const float* x_k, const float* x_v, float* out, void* workspace,
                size_t workspace_bytes_given) {
  return in_arena([&] {
    MhaCounts sz;
    TESSERA_CHECK(check_mha(d, weights_in_desc, sz));
    TESSERA_CHECK(check_ptr("x_q", x_q, d.batch > 0 && d.q_len > 0));
    const bool shared = x_k == x_v;  // named as tessera_mha_forward's x_kv
    TESSERA_CHECK(check_ptr(shared ? "x_kv" : "x_k", x_k, d.batch > 0 && d.kv_len > 0));
    TESSERA_CHECK(check_ptr(shared ? "x_kv" : "x_v", x_v, d.batch > 0 && d.kv_len > 0));
    TESSERA_CHECK(check_ptr("out", out, d.batch > 0 && d.q_len > 0));
    const size_t need = mha_workspace_bytes(sz);
    if (workspace && workspace_bytes_given < need)
      return fail(Status::invalid_argument,
                  "workspace_bytes = %zu is below the workspace size = %zu", workspace_bytes_given,
                  need);
    TESSERA_CHECK(check_mha_aliasing(d, sz, x_q, x_k, x_v, out, workspace, workspace_bytes_given));
    // No queries: nothing to compute, but new keys and values still go into a cache.
    if (d.batch == 0 || (d.q_len == 0 && (d.k_cache == nullptr || d.kv_len == 0)))
      return Status::ok;
    if (!workspace) {  // the calling thread's scratch (nested calls use the next depth's)
      workspace = thread_scratch(ScratchSlot::layer).floats((need + 3) / 4);
      if (!workspace)
        return fail(Status::out_of_memory, "workspace: cannot allocate %zu bytes", need);
    }
    return mha_run(name, w, d, sz, x_q, x_k, x_v, out, workspace);
  });
}

}  // namespace detail

Status mha_desc_init(MhaDesc& d, int64_t batch, int64_t q_len, int64_t kv_len, int64_t model_dim,
                     int64_t heads) {
  TESSERA_CHECK(detail::check_positive("model_dim", model_dim));
  TESSERA_CHECK(detail::check_positive("heads", heads));
  if (model_dim % heads != 0)
    return detail::fail(Status::invalid_argument,
                        "model_dim = %lld is not a multiple of heads = %lld", (long long)model_dim,
                        (long long)heads);
  TESSERA_CHECK(detail::check_nonneg("batch", batch));
  TESSERA_CHECK(detail::check_nonneg("q_len", q_len));
  TESSERA_CHECK(detail::check_nonneg("kv_len", kv_len));
  MhaDesc n{};
  n.batch = batch;
  n.q_len = q_len;
  n.kv_len = kv_len;
  n.q_in_dim = n.kv_in_dim = n.out_dim = model_dim;
  n.q_heads = n.kv_heads = heads;
  n.head_dim = n.value_dim = model_dim / heads;
  n.window_left = n.window_right = -1;
  n.align = TESSERA_ALIGN_BOTTOM_RIGHT;
  d = n;
  return Status::ok;
}

Status mha_workspace_size(const MhaDesc& d, size_t& bytes) {
  detail::MhaCounts c;
  TESSERA_CHECK(detail::check_mha(d, true, c));
  bytes = detail::mha_workspace_bytes(c);
  return Status::ok;
}

Status mha_forward(const MhaDesc& d, const float* x_q, const float* x_kv, float* out,
                   void* workspace, size_t workspace_bytes) {
  const DType wt = DType(d.weight_type);
  detail::MhaWeights w;
  w.q = {d.w_q, wt, false}, w.k = {d.w_k, wt, false}, w.v = {d.w_v, wt, false};
  w.o = {d.w_o, wt, false};
  w.b_q = d.b_q, w.b_k = d.b_k, w.b_v = d.b_v, w.b_o = d.b_o;
  return detail::mha_call("mha_forward", w, d, true, x_q, x_kv, x_kv, out, workspace,
                          workspace_bytes);
}

}  // namespace tessera
