// Multi-head attention layer: projections as GEMMs, the fused attention over strided views of
// them (BSHD, so no transposes are copied), and the output projection.
#include "layers/mha.hpp"

#include <cstring>

#include "attention/hadamard.hpp"
#include "attention/rope.hpp"
#include "layers/mha_paged.hpp"
#include "layers/mha_ring.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/scratch.hpp"
#include "runtime/threading.hpp"
#include "runtime/verbose.hpp"
#include "tessera/attention.hpp"
#include "tessera/gemm.hpp"

namespace tessera {
namespace detail {
namespace {

constexpr size_t kAlign = 64;

size_t round_up(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Element `i` of an array of `t` (a whole block's first for a block type).
void* at(void* p, DType t, int64_t i) { return static_cast<char*>(p) + storage_bytes(t, i); }

// C (rows x cols, ldc) = X W (+ bias broadcast over rows): packed W (float32, 16-bit or block-type
// panels) through sgemm_packed, row-major 16-bit W through gemm_ex (widened in registers), a
// block-type W (stored out x in) through gemm_ex's integer path. The bias goes
// first, as C's initial value: on a failure C is partly written (callers put back what they must).
Status linear(int64_t rows, int64_t in, int64_t cols, const float* x, int64_t ldx,
              const MhaMatrix& w, const float* bias, float* c, int64_t ldc) {
  if (bias) {
    for (int64_t r = 0; r < rows; ++r) std::memcpy(c + r * ldc, bias, sizeof(float) * cols);
  }
  const float beta = bias ? 1.0f : 0.0f;
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

}  // namespace

Status mha_run(const char* name, const MhaWeights& w, const MhaDesc& d, const MhaCounts& sz,
               const float* x_q, const float* x_k, const float* x_v, float* out, void* workspace) {
  const Verbose vb;
  char* base = static_cast<char*>(workspace);
  base += (kAlign - reinterpret_cast<uintptr_t>(base) % kAlign) % kAlign;
  auto carve = [&](size_t floats) {
    // Each buffer starts 64-byte aligned inside the byte workspace.
    // cppcheck-suppress invalidPointerCast
    float* p = reinterpret_cast<float*>(base);
    base += round_up(floats * 4);
    return p;
  };
  float* qp = carve(sz.q);
  float* kp = carve(sz.kv_k);
  float* vp = carve(sz.kv_v);
  float* op = carve(sz.o);
  float* lse = carve(sz.lse);
  void* save_k = carve(sz.save_k);
  void* save_v = carve(sz.save_v);
  // cppcheck-suppress invalidPointerCast
  auto* mask_rows = reinterpret_cast<uint8_t*>(carve(sz.ring_mask));
  // cppcheck-suppress invalidPointerCast
  auto* paged_lens = reinterpret_cast<int32_t*>(carve(sz.paged_lens));

  const int64_t B = d.batch, Lq = d.q_len, Lkv = d.kv_len, D = d.head_dim, Dv = d.value_dim;
  const int64_t Hq = d.q_heads, Hk = d.kv_heads;
  const bool cached = d.k_cache != nullptr;
  const DType ct = cached ? DType(d.cache_type) : DType::f32;
  Status s = linear(B * Lq, d.q_in_dim, Hq * D, x_q, d.q_in_dim, w.q, w.b_q, qp, Hq * D);
  // K and V of the new tokens, [batch][kv_len][kv head][dim]: one product each.
  if (s == Status::ok)
    s = linear(B * Lkv, d.kv_in_dim, Hk * D, x_k, d.kv_in_dim, w.k, w.b_k, kp, Hk * D);
  if (s == Status::ok)
    s = linear(B * Lkv, d.kv_in_dim, Hk * Dv, x_v, d.kv_in_dim, w.v, w.b_v, vp, Hk * Dv);
  // Rotary embeddings: a token's query and key heads turned at its position (q_len == kv_len).
  if (s == Status::ok && d.rope.style != TESSERA_ROPE_NONE)
    for (int64_t b = 0; b < B; ++b) {
      const int64_t first = paged_on(d) ? d.cache_lens[b] : d.k_cache ? d.cache_len : 0;
      const RopePositions pos{d.rope_positions ? d.rope_positions + b * Lkv : nullptr, first, Lkv};
      rope_tokens(d.rope, D, Lkv, pos, {qp + b * Lq * Hq * D, Hq, Hq * D, D},
                  {kp + b * Lkv * Hk * D, Hk, Hk * D, D});
    }
  // Rotated keys (and values): each head's row rotated before the cache or the attention.
  if (s == Status::ok && d.hadamard) hadamard_rows(B * Lkv * Hk, D, d.hadamard, kp, D, kp, D);
  if (s == Status::ok && d.hadamard_v) hadamard_rows(B * Lkv * Hk, Dv, d.hadamard, vp, Dv, vp, Dv);

  tessera_attention_desc a = mha_attention_desc(d);
  a.lse = d.lse ? lse : nullptr;  // copied to the caller's once nothing can fail
  const void *keys = kp, *values = vp;
  // The cache rows of (batch, kv head) bh this call writes (positions [cache_len, cache_len +
  // kv_len), in their slots: a ring's wrap), and a copy of them: put back if a later step
  // fails, so that a failed call leaves the cache as it found it.
  const bool ring = ring_on(d), paged = paged_on(d);
  auto new_row = [&](bool v_side, int64_t bh, int64_t t) {
    return cache_row(d, ct, v_side, bh, t);
  };
  auto copy_rows = [&](bool save) {
    for (int64_t bh = 0; bh < B * Hk; ++bh)
      for (const bool v_side : {false, true})
        for (int64_t t = 0; t < Lkv; ++t) {
          const int64_t dim = v_side ? Dv : D;
          void* saved = at(v_side ? save_v : save_k, ct, (bh * Lkv + t) * dim);
          const size_t bytes = size_t(storage_bytes(ct, dim));
          if (save)
            std::memcpy(saved, new_row(v_side, bh, t), bytes);
          else
            std::memcpy(new_row(v_side, bh, t), saved, bytes);
        }
  };
  if (paged) paged_attention(d, paged_lens, a);
  if (ring && sz.ring_mask > 0) {
    ring_mask(d, mask_rows);
    ring_attention(d, mask_rows, a);
  }
  const bool saved = cached && s == Status::ok;
  if (saved) {
    copy_rows(true);
    append_rows(d, ct, kp, vp, new_row);
    keys = d.k_cache;
    values = d.v_cache;
  }
  if (s == Status::ok) s = attention(a, qp, keys, values, op);
  // out is written last, by one product that fails with nothing written, then its bias.
  if (s == Status::ok)
    s = linear(B * Lq, Hq * Dv, d.out_dim, op, Hq * Dv, w.o, nullptr, out, d.out_dim);
  if (s == Status::ok && w.b_o)
    for (int64_t r = 0; r < B * Lq; ++r)
      for (int64_t j = 0; j < d.out_dim; ++j) out[r * d.out_dim + j] += w.b_o[j];
  if (s == Status::ok && d.lse) std::memcpy(d.lse, lse, size_t(sz.lse) * sizeof(float));
  if (saved && s != Status::ok) copy_rows(false);
  vb.print(name, s, cached ? "cache-append" : "no-cache", "sgemm+attention (lines above)",
           tbb::this_task_arena::max_concurrency(),
           "batch:%lld q:%lld kv:%lld cache:%lld heads:%lld/%lld d:%lld dv:%lld causal:%d "
           "weights:%s%s cache:%s",
           (long long)B, (long long)Lq, (long long)Lkv, cached ? (long long)d.cache_len : 0LL,
           (long long)Hq, (long long)Hk, (long long)D, (long long)Dv, int(d.causal),
           dtype_name(w.q.type), w.q.packed ? "-packed" : "", dtype_name(ct));
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
