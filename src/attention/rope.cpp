// Rotary position embeddings: the frequencies once per call (double), then per token the
// table's angles kernel (cosines and sines in double, rounded to float) and its rotation over
// every head that token has, so that a position's sines are computed once, not per head.
#include "attention/rope.hpp"

#include <tbb/parallel_for.h>

#include <cmath>
#include <cstring>

#include "runtime/check.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/threading.hpp"

namespace tessera::detail {
namespace {

constexpr int64_t kMaxHalf = 512;  // rot_dim <= 1024
constexpr int64_t kTokensPerTask = 16;

}  // namespace

Status check_rope(const char* prefix, const tessera_rope_desc& r, int64_t head_dim) {
  // Read as the int a C caller may have stored: an enum lvalue outside the enumerators' range
  // is undefined behaviour in C++.
  static_assert(sizeof(r.style) == sizeof(int), "a C enum is an int here");
  int style;
  std::memcpy(&style, &r.style, sizeof style);
  if (style != TESSERA_ROPE_NONE && style != TESSERA_ROPE_NEOX && style != TESSERA_ROPE_GPTJ)
    return fail(
        Status::invalid_argument,
        "%srope.style = %d is not TESSERA_ROPE_NONE, TESSERA_ROPE_NEOX or TESSERA_ROPE_GPTJ",
        prefix, style);
  if (r.style == TESSERA_ROPE_NONE) return Status::ok;  // the other fields are not read
  const int64_t rot = r.rot_dim ? r.rot_dim : head_dim;
  if (rot < 2 || rot % 2 != 0 || rot > head_dim || rot > 2 * kMaxHalf)
    return fail(Status::invalid_argument,
                "%srope.rot_dim = %lld must be 0 or even, in [2, head_dim = %lld] and <= %lld",
                prefix, (long long)r.rot_dim, (long long)head_dim, 2LL * kMaxHalf);
  if (!(std::isfinite(r.theta) && r.theta >= 0.0f) || (r.theta != 0.0f && r.theta <= 1.0f))
    return fail(Status::invalid_argument, "%srope.theta = %g must be 0 or finite and > 1", prefix,
                double(r.theta));
  if (!(std::isfinite(r.position_scale) && r.position_scale >= 0.0f))
    return fail(Status::invalid_argument, "%srope.position_scale = %g must be finite and >= 0",
                prefix, double(r.position_scale));
  return Status::ok;
}

template <class Pos>
void rope_tokens(const tessera_rope_desc& r, int64_t head_dim, int64_t tokens, const Pos& pos,
                 RopeRows a, RopeRows b) {
  const int64_t rot = r.rot_dim ? r.rot_dim : head_dim, half = rot / 2;
  const double theta = r.theta != 0.0f ? r.theta : 10000.0;
  const double scale = r.position_scale != 0.0f ? r.position_scale : 1.0;
  double freq[kMaxHalf];
  for (int64_t m = 0; m < half; ++m)
    freq[m] = scale * std::pow(theta, -2.0 * double(m) / double(rot));
  const int style = r.style == TESSERA_ROPE_GPTJ ? 1 : 0;
  const arch::RopeKernels& k = active_table().rope;
  const auto run = [&](int64_t t0, int64_t t1) {
    float cs[4 * kMaxHalf];
    for (int64_t t = t0; t < t1; ++t) {
      k.angles[style](half, freq, pos(t), cs);
      k.rotate[style](a.heads, a.ld_head, half, cs, a.x + t * a.ld_token);
      if (b.x) k.rotate[style](b.heads, b.ld_head, half, cs, b.x + t * b.ld_token);
    }
  };
  if (tokens <= kTokensPerTask || tbb::this_task_arena::max_concurrency() == 1) {
    run(0, tokens);
    return;
  }
  ForkJoin fj;
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, tokens, kTokensPerTask),
      task_body(fj, [&](const tbb::blocked_range<int64_t>& rg) { run(rg.begin(), rg.end()); }));
  fj.join();
}
template void rope_tokens<RopePositions>(const tessera_rope_desc&, int64_t, int64_t,
                                         const RopePositions&, RopeRows, RopeRows);

}  // namespace tessera::detail

namespace tessera {

Status rope(const RopeDesc& r, int64_t batch, int64_t heads, int64_t seq, int64_t head_dim,
            const int64_t stride[3], const int64_t* positions, int64_t start, float* x) {
  return detail::in_arena([&] {
    TESSERA_CHECK(detail::check_nonneg("batch", batch));
    TESSERA_CHECK(detail::check_nonneg("heads", heads));
    TESSERA_CHECK(detail::check_nonneg("seq", seq));
    TESSERA_CHECK(detail::check_positive("head_dim", head_dim));
    TESSERA_CHECK(detail::check_rope("", r, head_dim));
    TESSERA_CHECK(detail::check_ptr("stride", stride, true));
    const int64_t tokens = batch * seq;
    const bool work = tokens > 0 && heads > 0 && r.style != TESSERA_ROPE_NONE;
    TESSERA_CHECK(detail::check_ptr("x", x, work));
    int64_t span = 0;
    const int64_t strides[4] = {stride[0], stride[1], stride[2], 1};
    const int64_t extents[4] = {batch, heads, seq, head_dim};
    TESSERA_CHECK(detail::tensor_span("x", strides, extents, 4, 4, span));
    if (positions && work) {
      for (int64_t t = 0; t < tokens; ++t)
        if (positions[t] < 0 || positions[t] >= (int64_t(1) << 53))
          return detail::fail(Status::invalid_argument,
                              "positions[%lld] = %lld must be in [0, 2^53)", (long long)t,
                              (long long)positions[t]);
    } else if (work && (start < 0 || start + seq > (int64_t(1) << 53))) {
      return detail::fail(Status::invalid_argument,
                          "start = %lld must be >= 0 and start + seq below 2^53", (long long)start);
    }
    if (!work) return Status::ok;
    // Token t = (b, i): the heads of x + b stride[0] + i stride[2], stride[1] apart.
    for (int64_t b = 0; b < batch; ++b) {
      const detail::RopePositions pos{positions ? positions + b * seq : nullptr, start, seq};
      detail::rope_tokens(r, head_dim, seq, pos, {x + b * stride[0], heads, stride[2], stride[1]},
                          {nullptr, 0, 0, 0});
    }
    return Status::ok;
  });
}

}  // namespace tessera
