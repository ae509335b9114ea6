// Multi-head attention layer: projections as GEMMs, the fused attention over strided views of
// them (BSHD, so no transposes are copied), and the output projection.
#include <cstring>

#include "check.hpp"
#include "scratch.hpp"
#include "tessera/attention.hpp"
#include "tessera/convert.hpp"
#include "tessera/gemm.hpp"
#include "tessera/layers.hpp"
#include "threading.hpp"
#include "verbose.hpp"

namespace tessera {
namespace {

constexpr size_t kAlign = 64;

size_t round_up(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Element counts of every array the layer reads or writes, each a checked product (check_desc).
struct Counts {
  int64_t x_q = 0, x_kv = 0, out = 0;
  int64_t w_q = 0, w_k = 0, w_v = 0, w_o = 0;  // weights
  int64_t qd = 0, kd = 0, vd = 0;              // projection widths: heads x dim (bias lengths)
  int64_t cache_k = 0, cache_v = 0;
  // Workspace buffers: the projections of Q, K and V, and attention's output; with a cache, a
  // copy of the cache rows the call overwrites (floats enough for their bytes), put back if it
  // fails.
  int64_t q = 0, kv_k = 0, kv_v = 0, o = 0, save_k = 0, save_v = 0;
};

DType weight_type(const MhaDesc& d) { return DType(d.weight_type); }
DType cache_type(const MhaDesc& d) { return DType(d.cache_type); }

// Element `i` of an array of `t`.
void* at(void* p, DType t, int64_t i) {
  return static_cast<char*>(p) + i * int64_t(detail::dtype_bytes(t));
}

// The workspace's bytes, or 0 when they do not fit in size_t (32-bit targets).
size_t workspace_bytes(const Counts& c) {
  uint64_t total = kAlign;
  for (int64_t floats : {c.q, c.kv_k, c.kv_v, c.o, c.save_k, c.save_v})
    total += (uint64_t(floats) * 4 + kAlign - 1) / kAlign * kAlign;  // each < 2^63 / 4: no wrap
  return total <= SIZE_MAX ? size_t(total) : 0;
}

Status counts_of(const MhaDesc& d, Counts& c) {
  using detail::checked_count;
  TESSERA_CHECK(checked_count("desc->q_heads", {d.q_heads, d.head_dim}, c.qd));
  TESSERA_CHECK(checked_count("desc->kv_heads", {d.kv_heads, d.head_dim}, c.kd));
  TESSERA_CHECK(checked_count("desc->kv_heads", {d.kv_heads, d.value_dim}, c.vd));
  TESSERA_CHECK(checked_count("desc->w_q", {d.q_in_dim, c.qd}, c.w_q));
  TESSERA_CHECK(checked_count("desc->w_k", {d.kv_in_dim, c.kd}, c.w_k));
  TESSERA_CHECK(checked_count("desc->w_v", {d.kv_in_dim, c.vd}, c.w_v));
  TESSERA_CHECK(checked_count("desc->w_o", {d.q_heads, d.value_dim, d.out_dim}, c.w_o));
  TESSERA_CHECK(checked_count("x_q", {d.batch, d.q_len, d.q_in_dim}, c.x_q));
  TESSERA_CHECK(checked_count("x_kv", {d.batch, d.kv_len, d.kv_in_dim}, c.x_kv));
  TESSERA_CHECK(checked_count("out", {d.batch, d.q_len, d.out_dim}, c.out));
  TESSERA_CHECK(checked_count("desc->q_len", {d.batch, d.q_len, c.qd}, c.q));
  TESSERA_CHECK(checked_count("desc->q_len", {d.batch, d.q_len, d.q_heads, d.value_dim}, c.o));
  if (d.k_cache) {
    TESSERA_CHECK(
        checked_count("desc->cache_capacity", {d.batch, d.cache_capacity, c.kd}, c.cache_k));
    TESSERA_CHECK(
        checked_count("desc->cache_capacity", {d.batch, d.cache_capacity, c.vd}, c.cache_v));
  }
  TESSERA_CHECK(checked_count("desc->kv_len", {d.batch, d.kv_len, c.kd}, c.kv_k));
  TESSERA_CHECK(checked_count("desc->kv_len", {d.batch, d.kv_len, c.vd}, c.kv_v));
  if (d.k_cache) {
    const int64_t per = 4 / int64_t(detail::dtype_bytes(cache_type(d)));  // elements per float
    c.save_k = (c.kv_k + per - 1) / per, c.save_v = (c.kv_v + per - 1) / per;
  }
  if (workspace_bytes(c) == 0)
    return detail::fail(Status::invalid_argument,
                        "desc: the workspace (%lld + %lld floats and more) does not fit in size_t",
                        (long long)c.q, (long long)c.o);
  return Status::ok;
}

Status check_desc(const MhaDesc& d) {
  TESSERA_CHECK(detail::check_nonneg("desc->batch", d.batch));
  TESSERA_CHECK(detail::check_nonneg("desc->q_len", d.q_len));
  TESSERA_CHECK(detail::check_nonneg("desc->kv_len", d.kv_len));
  TESSERA_CHECK(detail::check_positive("desc->q_in_dim", d.q_in_dim));
  TESSERA_CHECK(detail::check_positive("desc->kv_in_dim", d.kv_in_dim));
  TESSERA_CHECK(detail::check_positive("desc->out_dim", d.out_dim));
  TESSERA_CHECK(detail::check_positive("desc->q_heads", d.q_heads));
  TESSERA_CHECK(detail::check_positive("desc->kv_heads", d.kv_heads));
  TESSERA_CHECK(detail::check_positive("desc->head_dim", d.head_dim));
  TESSERA_CHECK(detail::check_positive("desc->value_dim", d.value_dim));
  if (d.q_heads % d.kv_heads != 0)
    return detail::fail(Status::invalid_argument,
                        "desc->q_heads = %lld is not a multiple of kv_heads = %lld",
                        (long long)d.q_heads, (long long)d.kv_heads);
  TESSERA_CHECK(detail::check_finite("desc->scale", d.scale));
  TESSERA_CHECK(detail::check_dtype("desc->weight_type", weight_type(d)));
  TESSERA_CHECK(detail::check_dtype("desc->cache_type", cache_type(d)));
  if (d.causal != 0 && d.causal != 1)
    return detail::fail(Status::invalid_argument, "desc->causal = %d must be 0 or 1", d.causal);
  if (d.window_left < -1 || d.window_right < -1)
    return detail::fail(Status::invalid_argument, "desc->window_%s must be >= -1",
                        d.window_left < -1 ? "left" : "right");
  TESSERA_CHECK(detail::check_ptr("desc->w_q", d.w_q, true));
  TESSERA_CHECK(detail::check_ptr("desc->w_k", d.w_k, true));
  TESSERA_CHECK(detail::check_ptr("desc->w_v", d.w_v, true));
  TESSERA_CHECK(detail::check_ptr("desc->w_o", d.w_o, true));
  if ((d.k_cache == nullptr) != (d.v_cache == nullptr))
    return detail::fail(Status::invalid_argument, "%s is NULL but %s is set (both or neither)",
                        d.k_cache ? "desc->v_cache" : "desc->k_cache",
                        d.k_cache ? "desc->k_cache" : "desc->v_cache");
  if (d.k_cache) {
    TESSERA_CHECK(detail::check_nonneg("desc->cache_len", d.cache_len));
    int64_t needed;
    if (!detail::add_ok(d.cache_len, d.kv_len, needed) || d.cache_capacity < needed)
      return detail::fail(
          Status::invalid_argument,
          "desc->cache_capacity = %lld cannot hold cache_len = %lld + kv_len = %lld",
          (long long)d.cache_capacity, (long long)d.cache_len, (long long)d.kv_len);
  }
  Counts c;
  return counts_of(d, c);
}

// No output (out, the caches, the workspace) may share memory with another argument; x_kv may
// equal x_q (both are inputs).
Status check_aliasing(const MhaDesc& d, const Counts& c, const float* x_q, const float* x_kv,
                      const float* out, const void* workspace, size_t workspace_bytes_given) {
  using detail::region;
  const size_t wb = detail::dtype_bytes(weight_type(d)), cb = detail::dtype_bytes(cache_type(d));
  const detail::Region in[] = {
      region("x_q", x_q, c.x_q, 4),          region("x_kv", x_kv, c.x_kv, 4),
      region("desc->w_q", d.w_q, c.w_q, wb), region("desc->b_q", d.b_q, d.b_q ? c.qd : 0, 4),
      region("desc->w_k", d.w_k, c.w_k, wb), region("desc->b_k", d.b_k, d.b_k ? c.kd : 0, 4),
      region("desc->w_v", d.w_v, c.w_v, wb), region("desc->b_v", d.b_v, d.b_v ? c.vd : 0, 4),
      region("desc->w_o", d.w_o, c.w_o, wb), region("desc->b_o", d.b_o, d.b_o ? d.out_dim : 0, 4)};
  const detail::Region outputs[] = {
      region("out", out, c.out, 4), region("desc->k_cache", d.k_cache, c.cache_k, cb),
      region("desc->v_cache", d.v_cache, c.cache_v, cb),
      region("workspace", workspace, int64_t(workspace ? workspace_bytes_given : 0), 1)};
  for (size_t i = 0; i < 4; ++i) {
    for (const detail::Region& r : in) TESSERA_CHECK(detail::check_disjoint(outputs[i], {r}));
    for (size_t j = i + 1; j < 4; ++j)
      TESSERA_CHECK(detail::check_disjoint(outputs[i], {outputs[j]}));
  }
  return Status::ok;
}

// C (rows x cols, ldc) = X W (+ bias broadcast over rows), W of `wt` (16-bit weights through
// gemm_ex, which widens them in registers). The bias goes first, as C's initial value: on a
// failure C is partly written (callers put back what they must).
Status linear(int64_t rows, int64_t in, int64_t cols, const float* x, int64_t ldx, DType wt,
              const void* w, int64_t ldw, const float* bias, float* c, int64_t ldc) {
  if (bias) {
    for (int64_t r = 0; r < rows; ++r) std::memcpy(c + r * ldc, bias, sizeof(float) * cols);
  }
  const float beta = bias ? 1.0f : 0.0f;
  if (wt == DType::f32)
    return sgemm(Transpose::no_trans, Transpose::no_trans, rows, cols, in, 1.0f, x, ldx,
                 static_cast<const float*>(w), ldw, beta, c, ldc);
  return gemm_ex(Transpose::no_trans, Transpose::no_trans, rows, cols, in, 1.0f, DType::f32, x, ldx,
                 wt, w, ldw, beta, c, ldc);
}

}  // namespace

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
  d = n;
  return Status::ok;
}

Status mha_workspace_size(const MhaDesc& d, size_t& bytes) {
  TESSERA_CHECK(check_desc(d));
  Counts c;
  TESSERA_CHECK(counts_of(d, c));
  bytes = workspace_bytes(c);
  return Status::ok;
}

Status mha_forward(const MhaDesc& d, const float* x_q, const float* x_kv, float* out,
                   void* workspace, size_t workspace_bytes_given) {
  return detail::in_arena([&] {
    TESSERA_CHECK(check_desc(d));
    TESSERA_CHECK(detail::check_ptr("x_q", x_q, d.batch > 0 && d.q_len > 0));
    TESSERA_CHECK(detail::check_ptr("x_kv", x_kv, d.batch > 0 && d.kv_len > 0));
    TESSERA_CHECK(detail::check_ptr("out", out, d.batch > 0 && d.q_len > 0));
    Counts sz;
    TESSERA_CHECK(counts_of(d, sz));
    const size_t need = workspace_bytes(sz);
    if (workspace && workspace_bytes_given < need)
      return detail::fail(Status::invalid_argument,
                          "workspace_bytes = %zu is below tessera_mha_workspace_size = %zu",
                          workspace_bytes_given, need);
    TESSERA_CHECK(check_aliasing(d, sz, x_q, x_kv, out, workspace, workspace_bytes_given));
    // No queries: nothing to compute, but new keys and values still go into a cache.
    if (d.batch == 0 || (d.q_len == 0 && (d.k_cache == nullptr || d.kv_len == 0)))
      return Status::ok;

    if (!workspace) {  // the calling thread's scratch (nested calls use the next depth's)
      workspace = detail::thread_scratch(detail::ScratchSlot::layer).floats((need + 3) / 4);
      if (!workspace)
        return detail::fail(Status::out_of_memory, "workspace: cannot allocate %zu bytes", need);
    }
    const detail::Verbose vb;
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
    void* save_k = carve(sz.save_k);
    void* save_v = carve(sz.save_v);

    const int64_t B = d.batch, Lq = d.q_len, Lkv = d.kv_len, D = d.head_dim, Dv = d.value_dim;
    const int64_t Hq = d.q_heads, Hk = d.kv_heads;
    const bool cached = d.k_cache != nullptr;
    const DType wt = weight_type(d), ct = cached ? cache_type(d) : DType::f32;
    Status s =
        linear(B * Lq, d.q_in_dim, Hq * D, x_q, d.q_in_dim, wt, d.w_q, Hq * D, d.b_q, qp, Hq * D);
    // K and V of the new tokens, [batch][kv_len][kv head][dim]: one product each.
    if (s == Status::ok)
      s = linear(B * Lkv, d.kv_in_dim, Hk * D, x_kv, d.kv_in_dim, wt, d.w_k, Hk * D, d.b_k, kp,
                 Hk * D);
    if (s == Status::ok)
      s = linear(B * Lkv, d.kv_in_dim, Hk * Dv, x_kv, d.kv_in_dim, wt, d.w_v, Hk * Dv, d.b_v, vp,
                 Hk * Dv);

    AttentionDesc a{};
    if (s == Status::ok)
      s = attention_desc_init(a, B, Hq, Hk, Lq, cached ? d.cache_len + Lkv : Lkv, D, Dv);
    // Queries and outputs are [batch][seq][head][dim] rows of the projection GEMMs.
    a.q_stride[0] = Lq * Hq * D, a.q_stride[1] = D, a.q_stride[2] = Hq * D;
    a.o_stride[0] = Lq * Hq * Dv, a.o_stride[1] = Dv, a.o_stride[2] = Hq * Dv;
    const void *keys = kp, *values = vp;
    const int64_t cap = d.cache_capacity;
    // The cache rows of (batch, kv head) bh this call writes, [cache_len, cache_len + kv_len),
    // and a copy of them: put back if a later step fails, so that a failed call leaves the cache
    // as it found it.
    auto new_rows = [&](bool v_side, int64_t bh) {
      const int64_t dim = v_side ? Dv : D;
      return at(v_side ? d.v_cache : d.k_cache, ct, (bh * cap + d.cache_len) * dim);
    };
    auto copy_rows = [&](bool save) {
      for (int64_t bh = 0; bh < B * Hk; ++bh) {
        for (const bool v_side : {false, true}) {
          const int64_t n = Lkv * (v_side ? Dv : D);
          void* saved = at(v_side ? save_v : save_k, ct, bh * n);
          const size_t bytes = size_t(n) * detail::dtype_bytes(ct);
          if (save)
            std::memcpy(saved, new_rows(v_side, bh), bytes);
          else
            std::memcpy(new_rows(v_side, bh), saved, bytes);
        }
      }
    };
    const bool saved = cached && s == Status::ok;
    if (saved) copy_rows(true);
    if (saved) {
      // The new rows into the cache, [b][hk][cache_len + t][dim], rounded to its type.
      for (int64_t b = 0; b < B && s == Status::ok; ++b)
        for (int64_t hk = 0; hk < Hk && s == Status::ok; ++hk)
          for (int64_t t = 0; t < Lkv && s == Status::ok; ++t) {
            const int64_t row = (b * Lkv + t) * Hk + hk;
            s = convert(DType::f32, ct, D, kp + row * D,
                        at(new_rows(false, b * Hk + hk), ct, t * D));
            if (s == Status::ok)
              s = convert(DType::f32, ct, Dv, vp + row * Dv,
                          at(new_rows(true, b * Hk + hk), ct, t * Dv));
          }
      a.k_stride[0] = Hk * cap * D, a.k_stride[1] = cap * D, a.k_stride[2] = D;
      a.v_stride[0] = Hk * cap * Dv, a.v_stride[1] = cap * Dv, a.v_stride[2] = Dv;
      a.k_type = a.v_type = tessera_dtype(ct);
      keys = d.k_cache;
      values = d.v_cache;
    } else {
      a.k_stride[0] = Lkv * Hk * D, a.k_stride[1] = D, a.k_stride[2] = Hk * D;
      a.v_stride[0] = Lkv * Hk * Dv, a.v_stride[1] = Dv, a.v_stride[2] = Hk * Dv;
    }
    a.scale = d.scale;
    a.causal = d.causal;
    // The queries are the newest positions: with q_len == kv_len this is the usual top-left
    // causal mask, with a cache it is the decoding convention.
    a.align = TESSERA_ALIGN_BOTTOM_RIGHT;
    a.window_left = d.window_left;
    a.window_right = d.window_right;
    if (s == Status::ok) s = attention(a, qp, keys, values, op);
    // out is written last, by one product that fails with nothing written, then its bias.
    if (s == Status::ok)
      s = linear(B * Lq, Hq * Dv, d.out_dim, op, Hq * Dv, wt, d.w_o, d.out_dim, nullptr, out,
                 d.out_dim);
    if (s == Status::ok && d.b_o)
      for (int64_t r = 0; r < B * Lq; ++r)
        for (int64_t j = 0; j < d.out_dim; ++j) out[r * d.out_dim + j] += d.b_o[j];
    if (saved && s != Status::ok) copy_rows(false);
    vb.print("mha_forward", s, cached ? "cache-append" : "no-cache",
             "sgemm+attention (lines above)", tbb::this_task_arena::max_concurrency(),
             "batch:%lld q:%lld kv:%lld cache:%lld heads:%lld/%lld d:%lld dv:%lld causal:%d "
             "weights:%s cache:%s",
             (long long)B, (long long)Lq, (long long)Lkv, cached ? (long long)d.cache_len : 0LL,
             (long long)Hq, (long long)Hk, (long long)D, (long long)Dv, int(d.causal),
             detail::dtype_name(wt), detail::dtype_name(ct));
    return s;
  });
}

}  // namespace tessera
