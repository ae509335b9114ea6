// libFuzzer harness: the layers' C entry points (additive attention, its keys and step, the
// batched step with valid lengths, and the multi-head attention layer with and without a KV cache)
// under decoded sizes, NULLs, outputs placed over inputs, caches that alias, short workspaces, and
// NaN or infinite inputs.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "fuzz_util.hpp"
#include "tessera/reference.hpp"

namespace {

// Whether a float32 sum of n terms whose exact value is `sum` (their magnitudes adding to `mag`)
// may round to 0 or to either sign: within n + 1 roundings of 2^-24 of mag, and 2^-149 a term for
// underflow. Against an infinite factor it is then NaN, +inf or -inf by the rounding alone.
bool rounds_either_way(double sum, double mag, int64_t n) {
  return std::fabs(sum) <= double(n + 1) * 0x1p-24 * mag + double(n) * 0x1p-149;
}

// Whether float32 rounding decides a state's scores: an infinite v_a against q_a + K_ja (q =
// dec W_dec) that rounds either way.
bool additive_undetermined(int64_t len, int64_t dec_dim, int64_t attn_dim, const float* keys,
                           const float* dec, const float* w_dec, const float* v) {
  for (int64_t a = 0; a < attn_dim; ++a) {
    if (!std::isinf(v[a])) continue;
    double q = 0, mag = 0;
    for (int64_t d = 0; d < dec_dim; ++d) {
      const double term = double(dec[d]) * w_dec[d * attn_dim + a];
      q += term, mag += std::fabs(term);
    }
    if (!std::isfinite(q)) continue;  // tanh(+-inf) = +-1; NaN stays NaN
    for (int64_t j = 0; j < len; ++j) {
      const double k = keys[j * attn_dim + a];
      // (Exactly 0 from no terms at all is no rounding: tanh(0) x inf is NaN in both.)
      if (mag + std::fabs(k) > 0 && rounds_either_way(q + k, mag + std::fabs(k), dec_dim + 1))
        return true;
    }
  }
  return false;
}

void additive(fz::Bytes& in) {
  const int form = in.range(0, 2);  // one-shot, keys, step
  const int64_t enc_len = in.range(-1, 40), enc_dim = in.range(0, 24);
  const int64_t dec_dim = in.range(0, 24), attn_dim = in.range(0, 24);
  // Every buffer holds the largest output (40 x 24 keys): an output placed over another buffer
  // must find room for its own elements there (Tessera trusts extents; it checks only that the
  // extents do not meet).
  const auto n = [](int64_t a, int64_t b) {
    return size_t(std::max<int64_t>(std::max<int64_t>(a, 0) * b, 40 * 24)) + 1;
  };
  std::vector<float> enc(n(enc_len, enc_dim)), dec(n(dec_dim, 1)), w_enc(n(enc_dim, attn_dim));
  std::vector<float> w_dec(n(dec_dim, attn_dim)), v(n(attn_dim, 1)), keys(n(enc_len, attn_dim));
  std::vector<float> context(n(enc_dim, 1)), weights(n(enc_len, 1));
  // Special values only where they reach the scores: an infinite value (enc, the weighted
  // rows) times a weight that underflows to 0 in float but not in double is NaN against inf.
  const bool specials = in.byte() < 32;
  in.fill(enc, 1.0f, false);
  in.fill(w_enc, 1.0f, false);
  for (auto* x : {&dec, &w_dec, &v}) in.fill(*x, 1.0f, specials);
  tessera_additive_keys(std::max<int64_t>(enc_len, 0), enc_dim, attn_dim, enc.data(), w_enc.data(),
                        keys.data());
  float* ctx = context.data();
  float* wts = in.flag() ? weights.data() : nullptr;
  const uint8_t alias = in.byte();
  if (alias < 16) ctx = enc.data();
  if (alias >= 16 && alias < 24 && wts) wts = v.data();
  const float* encp = in.byte() < 8 ? nullptr : enc.data();
  const std::vector<float> all_before[] = {enc, dec, w_enc, w_dec, v, keys, context, weights};
  tessera_status s;
  std::vector<float> ref_ctx(context.size()), ref_w(weights.size()), ref_keys(keys.size());
  if (form == 0) {
    s = tessera_additive_attention(enc_len, enc_dim, dec_dim, attn_dim, encp, dec.data(),
                                   w_enc.data(), w_dec.data(), v.data(), ctx, wts);
  } else if (form == 1) {
    ctx = alias < 16 ? enc.data() : keys.data();
    s = tessera_additive_keys(enc_len, enc_dim, attn_dim, encp, w_enc.data(), ctx);
  } else {
    s = tessera_additive_attention_step(enc_len, enc_dim, dec_dim, attn_dim, encp, keys.data(),
                                        dec.data(), w_dec.data(), v.data(), ctx, wts);
  }
  if (s != TESSERA_OK) {
    const std::vector<float>* now[] = {&enc, &dec, &w_enc, &w_dec, &v, &keys, &context, &weights};
    for (int i = 0; i < 8; ++i)
      if (std::memcmp(now[i]->data(), all_before[i].data(), now[i]->size() * 4) != 0)
        fz::violated("a rejected call wrote", tessera_last_error());
    fz::rejected(s, {});
    return;
  }
  if (enc_len < 0) fz::violated("a negative enc_len was accepted", "");
  const int64_t out_elems = form == 1 ? enc_len * attn_dim : enc_dim;
  if (ctx == enc.data() && out_elems > 0 && encp && enc_len * enc_dim > 0)
    fz::violated("an output over enc was accepted", "");
  if (ctx == enc.data()) return;
  if (form != 1 && wts == v.data() && attn_dim > 0 && enc_len > 0)
    fz::violated("weights over v was accepted", "");
  if (wts == v.data()) return;
  if (form == 1) {
    tessera::reference::additive_keys(enc_len, enc_dim, attn_dim, enc.data(), w_enc.data(),
                                      ref_keys.data());
    fz::expect_close(ctx, ref_keys.data(), size_t(enc_len * attn_dim), 1e-4, "additive keys");
    return;
  }
  if (additive_undetermined(enc_len, dec_dim, attn_dim, all_before[5].data(), dec.data(),
                            w_dec.data(), v.data())) {
    fz::skip(enc_dim + (wts ? enc_len : 0));
    return;
  }
  tessera::reference::additive_attention_step(enc_len, enc_dim, dec_dim, attn_dim, enc.data(),
                                              all_before[5].data(), dec.data(), w_dec.data(),
                                              v.data(), ref_ctx.data(), ref_w.data());
  fz::expect_close(ctx, ref_ctx.data(), size_t(enc_dim), 1e-4, "additive context");
  if (wts) fz::expect_close(wts, ref_w.data(), size_t(enc_len), 1e-4, "additive weights");
}

// The values of x rounded to `t`, stored as 16-bit elements from the start of x's buffer.
void narrow_in_place(std::vector<float>& x, tessera_dtype t) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    h[i] = t == TESSERA_F16 ? tessera::reference::f32_to_f16(x[i])
                            : tessera::reference::f32_to_bf16(x[i]);
  std::memcpy(x.data(), h.data(), h.size() * 2);
}

