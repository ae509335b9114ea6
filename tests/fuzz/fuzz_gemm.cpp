// libFuzzer harness: tessera_sgemm, tessera_sgemm_strided_batched, the packed-B trio and
// tessera_hgemm (on the same arena rounded to f16) under decoded sizes, transposes, leading
// dimensions, batch strides, scalars, aliasing and data.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "fuzz_util.hpp"
#include "tessera/reference.hpp"

namespace {

const int64_t kHuge = int64_t(1) << 40;

// Elements a rows x cols matrix with leading dimension ld spans (0 if empty), or -1 when that
// is more than any buffer here (the call must then be rejected, or read nothing).
int64_t span(int64_t rows, int64_t cols, int64_t ld) {
  if (rows <= 0 || cols <= 0) return 0;
  const __int128 s = __int128(rows - 1) * ld + cols;
  return s > 10000000 ? -1 : int64_t(s);
}

struct HCall {
  tessera_transpose ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
};

// The spacing of f16 values at |x| (2^-24 below the normal range).
double f16_ulp(double x) {
  const int e = std::max(std::ilogb(std::max(std::fabs(x), 0x1p-14)), -14);
  return std::ldexp(1.0, e - 10);
}

// tessera_hgemm over the arena rounded to f16, B at offset ea, C at c_off: a rejected call writes
// nothing; an accepted aliased one must not overlap; an accepted one is within the bound of the
// arithmetic the table does (tessera.h): fp16 chunks on neon64_v82; elsewhere a float32 sum
// rounded once, within one f16 ulp of reference::hgemm plus SGEMM's float32 bound. NaN where the
// reference has NaN, the same infinities; where the exact result lies within the bound of the
// f16 overflow threshold (65520), either a finite value or the infinity is right.
void hgemm_case(const std::vector<float>& arena, int64_t a_off, int64_t c_off, int64_t ea,
                int64_t eb, int64_t ec, bool vast, bool alias, const HCall& q) {
  namespace ref = tessera::reference;
  std::vector<uint16_t> h(arena.size());
  for (size_t i = 0; i < h.size(); ++i) h[i] = ref::f32_to_f16(arena[i]);
  const std::vector<uint16_t> before(h);
  uint16_t* a = h.data() + a_off;
  uint16_t* b = h.data() + ea;
  uint16_t* c = h.data() + c_off;
  const tessera_status s =
      tessera_hgemm(q.ta, q.tb, q.m, q.n, q.k, q.alpha, a, q.lda, b, q.ldb, q.beta, c, q.ldc);
  if (s != TESSERA_OK) {
    if (h != before) fz::violated("a rejected hgemm wrote", tessera_last_error());
    fz::rejected(s, {});
    return;
  }
  if (vast) return;
  if (alias) {  // accepted: C must then overlap neither A nor B (what they span)
    const int64_t sa = ea - a_off;
    const bool used = q.m > 0 && q.n > 0 && ec > 0;
    if (used && ((c_off < a_off + sa && a_off < c_off + ec && sa > 0 && q.k > 0) ||
                 (c_off < ea + eb && ea < c_off + ec && eb > 0 && q.k > 0)))
      fz::violated("an hgemm output over an input was accepted", "");
    return;
  }
  std::vector<uint16_t> want(before.begin() + c_off, before.begin() + c_off + ec);
  const bool at = q.ta == TESSERA_TRANS, bt = q.tb == TESSERA_TRANS;
  ref::hgemm(tessera::Transpose(q.ta), tessera::Transpose(q.tb), q.m, q.n, q.k, q.alpha,
             before.data() + a_off, q.lda, before.data() + ea, q.ldb, q.beta, want.data(), q.ldc);
  const bool fp16 = std::strcmp(tessera_isa_name(), "neon64_v82") == 0;
  const double u = 0x1p-11, ch = double(std::min<int64_t>(q.k, 64));
  const double g = ch * u / (1.0 - ch * u), e = std::ldexp(std::ceil(q.k / std::max(ch, 1.0)), -22);
  int64_t compared = 0;
  for (int64_t i = 0; i < q.m; ++i)
    for (int64_t j = 0; j < q.n; ++j) {
      double mag = 0;
      for (int64_t p = 0; p < q.k; ++p)
        mag += std::fabs(
            double(ref::f16_to_f32(before[size_t(a_off + (at ? p * q.lda + i : i * q.lda + p))])) *
            double(ref::f16_to_f32(before[size_t(ea + (bt ? j * q.ldb + p : p * q.ldb + j))])));
      const size_t el = size_t(i * q.ldc + j);
      const double got = ref::f16_to_f32(c[el]), w = ref::f16_to_f32(want[el]);
      const double c_in = q.beta == 0.0f ? 0.0 : ref::f16_to_f32(before[size_t(c_off) + el]);
      const double am = std::fabs(q.alpha) * mag, bc = std::fabs(q.beta * c_in);
      const double bound =
          fp16 ? 1.01 * (am * (g + e) + bc * e + 2 * u * std::fabs(w) +
                         double(q.k + 1) * 0x1p-25 * (std::fabs(q.alpha) + 1))
               : f16_ulp(std::max(std::fabs(w), std::isfinite(got) ? std::fabs(got) : 0.0)) +
                     1.01 * 2 * std::sqrt(double(std::max<int64_t>(q.k, 1))) * 0x1p-24 * (am + bc);
      ++compared;
      if (got == w || (std::isnan(got) && std::isnan(w))) continue;
      if (std::isnan(got) || std::isnan(w)) {
        // An fp16 chunk may overflow where the exact sum does not (tessera.h), and then meet
        // the opposite infinity.
        if (fp16 && am > 65504.0) continue;
        fz::violated("hgemm result", "NaN differs from the reference");
      }
      if (std::isinf(got) || std::isinf(w)) {
        // Near the overflow threshold a rounding decides between 65504 and inf; an fp16 chunk
        // may also overflow on its own (tessera.h).
        const double finite = std::isinf(got) ? w : got;
        if (std::isfinite(finite) &&
            (std::fabs(finite) + bound >= 65520.0 || (fp16 && am > 65504.0)))
          continue;
        if (std::isinf(got) && std::isinf(w) && (fp16 && am > 65504.0)) continue;
        fz::violated("hgemm result", "an infinity differs from the reference");
      }
      if (!(std::fabs(got - w) <= bound)) fz::violated("hgemm result", "outside the bound");
    }
  fz::Counts::counts().compared += compared;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fz::Bytes in(data, size);
  const fz::Workspace ws(data, size);
  const int form = in.range(0, 3);  // plain, batched, packed, f16
  const tessera_transpose ta = in.flag() ? TESSERA_TRANS : TESSERA_NO_TRANS;
  const tessera_transpose tb = form == 2 || !in.flag() ? TESSERA_NO_TRANS : TESSERA_TRANS;
  int64_t m = in.size(70), n = in.size(70), k = in.size(70);
  const bool huge = m == kHuge || n == kHuge || k == kHuge;
  if (huge) m = n = k = kHuge;  // every span then overflows: must be rejected
  const int64_t a_cols = ta == TESSERA_NO_TRANS ? k : m, a_rows = ta == TESSERA_NO_TRANS ? m : k;
  const int64_t b_cols = tb == TESSERA_NO_TRANS ? n : k, b_rows = tb == TESSERA_NO_TRANS ? k : n;
  // Leading dimensions: the minimum, padded, one short (rejected) or vast.
  auto ld = [&](int64_t cols) -> int64_t {
    const uint8_t sel = in.byte();
    const int64_t need = cols > 1 ? cols : 1;
    if (huge || sel == 255) return int64_t(1) << 62;
    if (sel < 16) return need - 1;
    return need + (sel % 4);
  };
  const int64_t lda = ld(a_cols), ldb = ld(b_cols), ldc = ld(n);
  const float alphas[] = {1.0f, -0.5f, 0.0f, 2.0f}, betas[] = {0.0f, 1.0f, 0.3f, -2.0f};
  const float alpha = alphas[in.range(0, 3)], beta = betas[in.range(0, 3)];
  const int64_t batch = form == 1 ? in.range(0, 4) : 1;
  int64_t sa = span(a_rows, a_cols, std::max<int64_t>(lda, 1));
  int64_t sb = span(b_rows, b_cols, std::max<int64_t>(ldb, 1));
  int64_t sc = span(m, n, std::max<int64_t>(ldc, 1));
  // An operand too large to hold gets no buffer (the call must reject it or not read it); the
  // others keep theirs, which a valid call reads in full.
  const bool vast = huge || sa < 0 || sb < 0 || sc < 0;
  if (huge) sa = sb = sc = 0;
  sa = std::max<int64_t>(sa, 0), sb = std::max<int64_t>(sb, 0), sc = std::max<int64_t>(sc, 0);
  // Batch strides: whole matrices apart, 0 (shared) for A or B, or C overlapping itself.
  const int64_t stride_a = in.flag() ? 0 : sa + in.range(0, 3);
  const int64_t stride_b = in.flag() ? 0 : sb + in.range(0, 3);
  const int64_t stride_c = in.byte() < 24 ? sc / 2 : sc + in.range(0, 3);
  const int64_t nb = std::max<int64_t>(batch, 1);
  const int64_t ea = sa + (nb - 1) * stride_a, eb = sb + (nb - 1) * stride_b;
  const int64_t ec = sc + (nb - 1) * std::max<int64_t>(stride_c, 0);
  // One arena: A, B, C apart, unless C is placed over A or B (must be rejected).
  const int alias = in.byte() < 32 ? in.range(1, 3) : 0;  // 1: C = A, 2: C inside B, 3: C after A
  std::vector<float> arena(size_t(ea + eb + ec + 64));
  in.fill(arena, 1.0f, true);
  float* a = arena.data();
  float* b = a + ea;
  float* c = b + eb;
  if (alias == 1) c = a;
  if (alias == 2) c = b + eb / 2;
  if (alias == 3 && ea > 1) c = a + ea - 1;
  if (c + ec > arena.data() + arena.size()) c = b + eb;  // keep within the arena
  std::vector<float> packed;
  size_t packed_bytes = 0;
  if (form == 2) {
    // Float32 panels, or panels kept in f16 / bf16 from a B rounded to that type (in the arena
    // too, so the reference below sees the same values).
    const int kind = in.range(0, 2);
    std::vector<uint16_t> b16;
    if (kind > 0 && !vast) {
      const auto narrow =
          kind == 1 ? tessera::reference::f32_to_f16 : tessera::reference::f32_to_bf16;
      const auto widen =
          kind == 1 ? tessera::reference::f16_to_f32 : tessera::reference::bf16_to_f32;
      b16.resize(size_t(std::max<int64_t>(eb, 1)));
      for (int64_t e = 0; e < eb; ++e) b[e] = widen(b16[size_t(e)] = narrow(b[e]));
    }
    packed_bytes =
        kind > 0 ? tessera_sgemm_pack_b16_size(tb, k, n) : tessera_sgemm_pack_b_size(tb, k, n);
    packed.resize(packed_bytes / 4 + 16);
    const size_t given = in.byte() < 32 ? packed_bytes / 2 : packed_bytes;
    const fz::Snapshot before(packed.data(), packed.size() * 4);
    const tessera_status s =
        kind == 0 ? tessera_sgemm_pack_b(tb, k, n, b, ldb, packed.data(), given)
                  : tessera_sgemm_pack_b16(tb, k, n, kind == 1 ? TESSERA_F16 : TESSERA_BF16,
                                           vast ? nullptr : b16.data(), ldb, packed.data(), given);
    if (fz::rejected(s, {before})) {
      if (!vast && given == packed_bytes && ldb >= std::max<int64_t>(b_cols, 1))
        fz::violated("pack_b rejected a valid call", tessera_last_error());
      return 0;
    }
  }
  if (form == 3) {
    hgemm_case(arena, a - arena.data(), c - arena.data(), ea, eb, ec, vast, alias != 0,
               {ta, tb, m, n, k, lda, ldb, ldc, alpha, beta});
    return 0;
  }
  const std::vector<float> c0(c, c + ec);
  std::vector<float> whole_before(arena);
  tessera_status s;
  if (form == 0)
    s = tessera_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else if (form == 1)
    s = tessera_sgemm_strided_batched(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b,
                                      beta, c, ldc, stride_c, batch);
  else
    s = tessera_sgemm_packed(ta, m, n, k, alpha, a, lda, packed.data(), beta, c, ldc);
  if (s != TESSERA_OK) {
    if (std::memcmp(whole_before.data(), arena.data(), arena.size() * 4) != 0)
      fz::violated("a rejected call wrote", tessera_last_error());
    fz::rejected(s, {});
    return 0;
  }
  if (vast) return 0;
  if (alias) {
    // Accepted: then C must not overlap what A and B span (nothing, for an empty batch).
    const bool used = batch > 0;
    auto overlaps = [&](const float* p, int64_t np) {
      return used && np > 0 && ec > 0 && sc > 0 && p < c + ec && c < p + np;
    };
    if (overlaps(a, sa > 0 ? ea : 0) || (form != 2 && overlaps(b, sb > 0 ? eb : 0)))
      fz::violated("an output over an input was accepted", "");
    return 0;
  }
  // The reference on the inputs as they were.
  std::vector<float> ref(c0);
  for (int64_t t = 0; t < batch; ++t)
    tessera::reference::sgemm(tessera::Transpose(ta), tessera::Transpose(tb), m, n, k, alpha,
                              whole_before.data() + t * stride_a, lda,
                              whole_before.data() + ea + t * stride_b, ldb, beta,
                              ref.data() + t * stride_c, ldc);
  fz::expect_close(c, ref.data(), size_t(ec), 1e-4, "sgemm result");
  return 0;
}
