// A batched Bahdanau step: several decoder states, each against its own encoded sequence and
// valid length. The queries of all states are one GEMM (batch x dec_dim times W_dec). The scores
// run in tasks over blocks of keys (the tuning row's additive_keys_per_task): each block's q + K
// tile takes one tanh call across all its keys (the single step made a tanh call and a double
// dot product per key row), then each key's dot with v in eight float lanes. Then a softmax per
// state over its valid keys and one product per state for the context. Every sum's order is
// fixed by the shape, so the result is the same on any thread count and block size. The step's
// scratch (queries, scores, tiles) is reserved before any output is written and comes from the
// thread's kept scratch or its bound workspace: no allocation in the steady state.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstring>

#include "gemm/gemm_split.hpp"
#include "runtime/check.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/scratch.hpp"
#include "runtime/threading.hpp"
#include "runtime/tsan.hpp"
#include "runtime/tuning.hpp"
#include "tessera/gemm.hpp"
#include "tessera/layers.hpp"
#include "tessera/softmax.hpp"

namespace tessera {
namespace {

struct Batch {
  int64_t batch, enc_len, enc_dim, dec_dim, attn_dim;
  const float *enc, *keys;
  const int32_t* enc_lens;
  const float *dec, *w_dec, *v;
  float *context, *weights;
  int64_t len(int64_t b) const { return enc_lens ? int64_t(enc_lens[b]) : enc_len; }
};

Status check(const Batch& p) {
  TESSERA_CHECK(detail::check_nonneg("batch", p.batch));
  TESSERA_CHECK(detail::check_nonneg("enc_len", p.enc_len));
  TESSERA_CHECK(detail::check_nonneg("enc_dim", p.enc_dim));
  TESSERA_CHECK(detail::check_nonneg("dec_dim", p.dec_dim));
  TESSERA_CHECK(detail::check_nonneg("attn_dim", p.attn_dim));
  int64_t n_enc, n_keys, n_dec, n_wdec, n_ctx, n_w;
  TESSERA_CHECK(detail::checked_count("enc", {p.batch, p.enc_len, p.enc_dim}, n_enc));
  TESSERA_CHECK(detail::checked_count("keys", {p.batch, p.enc_len, p.attn_dim}, n_keys));
  TESSERA_CHECK(detail::checked_count("dec", {p.batch, p.dec_dim}, n_dec));
  TESSERA_CHECK(detail::checked_count("w_dec", {p.dec_dim, p.attn_dim}, n_wdec));
  TESSERA_CHECK(detail::checked_count("context", {p.batch, p.enc_dim}, n_ctx));
  TESSERA_CHECK(detail::checked_count("weights", {p.batch, p.enc_len}, n_w));
  TESSERA_CHECK(detail::check_ptr("enc", p.enc, n_enc > 0));
  TESSERA_CHECK(detail::check_ptr("keys", p.keys, n_keys > 0));
  TESSERA_CHECK(detail::check_ptr("dec", p.dec, n_dec > 0 && p.attn_dim > 0));
  TESSERA_CHECK(detail::check_ptr("w_dec", p.w_dec, n_wdec > 0 && p.batch > 0));
  TESSERA_CHECK(detail::check_ptr("v", p.v, p.attn_dim > 0 && n_w > 0));
  TESSERA_CHECK(detail::check_ptr("context", p.context, n_ctx > 0));
  if (p.enc_lens)
    for (int64_t b = 0; b < p.batch; ++b)
      if (p.enc_lens[b] < 0 || p.enc_lens[b] > p.enc_len)
        return detail::fail(Status::invalid_argument, "enc_lens[%lld] = %d must be in [0, %lld]",
                            (long long)b, p.enc_lens[b], (long long)p.enc_len);
  using detail::region;
  const std::initializer_list<detail::Region> inputs = {
      region("enc", p.enc, n_enc, 4),  region("keys", p.keys, n_keys, 4),
      region("dec", p.dec, n_dec, 4),  region("w_dec", p.w_dec, n_wdec, 4),
      region("v", p.v, p.attn_dim, 4), region("enc_lens", p.enc_lens, p.enc_lens ? p.batch : 0, 4)};
  const detail::Region ctx = region("context", p.context, n_ctx, 4);
  const detail::Region w = region("weights", p.weights, p.weights ? n_w : 0, 4);
  TESSERA_CHECK(detail::check_disjoint(ctx, inputs));
  TESSERA_CHECK(detail::check_disjoint(ctx, {w}));
  return detail::check_disjoint(w, inputs);
}

// e[j0, j1) of state b: tile[j][a] = q_a + K[j][a] for the block's keys, one tanh call over the
// whole tile, then each key's v . tile[j] in eight lanes (a vector of partial sums, added in a
// fixed order).
void scores(const arch::SoftmaxKernels& k, const Batch& p, const float* query, int64_t b,
            int64_t j0, int64_t j1, float* tile, float* e) {
  const int64_t J = j1 - j0, A = p.attn_dim;
  const float* keys = p.keys + (b * p.enc_len + j0) * A;
  const float* q = query + b * A;
  for (int64_t j = 0; j < J; ++j)
    for (int64_t a = 0; a < A; ++a) tile[j * A + a] = q[a] + keys[j * A + a];
  k.tanh(A * J, tile, tile);
  float* out = e + b * p.enc_len + j0;
  const float* v = p.v;
  for (int64_t j = 0; j < J; ++j) {
    const float* t = tile + j * A;
    float lane[8] = {};
    int64_t a = 0;
    for (; a + 8 <= A; a += 8)
      for (int u = 0; u < 8; ++u) lane[u] += v[a + u] * t[a + u];
    float sum = 0.0f;
    for (; a < A; ++a) sum += v[a] * t[a];
    for (float x : lane) sum += x;
    out[j] = sum;
  }
}

Status run(const Batch& p) {
  const arch::SoftmaxKernels& k = detail::active_table().softmax;
  const int64_t per_task = detail::active_tuning().additive_keys_per_task;
  const int64_t B = p.batch, L = p.enc_len, A = p.attn_dim;
  // Queries (B x A) and scores (B x L) in this thread's scratch; a key tile per task.
  const size_t floats = size_t(B * A) + size_t(B * L);
  float* query = detail::thread_scratch(detail::ScratchSlot::additive).floats(floats);
  detail::gemm_split::TaskScratch tiles;
  if (!query || !tiles.reserve(size_t(per_task * std::max<int64_t>(A, 1)), true))
    return detail::fail(Status::out_of_memory, "cannot allocate %zu floats of scratch", floats);
  float* e = query + B * A;
  if (A > 0)
    TESSERA_CHECK(sgemm(Transpose::no_trans, Transpose::no_trans, B, A, p.dec_dim, 1.0f, p.dec,
                        std::max<int64_t>(p.dec_dim, 1), p.w_dec, A, 0.0f, query, A));
  else
    std::fill(e, e + B * L, 0.0f);
  const int64_t blocks = (L + per_task - 1) / per_task;
  if (A > 0)
    detail::gemm_split::for_each_task(B * blocks, [&](int64_t t) {
      const int64_t b = t / blocks, j0 = (t % blocks) * per_task,
                    j1 = std::min(p.len(b), j0 + per_task);
      if (j1 > j0) tiles.with_slice([&](float* tile) { scores(k, p, query, b, j0, j1, tile, e); });
    });
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = p.len(b);
    float* eb = e + b * L;
    float* ctx = p.context + b * p.enc_dim;
    if (n == 0) {  // nothing to attend to: a zero context, as the single step
      std::fill(ctx, ctx + p.enc_dim, 0.0f);
    } else {
      TESSERA_CHECK(softmax(1, n, eb, n, eb, n, 1.0f));
      if (p.enc_dim > 0)
        TESSERA_CHECK(sgemm(Transpose::no_trans, Transpose::no_trans, 1, p.enc_dim, n, 1.0f, eb, n,
                            p.enc + b * L * p.enc_dim, p.enc_dim, 0.0f, ctx, p.enc_dim));
    }
    if (p.weights) {
      float* w = p.weights + b * L;
      if (n > 0) std::memcpy(w, eb, size_t(n) * sizeof(float));
      std::fill(w + n, w + L, 0.0f);
    }
  }
  return Status::ok;
}

}  // namespace

Status additive_attention_batch(int64_t batch, int64_t enc_len, int64_t enc_dim, int64_t dec_dim,
                                int64_t attn_dim, const float* enc, const float* keys,
                                const int32_t* enc_lens, const float* dec, const float* w_dec,
                                const float* v, float* context, float* weights) {
  return detail::in_arena([&] {
    const Batch p{batch,    enc_len, enc_dim, dec_dim, attn_dim, enc,    keys,
                  enc_lens, dec,     w_dec,   v,       context,  weights};
    TESSERA_CHECK(check(p));
    return run(p);
  });
}

}  // namespace tessera