// Whether two arrays of n 16-bit elements differ anywhere by more than one spacing of the type
// at the larger magnitude (2^-10 or 2^-7 of it, and no less than the smallest normal's) plus
// `floor`: a float32 sum's own error, which a sum that cancels to near 0 leaves above the
// exact sum's rounding.
bool beyond_rounding(tessera_dtype t, const void* a, const void* b, size_t n, double floor) {
  const double eps = t == TESSERA_F16 ? 0x1p-10 : 0x1p-7,
               tiny = t == TESSERA_F16 ? 0x1p-14 : 0x1p-126;
  for (size_t i = 0; i < n; ++i) {
    const double x = tessera::reference::element(t, a, int64_t(i));
    const double y = tessera::reference::element(t, b, int64_t(i));
    if (std::isnan(x) != std::isnan(y)) return true;
    if (std::isnan(x) || x == y) continue;
    if (std::fabs(x - y) > eps * std::max({std::fabs(x), std::fabs(y), tiny}) + floor) return true;
  }
  return false;
}

// The output rows (b, i) whose value float32 rounding decides: a query component that is
// infinite against a new key's component that rounds either way. The reference's exact 0 makes
// the score NaN; the layer's float sum may leave a tiny key of either sign, and so a score of
// +inf or -inf. (Queries are bounded or non-finite: no other overflow.)
std::vector<bool> undetermined_rows(const tessera_mha_desc& d, const float* x_q, const float* x_k) {
  const int64_t B = d.batch, Lq = d.q_len, Lkv = d.kv_len, D = d.head_dim;
  const int64_t Hq = d.q_heads, Hk = d.kv_heads, Mq = d.q_in_dim, Mk = d.kv_in_dim;
  const auto w = [&](const void* p, int64_t i) {
    return tessera::reference::element(d.weight_type, p, i);
  };
  std::vector<bool> near0(size_t(B * Hk * D)), rows(size_t(B * Lq));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Lkv; ++t)
      for (int64_t col = 0; col < Hk * D; ++col) {
        double sum = d.b_k ? double(d.b_k[col]) : 0.0, mag = std::fabs(sum);
        for (int64_t p = 0; p < Mk; ++p) {
          const double term = double(x_k[(b * Lkv + t) * Mk + p]) * w(d.w_k, p * Hk * D + col);
          sum += term, mag += std::fabs(term);
        }
        if (mag > 0 && rounds_either_way(sum, mag, Mk + 1)) near0[size_t(b * Hk * D + col)] = true;
      }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Lq; ++i)
      for (int64_t col = 0; col < Hq * D; ++col) {
        double q = d.b_q ? double(d.b_q[col]) : 0.0;
        for (int64_t p = 0; p < Mq; ++p)
          q += double(x_q[(b * Lq + i) * Mq + p]) * w(d.w_q, p * Hq * D + col);
        const int64_t hk = col / D / (Hq / Hk), c = col % D;
        if (std::isinf(q) && near0[size_t(b * Hk * D + hk * D + c)])
          rows[size_t(b * Lq + i)] = true;
      }
  return rows;
}

