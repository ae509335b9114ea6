// The prepared multi-head attention layer: weights packed once, calls run by mha_run.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "layers/mha.hpp"
#include "runtime/arith.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/scratch.hpp"
#include "tessera/gemm.hpp"

namespace tessera {

// One block (LongLived: huge pages from 2 MB) holding the packed weights and biases.
struct MhaLayer::Impl {
  MhaDesc dims{};               // the layer fields of the desc it was created from
  const char* table = nullptr;  // the kernel table its weights were packed for
  detail::MhaWeights w;
  detail::LongLived block;
};

namespace {

// Fields a call must share with the layer, named for the message.
Status check_same_dims(const MhaDesc& layer, const MhaDesc& call) {
  const struct {
    const char* name;
    int64_t have, want;
  } fields[] = {{"desc->q_in_dim", call.q_in_dim, layer.q_in_dim},
                {"desc->kv_in_dim", call.kv_in_dim, layer.kv_in_dim},
                {"desc->out_dim", call.out_dim, layer.out_dim},
                {"desc->q_heads", call.q_heads, layer.q_heads},
                {"desc->kv_heads", call.kv_heads, layer.kv_heads},
                {"desc->head_dim", call.head_dim, layer.head_dim},
                {"desc->value_dim", call.value_dim, layer.value_dim}};
  for (const auto& f : fields)
    if (f.have != f.want)
      return detail::fail(Status::invalid_argument, "%s = %lld differs from the layer's %lld",
                          f.name, (long long)f.have, (long long)f.want);
  return Status::ok;
}

// A float32 matrix (in x cols, x W) as block-type rows (cols x in, blocks along in) for
// sgemm_pack_bq: its transpose quantized by the table's kernels (tessera_convert's rounding),
// 16 columns gathered at a time so that W is read a line at a time.
class QuantizedWeights {
 public:
  QuantizedWeights() = default;
  QuantizedWeights(const QuantizedWeights&) = delete;
  QuantizedWeights& operator=(const QuantizedWeights&) = delete;
  ~QuantizedWeights() { std::free(blocks_); }
  Status make(DType t, int64_t in, int64_t cols, const float* w) {
    constexpr int64_t kCols = 16;
    const auto quantize = detail::active_table().quant.quantize[detail::block_index(t)];
    blocks_ = static_cast<uint8_t*>(std::malloc(size_t(detail::storage_bytes(t, in * cols))));
    auto* rows = static_cast<float*>(std::malloc(size_t(kCols * in) * sizeof(float)));
    if (!blocks_ || !rows) {
      std::free(rows);
      return detail::fail(Status::out_of_memory, "layer: cannot allocate the quantized weights");
    }
    for (int64_t c0 = 0; c0 < cols; c0 += kCols) {
      const int64_t n = std::min(kCols, cols - c0);
      for (int64_t p = 0; p < in; ++p)
        for (int64_t c = 0; c < n; ++c) rows[c * in + p] = w[p * cols + c0 + c];
      for (int64_t c = 0; c < n; ++c)
        quantize(in, rows + c * in, blocks_ + detail::storage_bytes(t, (c0 + c) * in));
    }
    std::free(rows);
    return Status::ok;
  }
  const void* data() const { return blocks_; }

