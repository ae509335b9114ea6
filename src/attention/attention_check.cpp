#include "attention/attention_check.hpp"

#include "runtime/arith.hpp"

namespace tessera::detail {
namespace {

Status check_strides(const char* name, const int64_t* strides, int count) {
  for (int i = 0; i < count; ++i) {
    if (strides[i] < 0)
      return fail(Status::invalid_argument, "%s[%d] = %lld must be >= 0", name, i,
                  (long long)strides[i]);
  }
  return Status::ok;
}

// The Hadamard rotation: 0 or a power of two dividing head_dim (and value_dim for V).
Status check_rotation(const tessera_attention_desc& d) {
  if (d.hadamard != 0 &&
      (d.hadamard < 1 || (d.hadamard & (d.hadamard - 1)) != 0 || d.head_dim % d.hadamard != 0))
    return fail(Status::invalid_argument,
                "desc->hadamard = %lld must be 0 or a power of two dividing head_dim = %lld",
                (long long)d.hadamard, (long long)d.head_dim);
  if (d.hadamard_v != 0 && d.hadamard_v != 1)
    return fail(Status::invalid_argument, "desc->hadamard_v = %d must be 0 or 1", d.hadamard_v);
  if (d.hadamard_v == 1 && (d.hadamard == 0 || d.value_dim % d.hadamard != 0))
    return fail(Status::invalid_argument,
                "desc->hadamard_v = 1 needs hadamard = %lld to divide value_dim = %lld",
                (long long)d.hadamard, (long long)d.value_dim);
  return Status::ok;
}

// The block table's sizes, then each entry a batch reads (its valid keys' pages).
Status check_pages(const tessera_attention_desc& d) {
  if (!d.block_table) return Status::ok;
  TESSERA_CHECK(check_page_pool(d.page_size, d.num_pages));
  if (d.block_table_stride < ceil_div(d.kv_len, d.page_size))
    return fail(Status::invalid_argument,
                "desc->block_table_stride = %lld is under ceil(kv_len / page_size) = %lld",
                (long long)d.block_table_stride, (long long)ceil_div(d.kv_len, d.page_size));
  return Status::ok;
}

Status check_table_entries(const tessera_attention_desc& d) {
  for (int64_t b = 0; d.block_table && b < d.batch; ++b) {
    const int64_t pages = ceil_div(d.kv_lens ? d.kv_lens[b] : d.kv_len, d.page_size);
    for (int64_t i = 0; i < pages; ++i) {
      const int64_t at = b * d.block_table_stride + i;
      const int32_t e = d.block_table[at];
      if (e < 0 || e >= d.num_pages)
        return fail(Status::invalid_argument,
                    "desc->block_table[%lld] = %d (batch %lld, page %lld) is outside [0, "
                    "num_pages = %lld)",
                    (long long)at, e, (long long)b, (long long)i, (long long)d.num_pages);
    }
  }
  return Status::ok;
}

}  // namespace

Status check_page_pool(int64_t page_size, int64_t num_pages) {
  if (page_size < 16 || page_size % 16 != 0)
    return fail(Status::invalid_argument,
                "desc->page_size = %lld must be a positive multiple of 16", (long long)page_size);
  TESSERA_CHECK(check_nonneg("desc->num_pages", num_pages));
  if (num_pages > INT32_MAX)
    return fail(Status::invalid_argument, "desc->num_pages = %lld must fit the int32 table",
                (long long)num_pages);
  return Status::ok;
}

// The elements each tensor of the call spans (0 for one that is not read or written).
struct Spans {
  int64_t q = 0, k = 0, v = 0, o = 0, bias = 0, mask = 0, lse = 0, table = 0;
};

Status spans_of(const tessera_attention_desc& d, Spans& s) {
  const bool queries = d.batch > 0 && d.q_len > 0 && d.q_heads > 0;
  const int64_t rows = queries ? d.batch : 0;  // nothing is read without queries
  auto span = [&](const char* name, const int64_t* st, int64_t heads, int64_t len, int64_t dim,
                  size_t bytes, int64_t& out) {
    const int64_t strides[4] = {st[0], st[1], st[2], 1}, extents[4] = {rows, heads, len, dim};
    return tensor_span(name, strides, extents, 4, bytes, out);
  };
  // A block type's span is counted in values (its bytes: storage_bytes), as its strides are.
  const DType kt = DType(d.k_type), vt = DType(d.v_type);
  const size_t kb = is_block(kt) ? 2 : dtype_bytes(kt), vb = is_block(vt) ? 2 : dtype_bytes(vt);
  TESSERA_CHECK(span("q", d.q_stride, d.q_heads, d.q_len, d.head_dim, 4, s.q));
  // Paged: k and v are pools of num_pages pages (none read without queries).
  const int64_t kv_rows = d.block_table ? (queries ? d.num_pages : 0) : rows;
  const int64_t kv_len = d.block_table ? d.page_size : d.kv_len;
  auto kv_span = [&](const char* name, const int64_t* st, int64_t dim, size_t bytes, int64_t& out) {
    const int64_t strides[4] = {st[0], st[1], st[2], 1},
                  extents[4] = {kv_rows, d.kv_heads, kv_len, dim};
    return tensor_span(name, strides, extents, 4, bytes, out);
  };
  TESSERA_CHECK(kv_span("k", d.k_stride, d.head_dim, kb, s.k));
  TESSERA_CHECK(kv_span("v", d.v_stride, d.value_dim, vb, s.v));
  if (d.block_table && queries)
    s.table = (d.batch - 1) * d.block_table_stride + ceil_div(d.kv_len, d.page_size);
  TESSERA_CHECK(span("o", d.o_stride, d.q_heads, d.q_len, d.value_dim, 4, s.o));
  const int64_t score_extents[4] = {rows, d.q_heads, d.q_len, d.kv_len};
  if (d.bias)
    TESSERA_CHECK(
        tensor_span("desc->bias", d.bias_stride, score_extents, 4, sizeof(float), s.bias));
  if (d.mask) TESSERA_CHECK(tensor_span("desc->mask", d.mask_stride, score_extents, 4, 1, s.mask));
  if (d.lse) {
    int64_t per_batch;
    if (!mul_ok(d.q_heads, d.q_len, per_batch))
      return fail(Status::invalid_argument, "desc->lse: the sizes overflow 64 bits");
    const int64_t strides[3] = {per_batch, d.q_len, 1}, extents[3] = {rows, d.q_heads, d.q_len};
    TESSERA_CHECK(tensor_span("desc->lse", strides, extents, 3, sizeof(float), s.lse));
  }
  return Status::ok;
}

// One value per query head (if given): finite, or -inf where that is allowed (no sink).
Status check_per_head(const char* name, const float* x, int64_t heads, bool minus_inf) {
  for (int64_t h = 0; x && h < heads; ++h)
    if (!std::isfinite(x[h]) && !(minus_inf && x[h] == -INFINITY))
      return fail(Status::invalid_argument, "%s[%lld] = %g must be finite%s", name, (long long)h,
                  double(x[h]), minus_inf ? " or -inf" : "");
  return Status::ok;
}

Status check_attention(const tessera_attention_desc& d, const float* q, const void* k,
                       const void* v, const float* o, bool tensors) {
  TESSERA_CHECK(check_nonneg("desc->batch", d.batch));
  TESSERA_CHECK(check_nonneg("desc->q_heads", d.q_heads));
  TESSERA_CHECK(check_nonneg("desc->kv_heads", d.kv_heads));
  TESSERA_CHECK(check_nonneg("desc->q_len", d.q_len));
  TESSERA_CHECK(check_nonneg("desc->kv_len", d.kv_len));
  TESSERA_CHECK(check_positive("desc->head_dim", d.head_dim));
  TESSERA_CHECK(check_positive("desc->value_dim", d.value_dim));
  if (d.kv_heads == 0 && d.q_heads > 0)
    return fail(Status::invalid_argument, "desc->kv_heads = 0 but q_heads = %lld",
                (long long)d.q_heads);
  if (d.kv_heads > 0 && d.q_heads % d.kv_heads != 0)
    return fail(Status::invalid_argument,
                "desc->q_heads = %lld is not a multiple of kv_heads = %lld", (long long)d.q_heads,
                (long long)d.kv_heads);
  TESSERA_CHECK(check_finite("desc->scale", d.scale));
  TESSERA_CHECK(check_storage_type("desc->k_type", DType(d.k_type)));
  TESSERA_CHECK(check_storage_type("desc->v_type", DType(d.v_type)));
  // A quantized K or V is read a block of 32 values at a time along its rows.
  TESSERA_CHECK(check_blocks("desc->head_dim", d.head_dim, DType(d.k_type)));
  TESSERA_CHECK(check_blocks("desc->value_dim", d.value_dim, DType(d.v_type)));
  for (int i = 0; i < 3; ++i) {
    static const char* const k_names[] = {"desc->k_stride[0]", "desc->k_stride[1]",
                                          "desc->k_stride[2]"};
    static const char* const v_names[] = {"desc->v_stride[0]", "desc->v_stride[1]",
                                          "desc->v_stride[2]"};
    TESSERA_CHECK(check_blocks(k_names[i], d.k_stride[i], DType(d.k_type)));
    TESSERA_CHECK(check_blocks(v_names[i], d.v_stride[i], DType(d.v_type)));
  }
  TESSERA_CHECK(check_strides("desc->q_stride", d.q_stride, 3));
  TESSERA_CHECK(check_strides("desc->k_stride", d.k_stride, 3));
  TESSERA_CHECK(check_strides("desc->v_stride", d.v_stride, 3));
  TESSERA_CHECK(check_strides("desc->o_stride", d.o_stride, 3));
  const int64_t o_strides[4] = {d.o_stride[0], d.o_stride[1], d.o_stride[2], 1};
  const int64_t o_extents[4] = {d.batch, d.q_heads, d.q_len, d.value_dim};
  TESSERA_CHECK(check_no_self_overlap("desc->o_stride", o_strides, o_extents, 4));
  if (d.causal != 0 && d.causal != 1)
    return fail(Status::invalid_argument, "desc->causal = %d must be 0 or 1", d.causal);
  if (d.align != TESSERA_ALIGN_TOP_LEFT && d.align != TESSERA_ALIGN_BOTTOM_RIGHT)
    return fail(Status::invalid_argument, "desc->align = %d is not a tessera_align",
                static_cast<int>(d.align));
  if (d.window_left < -1)
    return fail(Status::invalid_argument, "desc->window_left = %lld must be >= -1",
                (long long)d.window_left);
  if (d.window_right < -1)
    return fail(Status::invalid_argument, "desc->window_right = %lld must be >= -1",
                (long long)d.window_right);
  if (!(d.softcap >= 0.0f) || !std::isfinite(d.softcap))
    return fail(Status::invalid_argument, "desc->softcap = %g must be finite and >= 0", d.softcap);
  TESSERA_CHECK(check_rotation(d));
  if (d.bias) TESSERA_CHECK(check_strides("desc->bias_stride", d.bias_stride, 4));
  if (d.mask) TESSERA_CHECK(check_strides("desc->mask_stride", d.mask_stride, 4));
  if (d.kv_lens) {
    for (int64_t b = 0; b < d.batch; ++b) {
      if (d.kv_lens[b] < 0 || d.kv_lens[b] > d.kv_len)
        return fail(Status::invalid_argument,
                    "desc->kv_lens[%lld] = %d is outside [0, kv_len = %lld]", (long long)b,
                    d.kv_lens[b], (long long)d.kv_len);
    }
  }
  TESSERA_CHECK(check_pages(d));
  TESSERA_CHECK(check_per_head("desc->alibi_slopes", d.alibi_slopes, d.q_heads, false));
  TESSERA_CHECK(check_per_head("desc->sinks", d.sinks, d.q_heads, true));
  Spans s;
  TESSERA_CHECK(spans_of(d, s));
  if (!tensors) return Status::ok;
  const bool queries = s.o > 0;
  TESSERA_CHECK(check_ptr("q", q, queries));
  TESSERA_CHECK(check_ptr("k", k, s.k > 0));
  TESSERA_CHECK(check_ptr("v", v, s.v > 0));
  TESSERA_CHECK(check_ptr("o", o, queries));
  const int64_t rows = queries ? d.batch : 0;
  const Region inputs[] = {region("q", q, s.q, 4),
                           region("k", k, storage_bytes(DType(d.k_type), s.k), 1),
                           region("v", v, storage_bytes(DType(d.v_type), s.v), 1),
                           region("desc->bias", d.bias, s.bias, 4),
                           region("desc->mask", d.mask, s.mask, 1),
                           region("desc->kv_lens", d.kv_lens, rows, sizeof(int32_t)),
                           region("desc->alibi_slopes", d.alibi_slopes, queries ? d.q_heads : 0, 4),
                           region("desc->sinks", d.sinks, queries ? d.q_heads : 0, 4),
                           region("desc->block_table", d.block_table, s.table, sizeof(int32_t))};
  if (queries) TESSERA_CHECK(check_table_entries(d));
  const Region lse = region("desc->lse", d.lse, s.lse, 4);
  const Region out = region("o", o, s.o, 4);
  for (const Region& in : inputs) TESSERA_CHECK(check_disjoint(out, {in, lse}));
  for (const Region& in : inputs) TESSERA_CHECK(check_disjoint(lse, {in}));
  return Status::ok;
}

}  // namespace tessera::detail
