// libFuzzer harness: tessera_attention_desc_init and tessera_attention under decoded shapes
// (prefill and split-KV decode), layouts, every mask and score option, K/V of every storage type
// (q8_0 / q4_0 blocks included) and the rotation, outputs placed over inputs, and scores that are
// NaN, +-inf or denormal.
#include <algorithm>
#include <cstring>

#include "fuzz_util.hpp"
#include "tessera/reference.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fz::Bytes in(data, size);
  const fz::Workspace ws(data, size);
  const int64_t batch = in.range(0, 2), kv_heads = in.range(0, 3);
  const int64_t q_heads = kv_heads * in.range(0, 3) + (in.byte() < 8 ? 1 : 0);  // GQA, or not
  const bool decode = in.flag();
  int64_t q_len = decode ? in.range(0, 8) : in.size(40);
  int64_t kv_len = decode ? in.range(0, 1600) : in.size(300);
  // Dims of whole q8_0 / q4_0 blocks now and then (a block type needs them).
  const int64_t head_dim = in.byte() < 40 ? 32 * in.range(1, 2) : in.range(0, 40);
  const int64_t value_dim = in.byte() < 40 ? 32 * in.range(1, 2) : in.range(0, 40);
  if (q_len == (int64_t(1) << 40) || kv_len == (int64_t(1) << 40)) q_len = kv_len = q_len | kv_len;
  tessera_attention_desc d;
  const tessera_status init =
      tessera_attention_desc_init(&d, batch, q_heads, kv_heads, q_len, kv_len, head_dim, value_dim);
  if (init != TESSERA_OK) {
    fz::rejected(init, {});
    if (head_dim > 0 && value_dim > 0 && (kv_heads > 0 || q_heads == 0) &&
        (kv_heads == 0 || q_heads % kv_heads == 0) && q_len < 1000000 && kv_len < 1000000)
      fz::violated("desc_init rejected valid sizes", tessera_last_error());
    return 0;
  }
  // Sizes whose products fit are accepted (a tensor that large could exist); no call with them.
  if (q_len > 1000000 || kv_len > 1000000) return 0;
  if (in.flag()) {  // BSHD: [batch][seq][head][dim]
    auto bshd = [](int64_t* s, int64_t heads, int64_t len, int64_t dim) {
      s[0] = len * heads * dim, s[1] = dim, s[2] = heads * dim;
    };
    bshd(d.q_stride, q_heads, q_len, head_dim);
    bshd(d.k_stride, kv_heads, kv_len, head_dim);
    bshd(d.v_stride, kv_heads, kv_len, value_dim);
    bshd(d.o_stride, q_heads, q_len, value_dim);
  }
  d.causal = in.byte() < 100 ? 1 : in.byte() < 4 ? 2 : 0;  // 2: rejected
  d.align = in.flag() ? TESSERA_ALIGN_BOTTOM_RIGHT : TESSERA_ALIGN_TOP_LEFT;
  d.window_left = in.byte() < 64 ? in.range(-2, 300) : -1;
  d.window_right = in.byte() < 32 ? in.range(-1, 20) : -1;
  const float scales[] = {0.0f, 0.5f, -0.3f, 2.0f};
  d.scale = scales[in.range(0, 3)];
  d.softcap = in.byte() < 40 ? float(in.range(1, 30)) : 0.0f;
  const size_t nq = size_t(batch * q_heads * q_len * head_dim);
  const size_t nk = size_t(batch * kv_heads * kv_len * head_dim);
  const size_t nv = size_t(batch * kv_heads * kv_len * value_dim);
  const size_t no = size_t(batch * q_heads * q_len * value_dim);
  const size_t nl = size_t(batch * q_heads * q_len), ns = size_t(batch * q_heads * q_len * kv_len);
  std::vector<float> q(nq), k(nk), v(nv), bias, slopes, o(no + 1), lse;
  std::vector<uint8_t> mask;
  std::vector<int32_t> lens;
  in.fill(q, 2.0f, true);
  in.fill(k, 2.0f, true);
  in.fill(v, 1.0f, false);
  if (in.byte() < 64) {
    bias.resize(ns + 1);
    in.fill(bias, 3.0f, true);
    d.bias = bias.data();
    d.bias_stride[0] = q_heads * q_len * kv_len, d.bias_stride[1] = in.flag() ? 0 : q_len * kv_len;
    d.bias_stride[2] = kv_len, d.bias_stride[3] = 1;
  }
  if (in.byte() < 48) {
    for (size_t i = 0; i < ns; ++i) mask.push_back(in.byte() % 4 != 0);
    mask.push_back(1);
    d.mask = mask.data();
    d.mask_stride[0] = q_len * kv_len, d.mask_stride[1] = 0, d.mask_stride[2] = kv_len;
    d.mask_stride[3] = 1;
  }
  if (in.byte() < 48) {
    for (int64_t b = 0; b < batch; ++b) lens.push_back(int32_t(in.range(0, kv_len + 1)));
    lens.push_back(0);
    d.kv_lens = lens.data();
  }
  if (in.byte() < 48) {
    for (int64_t h = 0; h <= q_heads; ++h) slopes.push_back(in.value(1.0f, false));
    d.alibi_slopes = slopes.data();
  }
  if (in.flag()) {
    lse.resize(nl + 1);
    d.lse = lse.data();
  }
  // K and V types: f32, f16, bf16 (the 16-bit elements are the float arrays' halves, so every
  // pattern, inf and NaN among them, occurs), q8_0, q4_0 (blocks in the arrays' bytes), or a
  // value that is no type (rejected).
  const tessera_dtype types[] = {TESSERA_F32,  TESSERA_F16,  TESSERA_BF16,
                                 TESSERA_Q8_0, TESSERA_Q4_0, tessera_dtype(5)};
  d.k_type = types[in.byte() < 230 ? in.range(0, 4) : 5];
  d.v_type = types[in.byte() < 230 ? in.range(0, 4) : 5];
  // The rotation: a power of two up to 64 (valid where it divides the dims), or 3 (never).
  if (in.byte() < 40) {
    const int64_t r = in.range(0, 7);
    d.hadamard = r == 7 ? 3 : int64_t(1) << r;
    d.hadamard_v = in.flag() ? 1 : 0;
  }
  // Finite 16-bit magnitudes below 8, as the float32 fills keep theirs small: scores of 1e9
  // (a bf16 key of 2e9) leave fp32 a few ulps of 100 between keys, and no float32 kernel then
  // matches the double reference's weights; near FLT_MAX q.k overflows the accumulator.
  auto tame = [](tessera_dtype t, std::vector<float>& x, size_t n, bool finite) {
    auto* h = reinterpret_cast<uint16_t*>(x.data());
    if (t == TESSERA_Q8_0 || t == TESSERA_Q4_0) {
      // A block's value is d q with |q| <= 128 (q8_0) or 8 (q4_0): the f16 scale's exponent
      // capped so that values stay below 8; an inf or NaN scale made NaN (a non-finite block,
      // as the quantizers store it), or finite for V.
      const size_t bytes = t == TESSERA_Q8_0 ? 34 : 18;
      const int cap = t == TESSERA_Q8_0 ? 15 - 5 : 15 - 1;
      auto* b = reinterpret_cast<uint8_t*>(x.data());
      for (size_t blk = 0; blk < n / 32; ++blk) {
        uint16_t d;
        std::memcpy(&d, b + blk * bytes, 2);
        const int e = (d >> 10) & 0x1F;
        if (e == 0x1F)
          d = finite ? uint16_t((d & 0x83FF) | (cap << 10)) : uint16_t(0x7E00);
        else if (e > cap)
          d = uint16_t((d & 0x83FF) | (cap << 10));
        std::memcpy(b + blk * bytes, &d, 2);
      }
      return;
    }
    for (size_t i = 0; i < n && t != TESSERA_F32; ++i) {
      const bool f16 = t == TESSERA_F16;
      const int shift = f16 ? 10 : 7, mask = f16 ? 0x1F : 0xFF, bias = f16 ? 15 : 127;
      const int e = (h[i] >> shift) & mask;
      if (e == mask) {
        if (finite) h[i] &= uint16_t(~(1 << (shift + (f16 ? 4 : 7))));  // inf/NaN -> finite
      } else if (e > bias + 2) {
        h[i] = uint16_t((h[i] & ~(mask << shift)) | ((bias + 2) << shift));
      }
    }
  };
  tame(d.k_type, k, nk, false);
  // V also finite, as the float32 fill makes it: an inf or NaN in the V row of an invisible key
  // may reach O through a zero weight (tessera.h), which the reference does not model.
  tame(d.v_type, v, nv, true);
  // The output over an input, or lse over q: rejected.
  float* out = o.data();
  const uint8_t alias = in.byte();
  if (alias < 12 && nk > 0) out = k.data();
  if (alias >= 12 && alias < 20 && nv > 2) out = v.data() + 1;
  if (alias >= 20 && alias < 26 && d.lse && nq > 0) d.lse = q.data();
  std::vector<fz::Snapshot> outs = {fz::Snapshot(o.data(), o.size() * 4),
                                    fz::Snapshot(q.data(), nq * 4), fz::Snapshot(k.data(), nk * 4),
                                    fz::Snapshot(v.data(), nv * 4)};
  if (!lse.empty()) outs.emplace_back(lse.data(), lse.size() * 4);
  const tessera_status s = tessera_attention(&d, q.data(), k.data(), v.data(), out);
  if (fz::rejected(s, outs)) return 0;
  if (out != o.data() || d.lse == q.data()) {
    if (q_len > 0 && batch > 0 && q_heads > 0)
      fz::violated("an output over an input was accepted", "");
    return 0;
  }
  if (d.causal > 1) fz::violated("causal = 2 was accepted", "");
  if (d.k_type == types[5] || d.v_type == types[5]) fz::violated("a bad K/V type was accepted", "");
  const auto blocks_ok = [](tessera_dtype t, int64_t dim) {
    return (t != TESSERA_Q8_0 && t != TESSERA_Q4_0) || dim % 32 == 0;
  };
  if (!blocks_ok(d.k_type, head_dim) || !blocks_ok(d.v_type, value_dim))
    fz::violated("a block type over a dimension of part blocks was accepted", "");
  if (d.hadamard && (d.hadamard == 3 || head_dim % d.hadamard != 0 ||
                     (d.hadamard_v && value_dim % d.hadamard != 0)))
    fz::violated("a rotation that does not divide the dims was accepted", "");
  std::vector<float> ref_o(o.size()), ref_lse(lse.size());
  tessera_attention_desc rd = d;
  rd.lse = lse.empty() ? nullptr : ref_lse.data();
  tessera::reference::attention(rd, q.data(), k.data(), v.data(), ref_o.data());
  if (std::getenv("FUZZ_DEBUG")) {
    std::fprintf(stderr,
                 "b %lld h %lld/%lld q %lld kv %lld d %lld/%lld causal %d align %d win %lld %lld "
                 "scale %g softcap %g bias %d mask %d lens %d alibi %d\n",
                 (long long)batch, (long long)q_heads, (long long)kv_heads, (long long)q_len,
                 (long long)kv_len, (long long)head_dim, (long long)value_dim, d.causal,
                 int(d.align), (long long)d.window_left, (long long)d.window_right, double(d.scale),
                 double(d.softcap), d.bias != nullptr, d.mask != nullptr, d.kv_lens != nullptr,
                 d.alibi_slopes != nullptr);
    for (size_t i = 0; i < no; ++i)
      if (std::isnan(o[i]) != std::isnan(ref_o[i]))
        std::fprintf(stderr, "o[%zu] %g ref %g\n", i, double(o[i]), double(ref_o[i]));
    std::fprintf(stderr, "k_type %d v_type %d\n", int(d.k_type), int(d.v_type));
    for (size_t i = 0; i < lse.size() && i < nl; ++i)
      std::fprintf(stderr, "lse[%zu] %g ref %g\n", i, double(lse[i]), double(ref_lse[i]));
    for (float f : slopes) std::fprintf(stderr, "slope %g\n", double(f));
    for (float f : q) std::fprintf(stderr, "q %g\n", double(f));
    auto show = [&](const char* name, tessera_dtype t, const std::vector<float>& x, size_t n) {
      for (size_t i = 0; i < n; ++i) {
        uint16_t h[2];
        std::memcpy(h, x.data() + i / 2, 4);
        const uint16_t e = h[i % 2];
        float f = t == TESSERA_F32   ? x[i]
                  : t == TESSERA_F16 ? tessera::reference::f16_to_f32(e)
                                     : tessera::reference::bf16_to_f32(e);
        if (t == TESSERA_Q8_0 || t == TESSERA_Q4_0)
          f = tessera::reference::element(t, x.data(), int64_t(i));
        std::fprintf(stderr, "%s %g\n", name, double(f));
      }
    };
    show("k", d.k_type, k, nk);
    show("v", d.v_type, v, nv);
  }
  fz::expect_close(o.data(), ref_o.data(), no, 1e-4, "attention O");
  if (!lse.empty()) fz::expect_close(lse.data(), ref_lse.data(), nl, 1e-4, "attention lse");
  return 0;
}
