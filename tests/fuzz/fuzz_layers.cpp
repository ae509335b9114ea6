// libFuzzer harness: the layers' C entry points (additive attention, its keys and step, and the
// multi-head attention layer with and without a KV cache) under decoded sizes, NULLs, outputs
// placed over inputs, caches that alias, short workspaces, and NaN or infinite inputs.
#include <algorithm>

#include "fuzz_util.hpp"
#include "tessera/reference.hpp"

namespace {

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
  tessera::reference::additive_attention_step(enc_len, enc_dim, dec_dim, attn_dim, enc.data(),
                                              all_before[5].data(), dec.data(), w_dec.data(),
                                              v.data(), ref_ctx.data(), ref_w.data());
  fz::expect_close(ctx, ref_ctx.data(), size_t(enc_dim), 1e-4, "additive context");
  if (wts) fz::expect_close(wts, ref_w.data(), size_t(enc_len), 1e-4, "additive weights");
}

void mha(fz::Bytes& in) {
  tessera_mha_desc d;
  const int64_t heads = in.range(1, 4), model = heads * in.range(1, 8);
  const int64_t batch = in.range(0, 2), q_len = in.range(0, 6), kv_len = in.range(0, 6);
  if (tessera_mha_desc_init(&d, batch, q_len, kv_len, model, heads) != TESSERA_OK)
    fz::violated("mha_desc_init rejected valid sizes", tessera_last_error());
  if (in.flag()) d.kv_heads = heads % 2 == 0 ? heads / 2 : heads;
  if (in.byte() < 8) d.kv_heads = 3;  // may not divide q_heads
  d.causal = in.flag();
  d.window_left = in.byte() < 32 ? in.range(0, 4) : -1;
  if (in.byte() < 16) {  // an overflowing size: rejected on every target
    d.q_len = int64_t(1) << 40;
    d.head_dim = int64_t(1) << 30;
  }
  const int64_t D = d.head_dim, Hq = d.q_heads, Hk = d.kv_heads;
  const bool sane = D < 1000 && d.q_len < 1000;
  const size_t wq = sane ? size_t(model * Hq * D) : 1, wk = sane ? size_t(model * Hk * D) : 1;
  std::vector<float> w_q(wq), w_k(wk), w_v(wk), w_o(sane ? size_t(Hq * D * model) : 1);
  std::vector<float> b_q(sane ? size_t(Hq * D) : 1), x(size_t(batch * 6 * model) + 1);
  std::vector<float> out(sane ? size_t(batch * q_len * model) + 1 : 1);
  // Special values in the query projection only (see additive()): V stays finite.
  const bool specials = in.byte() < 16;
  for (auto* p : {&w_k, &w_v, &w_o, &x}) in.fill(*p, 0.5f, false);
  for (auto* p : {&w_q, &b_q}) in.fill(*p, 0.5f, specials);
  d.w_q = w_q.data(), d.w_k = w_k.data(), d.w_v = w_v.data(), d.w_o = w_o.data();
  d.b_q = in.flag() ? b_q.data() : nullptr;
  const int64_t cap = 12;
  std::vector<float> kc(size_t(std::max<int64_t>(batch, 1) * Hk * cap * std::min<int64_t>(D, 64)));
  std::vector<float> vc(kc.size());
  const uint8_t cache = in.byte();
  if (cache < 100 && sane) {
    in.fill(kc, 0.5f, false);
    in.fill(vc, 0.5f, false);
    d.k_cache = kc.data(), d.v_cache = cache < 10 ? kc.data() : vc.data();  // k == v: rejected
    d.cache_capacity = cap, d.cache_len = in.range(0, cap);
    if (cache >= 10 && cache < 16) d.k_cache = x.data();  // over the input: rejected
  }
  float* o = out.data();
  if (in.byte() < 10) o = w_o.data();  // over a weight: rejected
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
  const std::vector<float> kc0 = kc, vc0 = vc, out0 = out, x0 = x, wo0 = w_o;
  if (std::getenv("FUZZ_DEBUG"))
    std::fprintf(stderr,
                 "mha batch %lld q %lld kv %lld model %lld heads %lld/%lld D %lld cache %d len "
                 "%lld causal %d wl %lld ws %zu bq %d\n",
                 (long long)batch, (long long)d.q_len, (long long)d.kv_len, (long long)model,
                 (long long)Hq, (long long)Hk, (long long)D, d.k_cache != nullptr,
                 (long long)d.cache_len, d.causal, (long long)d.window_left, ws_bytes,
                 d.b_q != nullptr);
  const tessera_status s = tessera_mha_forward(&d, x.data(), x.data(), o, wsp, ws_bytes);
  if (s != TESSERA_OK) {
    if (std::memcmp(kc.data(), kc0.data(), kc.size() * 4) != 0 ||
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
  if (d.k_cache == x.data() && batch > 0 && q_len + kv_len > 0)
    fz::violated("k_cache over x was accepted", "");
  if (o != out.data() || (d.k_cache && (d.k_cache == d.v_cache || d.k_cache == x.data()))) return;
  std::vector<float> ref(out.size()), rkc = kc0, rvc = vc0;
  tessera_mha_desc rd = d;
  if (rd.k_cache) rd.k_cache = rkc.data(), rd.v_cache = rvc.data();
  tessera::reference::mha_forward(rd, x.data(), x.data(), ref.data());
  if (std::getenv("FUZZ_DEBUG")) {
    for (size_t i = 0; i < size_t(batch * q_len * model); ++i)
      std::fprintf(stderr, "out %g ref %g\n", double(out[i]), double(ref[i]));
    for (float f : w_q) std::fprintf(stderr, "wq %g\n", double(f));
    for (float f : b_q) std::fprintf(stderr, "bq %g\n", double(f));
  }
  fz::expect_close(out.data(), ref.data(), size_t(batch * q_len * model), 1e-4, "mha out");
  if (d.k_cache) {
    fz::expect_close(kc.data(), rkc.data(), kc.size(), 1e-4, "mha k cache");
    fz::expect_close(vc.data(), rvc.data(), vc.size(), 1e-4, "mha v cache");
  }
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
  else if (which & 1)
    additive(in);
  else
    mha(in);
  return 0;
}