 private:
  uint8_t* blocks_ = nullptr;
};

// The desc the checks see: the call's, with no weights (the layer holds them) of its type.
MhaDesc call_desc(const MhaDesc& call, DType weights) {
  MhaDesc d = call;
  d.weight_type = tessera_dtype(weights);
  d.w_q = d.w_k = d.w_v = d.w_o = nullptr;
  d.b_q = d.b_k = d.b_v = d.b_o = nullptr;
  return d;
}

}  // namespace

MhaLayer& MhaLayer::operator=(MhaLayer&& o) noexcept {
  if (this != &o) {
    delete impl_;
    impl_ = o.impl_;
    o.impl_ = nullptr;
  }
  return *this;
}

MhaLayer::~MhaLayer() { delete impl_; }

Status MhaLayer::init(const MhaDesc& desc) {
  // The checks of a call with no tokens: the layer's fields and the weight pointers.
  MhaDesc d{};
  d.q_in_dim = desc.q_in_dim, d.kv_in_dim = desc.kv_in_dim, d.out_dim = desc.out_dim;
  d.q_heads = desc.q_heads, d.kv_heads = desc.kv_heads;
  d.head_dim = desc.head_dim, d.value_dim = desc.value_dim;
  d.w_q = desc.w_q, d.w_k = desc.w_k, d.w_v = desc.w_v, d.w_o = desc.w_o;
  d.b_q = desc.b_q, d.b_k = desc.b_k, d.b_v = desc.b_v, d.b_o = desc.b_o;
  d.weight_type = desc.weight_type;
  d.window_left = d.window_right = -1;
  detail::MhaCounts c;
  TESSERA_CHECK(detail::check_mha(d, true, c));
  const DType pt = DType(desc.prepared_weight_type);
  if (pt != DType::f32) {  // float32 weights quantized here: checked as block weights would be
    if (!detail::is_block(pt) || d.weight_type != TESSERA_F32)
      return detail::fail(Status::invalid_argument,
                          "desc->prepared_weight_type = %d must be TESSERA_F32, or TESSERA_Q8_0 "
                          "or TESSERA_Q4_0 with float32 weights",
                          int(pt));
    MhaDesc b = d;
    b.weight_type = tessera_dtype(pt);
    TESSERA_CHECK(detail::check_mha(b, true, c));
  }
  const DType wt = pt != DType::f32 ? pt : DType(d.weight_type);
  const auto nt = Transpose::no_trans;
  // Each matrix (in x cols) packed for the active table: float32 panels, or 16-bit panels kept
  // in their type (a decode step reads half the bytes; prefill widens them a block at a time).
  struct Part {
    const void* src;
    int64_t in, cols;
    detail::MhaMatrix* dst;
    size_t bytes;
  };
  auto* impl = new (std::nothrow) Impl;
  if (!impl) return detail::fail(Status::out_of_memory, "layer: cannot allocate");
  Part parts[4] = {{d.w_q, d.q_in_dim, c.qd, &impl->w.q, 0},
                   {d.w_k, d.kv_in_dim, c.kd, &impl->w.k, 0},
                   {d.w_v, d.kv_in_dim, c.vd, &impl->w.v, 0},
                   {d.w_o, d.q_heads * d.value_dim, d.out_dim, &impl->w.o, 0}};
  size_t total = 0;
  for (Part& p : parts) {
    p.bytes = wt == DType::f32       ? sgemm_pack_b_size(nt, p.in, p.cols)
              : detail::is_block(wt) ? sgemm_pack_bq_size(Transpose::trans, p.in, p.cols, wt)
                                     : sgemm_pack_b16_size(nt, p.in, p.cols);
    if (p.bytes == 0) {
      delete impl;
      return detail::fail(Status::invalid_argument, "desc: a weight matrix cannot be packed");
    }
    total += detail::round_up_lines(p.bytes);
  }
  const float* biases[4] = {d.b_q, d.b_k, d.b_v, d.b_o};
  const int64_t bias_len[4] = {c.qd, c.kd, c.vd, d.out_dim};
  for (int i = 0; i < 4; ++i)
    if (biases[i]) total += detail::round_up_lines(size_t(bias_len[i]) * sizeof(float));
  if (!impl->block.allocate(detail::round_up_lines(total))) {
    delete impl;
    return detail::fail(Status::out_of_memory, "layer: cannot allocate %zu bytes", total);
  }
  char* next = static_cast<char*>(impl->block.data());
  for (Part& p : parts) {
    *p.dst = {next, wt, true};
    QuantizedWeights quantized;  // float32 in x out -> blocks out x in
    if (pt != DType::f32) {
      const Status q = quantized.make(pt, p.in, p.cols, static_cast<const float*>(p.src));
      if (q != Status::ok) {
        delete impl;
        return q;
      }
      p.src = quantized.data();
    }
    const Status s =
        wt == DType::f32 ? sgemm_pack_b(nt, p.in, p.cols, static_cast<const float*>(p.src), p.cols,
                                        next, p.bytes)
        : detail::is_block(wt)
            ? sgemm_pack_bq(Transpose::trans, p.in, p.cols, wt, p.src, p.in, next, p.bytes)
            : sgemm_pack_b16(nt, p.in, p.cols, wt, p.src, p.cols, next, p.bytes);
    if (s != Status::ok) {
      delete impl;
      return s;
    }
    next += detail::round_up_lines(p.bytes);
  }
  const float** bias_dst[4] = {&impl->w.b_q, &impl->w.b_k, &impl->w.b_v, &impl->w.b_o};
  for (int i = 0; i < 4; ++i) {
    if (!biases[i]) continue;
    std::memcpy(next, biases[i], size_t(bias_len[i]) * sizeof(float));
    // cppcheck-suppress invalidPointerCast
    *bias_dst[i] = reinterpret_cast<const float*>(next);
    next += detail::round_up_lines(size_t(bias_len[i]) * sizeof(float));
  }
  impl->dims = call_desc(d, wt);
  impl->table = detail::active_table().name;
  delete impl_;
  impl_ = impl;
  return Status::ok;
}

Status MhaLayer::workspace_size(const MhaDesc& desc, size_t& bytes) const {
  if (!impl_) return detail::fail(Status::invalid_argument, "layer is not initialised");
  TESSERA_CHECK(check_same_dims(impl_->dims, desc));
  detail::MhaCounts c;
  TESSERA_CHECK(detail::check_mha(call_desc(desc, impl_->w.q.type), false, c));
  bytes = detail::mha_workspace_bytes(c);
  return Status::ok;
}

Status MhaLayer::forward(const MhaDesc& desc, const float* x_q, const float* x_k, const float* x_v,
                         float* out, void* workspace, size_t workspace_bytes) const {
  if (!impl_) return detail::fail(Status::invalid_argument, "layer is not initialised");
  TESSERA_CHECK(check_same_dims(impl_->dims, desc));
  if (std::strcmp(detail::active_table().name, impl_->table) != 0)
    return detail::fail(Status::invalid_argument,
                        "layer was packed for kernel table \"%s\" but \"%s\" is active: "
                        "create it again",
                        impl_->table, detail::active_table().name);
  return detail::mha_call("mha_layer_forward", impl_->w, call_desc(desc, impl_->w.q.type), false,
                          x_q, x_k, x_v, out, workspace, workspace_bytes);
}

}  // namespace tessera