void mha(fz::Bytes& in) {
  tessera_mha_desc d;
  const int64_t heads = in.range(1, 4), model = heads * in.range(1, 8);
  const int64_t batch = in.range(0, 2), q_len = in.range(0, 6), kv_len = in.range(0, 6);
  if (tessera_mha_desc_init(&d, batch, q_len, kv_len, model, heads) != TESSERA_OK)
    fz::violated("mha_desc_init rejected valid sizes", tessera_last_error());
  if (in.flag()) d.kv_heads = heads % 2 == 0 ? heads / 2 : heads;
  if (in.byte() < 8) d.kv_heads = 3;  // may not divide q_heads
  // Cross attention: keys and values from inputs of another width, values of another size than
  // the keys, an output of another width.
  if (in.byte() < 96) {
    d.kv_in_dim = in.range(1, 12);
    d.value_dim = in.range(1, 8);
    d.out_dim = in.range(1, 12);
  }
  d.causal = in.flag();
  d.window_left = in.byte() < 32 ? in.range(0, 4) : -1;
  d.window_right = in.byte() < 32 ? in.range(0, 4) : -1;
  // The attention options at the layer, and now and then the prepared layer instead.
  d.align = in.flag() ? TESSERA_ALIGN_BOTTOM_RIGHT : TESSERA_ALIGN_TOP_LEFT;
  if (in.byte() < 64) d.softcap = 2.0f;
  const float slopes[4] = {0.5f, 0.25f, -0.125f, 1.0f};
  if (in.byte() < 64) d.alibi_slopes = slopes;
  const bool want_lse = in.flag(), prepared = in.flag();
  if (in.byte() < 16) {  // an overflowing size: rejected on every target
    d.q_len = int64_t(1) << 40;
    d.head_dim = int64_t(1) << 30;
  }
  const int64_t D = d.head_dim, Dv = d.value_dim, Hq = d.q_heads, Hk = d.kv_heads;
  const int64_t Mq = d.q_in_dim, Mk = d.kv_in_dim, Mo = d.out_dim;
  const bool sane = D < 1000 && d.q_len < 1000;
  const size_t wq = sane ? size_t(Mq * Hq * D) : 1, wk = sane ? size_t(Mk * Hk * D) : 1;
  std::vector<float> w_q(wq), w_k(wk), w_v(sane ? size_t(Mk * Hk * Dv) : 1);
  std::vector<float> w_o(sane ? size_t(Hq * Dv * Mo) : 1);
  std::vector<float> b_q(sane ? size_t(Hq * D) : 1), b_k(sane ? size_t(Hk * D) : 1);
  std::vector<float> b_v(sane ? size_t(Hk * Dv) : 1), b_o(sane ? size_t(Mo) : 1);
  // x holds the queries' input and, unless the keys and values have inputs of their own
  // (cross dims, or two sequences at the prepared layer), theirs.
  // (Large enough to hold a cache too: one is placed over it below.)
  std::vector<float> x(std::max(
      size_t(batch * 6 * std::max(Mq, Mk)) + 1,
      size_t(std::max<int64_t>(batch, 1) * Hk * 12 * std::min<int64_t>(std::max(D, Dv), 64))));
  std::vector<float> xk_own(size_t(batch * 6 * Mk) + 1), xv_own(xk_own.size());
  std::vector<float> out(sane ? size_t(batch * q_len * Mo) + 1 : 1);
  // Special values in the query projection only (see additive()): V stays finite.
  const bool specials = in.byte() < 16;
  for (auto* p : {&w_k, &w_v, &w_o, &x, &xk_own, &xv_own, &b_k, &b_v, &b_o})
    in.fill(*p, 0.5f, false);
  for (auto* p : {&w_q, &b_q}) in.fill(*p, 0.5f, specials);
  // Weight and cache types (now and then a bad one); a 16-bit array is the float array's values
  // rounded, stored at the start of the same buffer, so the aliasing draws below still overlap.
  const uint8_t types = in.byte();
  d.weight_type = types >= 250 ? tessera_dtype(7) : tessera_dtype(types % 3);
  d.cache_type = types >= 240 && types < 250 ? tessera_dtype(-1) : tessera_dtype(types / 3 % 3);
  const bool wt_ok = types < 240, w16 = wt_ok && d.weight_type != TESSERA_F32;
  const bool c16 = wt_ok && d.cache_type != TESSERA_F32;
  if (w16)
    for (auto* p : {&w_q, &w_k, &w_v, &w_o}) narrow_in_place(*p, d.weight_type);
  d.w_q = w_q.data(), d.w_k = w_k.data(), d.w_v = w_v.data(), d.w_o = w_o.data();
  const uint8_t biases = in.byte();
  d.b_q = biases & 1 ? b_q.data() : nullptr;
  d.b_k = biases & 2 ? b_k.data() : nullptr;
  d.b_v = biases & 4 ? b_v.data() : nullptr;
  d.b_o = biases & 8 ? b_o.data() : nullptr;
  const int64_t cap = 12;
  std::vector<float> kc(size_t(std::max<int64_t>(batch, 1) * Hk * cap * std::min<int64_t>(D, 64)));
  std::vector<float> vc(size_t(std::max<int64_t>(batch, 1) * Hk * cap * std::min<int64_t>(Dv, 64)));
  const uint8_t cache = in.byte();
  if (cache < 100 && sane) {
    in.fill(kc, 0.5f, false);
    in.fill(vc, 0.5f, false);
    if (c16) narrow_in_place(kc, d.cache_type), narrow_in_place(vc, d.cache_type);
    d.k_cache = kc.data(), d.v_cache = cache < 10 ? kc.data() : vc.data();  // k == v: rejected
    // Past capacity now and then (rejected, the cache untouched): cache_len up to capacity.
    d.cache_capacity = cap, d.cache_len = in.range(0, cap);
    if (cache >= 10 && cache < 16) d.k_cache = x.data();  // over the input: rejected
  }
  // The keys the queries see, and the per-element options over (batch, head, query, key).
  const int64_t keys = d.k_cache ? d.cache_len + kv_len : kv_len;
  std::vector<int32_t> lens(size_t(batch) + 1);
  if (in.byte() < 48 && sane) {
    for (auto& l : lens) l = int32_t(in.range(0, keys + (in.byte() < 8 ? 1 : 0)));  // + 1: rejected
    d.kv_lens = lens.data();
  }
  const int64_t qk = sane ? q_len * keys : 0;
  std::vector<float> bias(size_t(std::max<int64_t>(batch, 1) * Hq * qk) + 1);
  std::vector<uint8_t> mask(size_t(std::max<int64_t>(batch, 1) * qk) + 1);
  if (in.byte() < 48 && sane) {
    in.fill(bias, 2.0f, false);
    for (size_t i = 0; i < bias.size(); i += 5) bias[i] = -std::numeric_limits<float>::infinity();
    const bool per_head = in.flag();
    d.bias = bias.data();
    d.bias_stride[0] = per_head ? Hq * qk : qk, d.bias_stride[1] = per_head ? qk : 0;
    d.bias_stride[2] = keys, d.bias_stride[3] = 1;
  }
  if (in.byte() < 48 && sane) {
    for (auto& m : mask) m = in.byte() % 4 != 0;
    d.mask = mask.data();
    d.mask_stride[0] = qk, d.mask_stride[1] = 0, d.mask_stride[2] = keys, d.mask_stride[3] = 1;
  }
  // Inputs: x for all three (self-attention, same widths), or x_k (and at the prepared layer
  // x_v) of their own.
  const bool own_kv = Mk != Mq || in.byte() < 64;
  const float* xk = own_kv ? xk_own.data() : x.data();
  const float* xv = own_kv && prepared && in.flag() ? xv_own.data() : xk;
  float* o = out.data();
  // Over a weight: rejected (a prepared layer reads its own copy, and w_o is too short for out).
  if (in.byte() < 10 && !(prepared && sane)) o = w_o.data();
  std::vector<uint8_t> ws;
  void* wsp = nullptr;
  size_t ws_bytes = 0;
  if (in.flag()) {
    if (tessera_mha_workspace_size(&d, &ws_bytes) == TESSERA_OK) {
      if (in.byte() < 32) ws_bytes /= 2;
      ws.resize(ws_bytes + 1);
      wsp = ws.data();
    }
  }
  std::vector<float> lse(sane ? size_t(batch * Hq * q_len) + 1 : 1, 42.0f), rlse(lse.size());
  if (want_lse) d.lse = lse.data();
  const std::vector<float> kc0 = kc, vc0 = vc, out0 = out, x0 = x, wo0 = w_o, lse0 = lse;
  if (std::getenv("FUZZ_DEBUG"))
    std::fprintf(stderr,
                 "mha batch %lld q %lld kv %lld in %lld/%lld out %lld heads %lld/%lld D %lld/%lld "
                 "cache %d len %lld causal %d w %lld/%lld ws %zu biases %d types %d/%d lens %d "
                 "bias %d mask %d own_kv %d\n",
                 (long long)batch, (long long)d.q_len, (long long)d.kv_len, (long long)Mq,
                 (long long)Mk, (long long)Mo, (long long)Hq, (long long)Hk, (long long)D,
                 (long long)Dv, d.k_cache != nullptr, (long long)d.cache_len, d.causal,
                 (long long)d.window_left, (long long)d.window_right, ws_bytes, biases & 15,
                 int(d.weight_type), int(d.cache_type), d.kv_lens != nullptr, d.bias != nullptr,
                 d.mask != nullptr, own_kv);
  tessera_status s;
  // The layer holds its weights (out over w_o is then no aliasing), copied at create: only
  // with weight arrays as large as the sizes say (the overflowing sizes describe none).
  if (prepared && sane) {
    tessera_mha_layer* layer = nullptr;
    s = tessera_mha_create(&d, &layer);
    if (s == TESSERA_OK) {
      if (wsp && tessera_mha_layer_workspace_size(layer, &d, &ws_bytes) == TESSERA_OK) {
        if (in.byte() < 32) ws_bytes /= 2;
        ws.resize(ws_bytes + 1);
        wsp = ws.data();
      }
      s = tessera_mha_layer_forward(layer, &d, x.data(), xk, xv, o, wsp, ws_bytes);
    }
    tessera_mha_destroy(layer);
  } else {
    s = tessera_mha_forward(&d, x.data(), xk, o, wsp, ws_bytes);
  }
  if (s == TESSERA_OK && !wt_ok) fz::violated("a bad weight or cache type was accepted", "");
  if (s != TESSERA_OK) {
    if (std::memcmp(lse.data(), lse0.data(), lse.size() * 4) != 0 ||
        std::memcmp(kc.data(), kc0.data(), kc.size() * 4) != 0 ||
        std::memcmp(vc.data(), vc0.data(), vc.size() * 4) != 0 ||
        std::memcmp(out.data(), out0.data(), out.size() * 4) != 0 ||
        std::memcmp(x.data(), x0.data(), x.size() * 4) != 0 ||
        std::memcmp(w_o.data(), wo0.data(), w_o.size() * 4) != 0)
      fz::violated("a rejected call wrote", tessera_last_error());
    fz::rejected(s, {});
    return;
  }
  if (!sane) {  // with batch 0 nothing is read: OK is right
    if (batch > 0) fz::violated("an overflowing size was accepted", "");
    return;
  }
  if (o != out.data() && batch * q_len > 0) fz::violated("out over w_o was accepted", "");
  if (d.k_cache && d.k_cache == d.v_cache && batch > 0) fz::violated("k_cache == v_cache", "");
  // x holds the queries' input, and the keys' too unless they have their own.
  if (d.k_cache == x.data() && batch > 0 && (q_len > 0 || (xk == x.data() && kv_len > 0)))
    fz::violated("k_cache over x was accepted", "");
  if (d.kv_lens)
    for (int64_t b = 0; b < batch; ++b)
      if (lens[size_t(b)] > keys) fz::violated("a kv_lens entry past the keys was accepted", "");
  if (o != out.data() || (d.k_cache && (d.k_cache == d.v_cache || d.k_cache == x.data()))) return;
  std::vector<float> ref(out.size()), rkc = kc0, rvc = vc0;
  tessera_mha_desc rd = d;
  if (rd.k_cache) rd.k_cache = rkc.data(), rd.v_cache = rvc.data();
  if (rd.lse) rd.lse = rlse.data();
  tessera::reference::mha_forward(rd, x.data(), xk, xv, ref.data());
  if (std::getenv("FUZZ_DEBUG"))
    for (size_t i = 0; i < size_t(batch * q_len * Mo); ++i)
      std::fprintf(stderr, "out %g ref %g\n", double(out[i]), double(ref[i]));
  if (d.k_cache && c16) {
    // A 16-bit cache: the appended rows within one rounding of the reference's (a float32 sum
    // may round to either side of a halfway point) plus the float32 sum's error, and the output
    // against the reference over the cache as the layer wrote it.
    if (beyond_rounding(d.cache_type, kc.data(), rkc.data(), kc.size() * 2, 1e-4) ||
        beyond_rounding(d.cache_type, vc.data(), rvc.data(), vc.size() * 2, 1e-4))
      fz::violated("mha 16-bit cache rows differ from the reference by more than a rounding", "");
    std::vector<float> wk = kc, wv = vc;
    rd.k_cache = wk.data(), rd.v_cache = wv.data();
    rd.cache_len = d.cache_len + d.kv_len, rd.kv_len = 0;
    tessera::reference::mha_forward(rd, x.data(), xk, xv, ref.data());
  }
  int64_t undetermined_count = 0;
  if (!(d.k_cache && c16)) {  // (over a 16-bit cache the reference reads the layer's own keys)
    const auto undetermined = undetermined_rows(d, x.data(), xk);
    for (int64_t r = 0; r < batch * q_len; ++r) {
      if (!undetermined[size_t(r)]) continue;
      ++undetermined_count;
      std::copy_n(out.data() + r * Mo, Mo, ref.data() + r * Mo);
      for (int64_t h = 0; h < Hq && d.lse; ++h) {
        const size_t at = size_t((r / q_len * Hq + h) * q_len + r % q_len);  // [b][h][i]
        rlse[at] = lse[at];
      }
    }
  }
  fz::skip(undetermined_count * (Mo + (d.lse ? Hq : 0)));
  fz::expect_close(out.data(), ref.data(), size_t(batch * q_len * Mo), 1e-4, "mha out");
  if (d.lse) fz::expect_close(lse.data(), rlse.data(), size_t(batch * Hq * q_len), 1e-4, "mha lse");
  if (d.k_cache && !c16) {
    fz::expect_close(kc.data(), rkc.data(), kc.size(), 1e-4, "mha k cache");
    fz::expect_close(vc.data(), rvc.data(), vc.size(), 1e-4, "mha v cache");
  }
}

