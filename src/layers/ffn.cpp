// The prepared feed-forward layer: gate and up packed as one linear layer of 2 hidden outputs
// (one pass over the input rows), the activation over its halves in place, then down.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "layers/norm.hpp"
#include "runtime/check.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/threading.hpp"
#include "tessera/layers.hpp"

namespace tessera {
namespace {

using detail::fail;

Status check_desc(const FfnDesc& d) {
  TESSERA_CHECK(detail::check_positive("desc->dim", d.dim));
  TESSERA_CHECK(detail::check_positive("desc->hidden", d.hidden));
  if (d.activation != TESSERA_ACT_SILU && d.activation != TESSERA_ACT_GELU_TANH)
    return fail(Status::invalid_argument,
                "desc->activation = %d is not TESSERA_ACT_SILU or TESSERA_ACT_GELU_TANH",
                int(d.activation));
  if (d.gated != 0 && d.gated != 1)
    return fail(Status::invalid_argument, "desc->gated = %d must be 0 or 1", d.gated);
  const DType t = DType(d.weight_type);
  TESSERA_CHECK(detail::check_storage_type("desc->weight_type", t));
  TESSERA_CHECK(detail::check_blocks("desc->dim", d.dim, t));
  TESSERA_CHECK(detail::check_blocks("desc->hidden", d.hidden, t));
  TESSERA_CHECK(detail::check_ptr("desc->w_gate", d.w_gate, d.gated != 0));
  TESSERA_CHECK(detail::check_ptr("desc->w_up", d.w_up, true));
  TESSERA_CHECK(detail::check_ptr("desc->w_down", d.w_down, true));
  int64_t values = 0;
  return detail::checked_count("desc->hidden", {2, d.dim, d.hidden}, values);
}

}  // namespace

Ffn::Ffn(Ffn&& o) noexcept
    : gate_up_(std::move(o.gate_up_)),
      down_(std::move(o.down_)),
      dim_(o.dim_),
      hidden_(o.hidden_),
      act_(o.act_),
      gated_(o.gated_) {}

Ffn& Ffn::operator=(Ffn&& o) noexcept {
  gate_up_ = std::move(o.gate_up_), down_ = std::move(o.down_);
  dim_ = o.dim_, hidden_ = o.hidden_, act_ = o.act_, gated_ = o.gated_;
  return *this;
}

Status Ffn::init(const FfnDesc& d) {
  return detail::in_arena([&] {
    TESSERA_CHECK(check_desc(d));
    const DType t = DType(d.weight_type);
    const int64_t h = d.hidden, width = d.gated ? 2 * h : h;
    // [W_gate; W_up] as one weight of `width` rows (and their biases, a missing one zeros).
    std::vector<char> weight;
    std::vector<float> bias;
    const void* w = d.w_up;
    if (d.gated) {
      const size_t half = size_t(detail::storage_bytes(t, h * d.dim));
      weight.resize(2 * half);
      std::memcpy(weight.data(), d.w_gate, half);
      std::memcpy(weight.data() + half, d.w_up, half);
      w = weight.data();
    }
    const float* b = d.b_up;
    if (d.gated && (d.b_gate || d.b_up)) {
      bias.assign(size_t(width), 0.0f);
      if (d.b_gate) std::memcpy(bias.data(), d.b_gate, size_t(h) * sizeof(float));
      if (d.b_up) std::memcpy(bias.data() + h, d.b_up, size_t(h) * sizeof(float));
      b = bias.data();
    }
    Linear gate_up, down;
    TESSERA_CHECK(gate_up.init({d.dim, width, d.weight_type, w, b}));
    TESSERA_CHECK(down.init({h, d.dim, d.weight_type, d.w_down, d.b_down}));
    gate_up_ = std::move(gate_up), down_ = std::move(down);
    dim_ = d.dim, hidden_ = h, act_ = d.activation, gated_ = d.gated != 0;
    return Status::ok;
  });
}

size_t Ffn::workspace_size(int64_t rows) const {
  int64_t floats = 0;
  if (!ready() || rows < 0 || !detail::mul_ok(rows, gated_ ? 2 * hidden_ : hidden_, floats) ||
      floats > int64_t(PTRDIFF_MAX / 8)) {
    fail(Status::invalid_argument,
         ready() ? "rows = %lld is out of range" : "ffn is not initialised", (long long)rows);
    return 0;
  }
  return size_t(floats) * sizeof(float);
}

Status Ffn::forward(int64_t rows, const float* x, int64_t ldx, float beta, float* y, int64_t ldy,
                    void* workspace, size_t workspace_bytes) const {
  return detail::in_arena([&] {
    if (!ready()) return fail(Status::invalid_argument, "ffn is not initialised");
    TESSERA_CHECK(detail::check_nonneg("rows", rows));
    const size_t need = workspace_size(rows);
    if (need == 0 && rows > 0) return Status::invalid_argument;  // (named by workspace_size)
    if (workspace && workspace_bytes < need)
      return fail(Status::invalid_argument, "workspace_bytes = %zu is below the %zu needed",
                  workspace_bytes, need);
    if (workspace && reinterpret_cast<uintptr_t>(workspace) % 64 != 0)
      return fail(Status::invalid_argument, "workspace is not 64-byte aligned");
    int64_t sx = 0, sy = 0;
    TESSERA_CHECK(detail::check_ld("ldx", ldx, dim_));
    TESSERA_CHECK(detail::check_ld("ldy", ldy, dim_));
    TESSERA_CHECK(detail::check_ptr("x", x, rows > 0));
    TESSERA_CHECK(detail::check_ptr("y", y, rows > 0));
    TESSERA_CHECK(detail::check_finite("beta", beta));
    TESSERA_CHECK(detail::matrix_span("x", rows, dim_, ldx, sx));
    TESSERA_CHECK(detail::matrix_span("y", rows, dim_, ldy, sy));
    TESSERA_CHECK(detail::check_disjoint(
        detail::region("y", y, sy, 4),
        {detail::region("x", x, sx, 4), detail::region("workspace", workspace, int64_t(need), 1)}));
    if (rows == 0) return Status::ok;
    void* own = workspace ? nullptr : std::aligned_alloc(64, (need + 63) / 64 * 64);
    if (!workspace && !own)
      return fail(Status::out_of_memory, "ffn: cannot allocate %zu bytes", need);
    float* ws = static_cast<float*>(workspace ? workspace : own);
    const int64_t h = hidden_, width = gated_ ? 2 * h : h;
    Status s = gate_up_.forward(rows, x, ldx, 0.0f, ws, width);
    if (s == Status::ok)
      detail::glu_rows(act_, rows, h, ws, width, gated_ ? ws + h : nullptr, width, ws, width);
    if (s == Status::ok) s = down_.forward(rows, ws, width, beta, y, ldy);
    std::free(own);
    return s;
  });
}

}  // namespace tessera