// The batched step: decoded sizes and valid lengths (some out of range), weights NULL or placed
// over an input; a rejected call writes nothing, an accepted one matches the reference.
void additive_batch(fz::Bytes& in) {
  const int64_t batch = in.range(-1, 4), len = in.range(0, 300), enc_dim = in.range(0, 20);
  const int64_t dec_dim = in.range(0, 20), attn_dim = in.range(0, 20);
  const int64_t b = std::max<int64_t>(batch, 0);
  // keys also holds the weights when they are placed over it (even with attn_dim = 0).
  std::vector<float> enc(size_t(b * len * enc_dim + 1));
  std::vector<float> keys(size_t(b * len * std::max<int64_t>(attn_dim, 1) + 1));
  std::vector<float> dec(size_t(b * dec_dim + 1)), w_dec(size_t(dec_dim * attn_dim + 1));
  std::vector<float> v(size_t(attn_dim + 1));
  // Special values (as the one-state harness) only in dec, w_dec and v, where they reach the
  // scores; enc and keys finite.
  const bool specials = in.byte() < 32;
  in.fill(enc, 1.0f, false), in.fill(keys, 1.0f, false), in.fill(dec, 1.0f, specials);
  in.fill(w_dec, 0.3f, specials), in.fill(v, 1.0f, specials);
  std::vector<int32_t> lens(size_t(b + 1));
  for (auto& l : lens) l = int32_t(in.range(-1, len + 1));  // -1 and len + 1 must be rejected
  const bool with_lens = in.flag();
  std::vector<float> ctx(size_t(b * enc_dim + 1), 7.0f), w(size_t(b * len + 1), 7.0f);
  const int where = in.range(0, 2);  // weights: own buffer, NULL, over keys
  float* wts = where == 0 ? w.data() : where == 1 ? nullptr : keys.data();
  const std::vector<float> ctx0(ctx), w0(w), keys0(keys);
  if (std::getenv("FUZZ_DEBUG")) {
    std::fprintf(stderr, "batch %lld len %lld enc %lld dec %lld attn %lld lens %d where %d\n",
                 (long long)batch, (long long)len, (long long)enc_dim, (long long)dec_dim,
                 (long long)attn_dim, with_lens, where);
    for (auto* p : {&enc, &keys, &dec, &w_dec, &v}) {
      for (float f : *p) std::fprintf(stderr, "%g ", double(f));
      std::fprintf(stderr, "\n");
    }
    for (int32_t l : lens) std::fprintf(stderr, "len %d\n", l);
  }
  const tessera_status s = tessera_additive_attention_batch(
      batch, len, enc_dim, dec_dim, attn_dim, enc.data(), keys.data(),
      with_lens ? lens.data() : nullptr, dec.data(), w_dec.data(), v.data(), ctx.data(), wts);
  if (s != TESSERA_OK) {
    const auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
      return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;  // NaN bits too
    };
    if (!same(ctx, ctx0) || !same(w, w0) || !same(keys, keys0))
      fz::violated("a rejected batched step wrote", tessera_last_error());
    fz::rejected(s, {});
    return;
  }
  if (where == 2 && b * len * attn_dim > 0 && len > 0)
    fz::violated("weights over keys accepted", "");
  std::vector<float> ref_ctx(ctx.size()), ref_w(w.size());
  tessera::reference::additive_attention_batch(b, len, enc_dim, dec_dim, attn_dim, enc.data(),
                                               keys0.data(), with_lens ? lens.data() : nullptr,
                                               dec.data(), w_dec.data(), v.data(), ref_ctx.data(),
                                               ref_w.data());
  if (std::getenv("FUZZ_DEBUG"))
    for (size_t i = 0; i < size_t(b * enc_dim); ++i)
      std::fprintf(stderr, "ctx %g ref %g\n", double(ctx[i]), double(ref_ctx[i]));
  for (int64_t i = 0; i < b; ++i) {  // a state whose scores rounding decides: not compared
    const int64_t valid = with_lens ? lens[size_t(i)] : len;  // the keys it reads
    if (!additive_undetermined(valid, dec_dim, attn_dim, keys0.data() + i * len * attn_dim,
                               dec.data() + i * dec_dim, w_dec.data(), v.data()))
      continue;
    fz::skip(enc_dim + (wts == w.data() ? len : 0));
    std::copy_n(ctx.data() + i * enc_dim, enc_dim, ref_ctx.data() + i * enc_dim);
    if (wts == w.data()) std::copy_n(w.data() + i * len, len, ref_w.data() + i * len);
  }
  fz::expect_close(ctx.data(), ref_ctx.data(), size_t(b * enc_dim), 1e-4, "batched context");
  if (wts == w.data())
    fz::expect_close(w.data(), ref_w.data(), size_t(b * len), 1e-4, "batched weights");
}

// The introspection calls with any name and any status value; the table always ends as it was.
void introspection(fz::Bytes& in) {
  char name[24] = {};
  for (size_t i = 0; i + 1 < sizeof name; ++i) name[i] = char(in.byte());
  const bool can = tessera_isa_supported(name) != 0;
  char before[32];
  std::snprintf(before, sizeof before, "%s", tessera_isa_name());
  const bool pass = in.flag();
  const tessera_status s = tessera_set_isa(pass ? name : nullptr);
  if ((s == TESSERA_OK) != (pass && can)) fz::violated("set_isa and isa_supported disagree", name);
  if (s != TESSERA_OK && tessera_last_error()[0] == '\0') fz::violated("no message", name);
  tessera_set_isa(before);
  if (tessera_status_string(tessera_status(int32_t(in.u32()))) == nullptr)
    fz::violated("status_string returned NULL", "");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fz::Bytes in(data, size);
  const fz::Workspace ws(data, size);
  const uint8_t which = in.byte();
  if (which < 16)
    introspection(in);
  else if (which < 64)
    additive_batch(in);
  else if (which & 1)
    additive(in);
  else
    mha(in);
  return 0;
}
