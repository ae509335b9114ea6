// Every kernel family's tester proven able to fail. For each family (every KernelFamily the
// registry names, and each of the softmax kernels a table carries), a mutant - the real kernel
// with one plausible defect: a k term dropped, one lane of a tail perturbed, the last element
// skipped - is run through the family's tester, which must report a failure. A family that has
// no mutant fails the first test, so a new family cannot arrive without one.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "attention_tester.hpp"
#include "src/runtime/dispatch.hpp"
#include "src/runtime/registry.hpp"
#include "test_util.hpp"
#include "testers.hpp"

namespace mutant_test {

namespace {

namespace arch = tessera::arch;
using tessera::detail::KernelFamily;
using tessera::detail::KernelRow;

// ---- the defects ----------------------------------------------------------------------------

// A GEMM-family kernel (first argument k, kc or pairs) that leaves out its last k step.
template <class... Args>
struct DropLastTerm {
  static inline void (*real)(int64_t, Args...) = nullptr;
  static void call(int64_t k, Args... args) { real(k > 0 ? k - 1 : 0, args...); }
};
template <class... Args>
const void* drop_last_term(void (*fn)(int64_t, Args...)) {
  DropLastTerm<Args...>::real = fn;
  return reinterpret_cast<const void*>(&DropLastTerm<Args...>::call);
}

// A last lane that is a tail lane on every table (n not a multiple of 4, the narrowest vector).
bool tail(int64_t n) { return n % 4 != 0; }
float nudge(float y, float rel) { return y * (1.0f + rel); }

// Conversions: the last lane of a tail one bit off.
template <class In, class Out>
struct TailBitFlip {
  static inline void (*real)(int64_t, const In*, Out*) = nullptr;
  static void call(int64_t n, const In* x, Out* y) {
    real(n, x, y);
    if (tail(n)) {
      if constexpr (sizeof(Out) == 2) {
        y[n - 1] ^= 1;
      } else {
        uint32_t b;
        std::memcpy(&b, &y[n - 1], 4);
        b ^= 1;
        std::memcpy(&y[n - 1], &b, 4);
      }
    }
  }
};
template <class In, class Out>
const void* tail_bit_flip(const void* fn) {
  TailBitFlip<In, Out>::real = reinterpret_cast<void (*)(int64_t, const In*, Out*)>(fn);
  return reinterpret_cast<const void*>(&TailBitFlip<In, Out>::call);
}

// The block types' kernels: a dot that leaves the last block out, a P V that leaves the last key
// out, quantizers and dequantizers with the last byte or value of the output perturbed.
struct QuantMutants {
  static inline arch::QuantDotFn dot = nullptr;
  static inline arch::QuantPvFn pv = nullptr;
  static inline void (*quantize)(int64_t, const float*, uint8_t*) = nullptr;
  static inline void (*dequantize)(int64_t, const uint8_t*, float*) = nullptr;
  static inline void (*rows)(int64_t, int64_t, const float*, int64_t, int8_t*, float*) = nullptr;
  // The last block left out; with one block (where that would drop everything) the first row's
  // last score 2^-10 off instead, so that no shape makes the mutant a no-op.
  static void dot_short(const arch::QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n,
                        float* s, int64_t lds, float alpha) {
    arch::QuantRows fewer = q;
    fewer.blocks = q.blocks > 1 ? q.blocks - 1 : q.blocks;
    dot(fewer, k, ldk, n, s, lds, alpha);
    if (q.blocks == 1 && n > 0) {
      float& y = s[n - 1];
      y = nudge(y, 0x1p-10f) + (y == 0.0f ? 1.0f : 0.0f);
    }
  }
  static void pv_short(int64_t n, const float* p, int64_t ldp, const uint8_t* v, int64_t ldv,
                       int64_t blocks, float* o, int64_t ldo, arch::NextRows next) {
    pv(n > 0 ? n - 1 : n, p, ldp, v, ldv, blocks, o, ldo, next);
  }
  static void quantize_last(int64_t n, const float* x, uint8_t* y, int bytes) {
    quantize(n, x, y);
    if (n > 0) y[n / 32 * bytes - 1] ^= 1;
  }
  static void quantize_last_q8(int64_t n, const float* x, uint8_t* y) {
    quantize_last(n, x, y, 34);
  }
  static void quantize_last_q4(int64_t n, const float* x, uint8_t* y) {
    quantize_last(n, x, y, 18);
  }
  static void dequantize_last(int64_t n, const uint8_t* x, float* y) {
    dequantize(n, x, y);
    if (n > 0) y[n - 1] = nudge(y[n - 1], 0x1p-10f) + (y[n - 1] == 0.0f ? 1.0f : 0.0f);
  }
  static void rows_last(int64_t r, int64_t d, const float* x, int64_t ldx, int8_t* qs, float* sc) {
    rows(r, d, x, ldx, qs, sc);
    if (r > 0 && d > 0) sc[r * (d / 32) - 1] = nudge(sc[r * (d / 32) - 1], 0x1p-10f);
  }
  static inline arch::QGemmFn gemm = nullptr;
  static inline arch::QGemmPackFn pack = nullptr;
  static inline int64_t pack_block_bytes = 0;
  // The same for the GEMM tile: the last block out, or with one block the first row's last
  // column 2^-10 off.
  static void gemm_short(const arch::QGemmRows& a, const uint8_t* panel, float* c, int64_t ldc,
                         int64_t cols, float alpha, float beta) {
    arch::QGemmRows fewer = a;
    fewer.blocks = a.blocks > 1 ? a.blocks - 1 : a.blocks;
    gemm(fewer, panel, c, ldc, cols, alpha, beta);
    if (a.blocks == 1 && cols > 0) {
      float& y = c[cols - 1];
      y = nudge(y, 0x1p-10f) + (y == 0.0f ? 1.0f : 0.0f);
    }
  }
  static void pack_last(int64_t cols, int64_t blocks, const uint8_t* b, int64_t ldb,
                        uint8_t* panel) {
    pack(cols, blocks, b, ldb, panel);
    if (blocks > 0) panel[blocks * pack_block_bytes - 1] ^= 1;
  }
};

// The rotary kernels: the last cosine of the table, or the last rotated value of the last head,
// 2^-10 off.
struct RopeMutants {
  static inline void (*angles)(int64_t, const double*, double, float*) = nullptr;
  static inline void (*rotate)(int64_t, int64_t, int64_t, const float*, float*) = nullptr;
  static void angles_last(int64_t half, const double* f, double pos, float* cs) {
    angles(half, f, pos, cs);
    if (half > 0)
      cs[half - 1] = nudge(cs[half - 1], 0x1p-10f) + (cs[half - 1] == 0.0f ? 1.0f : 0.0f);
  }
  static void rotate_last(int64_t heads, int64_t ld, int64_t half, const float* cs, float* x) {
    rotate(heads, ld, half, cs, x);
    if (heads > 0 && half > 0) {
      float& y = x[(heads - 1) * ld + 2 * half - 1];
      y = nudge(y, 0x1p-10f) + (y == 0.0f ? 1.0f : 0.0f);
    }
  }
};

// The norm and activation kernels with their row's last value 2^-10 off.
struct NormActMutants {
  static inline arch::NormRowFn norm = nullptr;
  static inline arch::ActivationRowFn act = nullptr;
  static void bump(int64_t n, float* y) {
    if (n > 0) y[n - 1] = nudge(y[n - 1], 0x1p-10f) + (y[n - 1] == 0.0f ? 1.0f : 0.0f);
  }
  static void norm_last(int64_t n, float* x, const float* r, const float* g, const float* b,
                        float eps, float* y) {
    norm(n, x, r, g, b, eps, y);
    bump(n, y);
  }
  static void act_last(int64_t n, const float* g, const float* u, float* y) {
    act(n, g, u, y);
    bump(n, y);
  }
};

// ---- mutants of the registered kernels --------------------------------------------------------

// The row with its kernel replaced by the mutant of its family, and what the mutant does.
struct RowMutant {
  KernelRow row;
  const char* defect;
};
RowMutant mutate(const KernelRow& real) {
  RowMutant m{real, "drops the last k step"};
  KernelRow& r = m.row;
  const void* f = real.fn;
  switch (real.family) {
    case KernelFamily::gemm_packed:
    case KernelFamily::gemm_packed_narrow:
    case KernelFamily::gemm_rows_bk:
      r.fn = drop_last_term(reinterpret_cast<arch::GemmPackedFn>(f));
      break;
    case KernelFamily::gemm_strided:
    case KernelFamily::gemm_strided_narrow:
    case KernelFamily::gemm_wide:
    case KernelFamily::gemm_wide_prefetching:
      r.fn = drop_last_term(reinterpret_cast<arch::GemmStridedFn>(f));
      break;
    case KernelFamily::gemm_row_panels:
      r.fn = drop_last_term(reinterpret_cast<arch::GemmRowPanelsFn>(f));
      break;
    case KernelFamily::gemm_row_panels_b_f16:
    case KernelFamily::gemm_row_panels_b_bf16:
      r.fn = drop_last_term(reinterpret_cast<arch::GemmRowPanels16Fn>(f));
      break;
    case KernelFamily::gemm_dot:
    case KernelFamily::gemm_dot_stream:
      r.fn = drop_last_term(reinterpret_cast<arch::GemmDotFn>(f));
      break;
    case KernelFamily::gemm_dot_b_f16:
    case KernelFamily::gemm_dot_b_bf16:
      r.fn = drop_last_term(reinterpret_cast<arch::GemmDot16Fn>(f));
      break;
    case KernelFamily::gemm_wide_b_f16:
    case KernelFamily::gemm_wide_b_bf16:
      r.fn = drop_last_term(reinterpret_cast<arch::GemmStrided16Fn>(f));
      break;
    case KernelFamily::gemm_rows_stream:
      r.fn = drop_last_term(reinterpret_cast<arch::GemmStreamFn>(f));
      break;
    case KernelFamily::gemm_rows_stream_b_f16:
    case KernelFamily::gemm_rows_stream_b_bf16:
      r.fn = drop_last_term(reinterpret_cast<arch::GemmStream16Fn>(f));
      break;
    case KernelFamily::hgemm_packed:
      r.fn = drop_last_term(reinterpret_cast<arch::HgemmPackedFn>(f));
      break;
    case KernelFamily::gemm_bf16_dot_packed:
      r.fn = drop_last_term(reinterpret_cast<arch::Bf16DotPackedFn>(f));
      m.defect = "drops the last k pair";
      break;
    case KernelFamily::gemm_bf16_dot_nt:
      r.fn = drop_last_term(reinterpret_cast<arch::Bf16DotNtFn>(f));
      break;
    case KernelFamily::convert_f32_f16:
    case KernelFamily::convert_f32_bf16:
      r.fn = tail_bit_flip<float, uint16_t>(f);
      m.defect = "flips a bit of a tail's last lane";
      break;
    case KernelFamily::convert_f16_f32:
    case KernelFamily::convert_bf16_f32:
      r.fn = tail_bit_flip<uint16_t, float>(f);
      m.defect = "flips a bit of a tail's last lane";
      break;
    case KernelFamily::quant_dot_q8_0:
    case KernelFamily::quant_dot_q4_0:
      QuantMutants::dot = reinterpret_cast<arch::QuantDotFn>(f);
      r.fn = reinterpret_cast<const void*>(&QuantMutants::dot_short);
      m.defect = "leaves the last block out";
      break;
    case KernelFamily::quant_pv_q8_0:
    case KernelFamily::quant_pv_q4_0:
      QuantMutants::pv = reinterpret_cast<arch::QuantPvFn>(f);
      r.fn = reinterpret_cast<const void*>(&QuantMutants::pv_short);
      m.defect = "leaves the last key out";
      break;
    case KernelFamily::quantize_q8_0:
    case KernelFamily::quantize_q4_0:
      QuantMutants::quantize = reinterpret_cast<void (*)(int64_t, const float*, uint8_t*)>(f);
      r.fn = real.family == KernelFamily::quantize_q8_0
                 ? reinterpret_cast<const void*>(&QuantMutants::quantize_last_q8)
                 : reinterpret_cast<const void*>(&QuantMutants::quantize_last_q4);
      m.defect = "flips a bit of the last block's last byte";
      break;
    case KernelFamily::dequantize_q8_0:
    case KernelFamily::dequantize_q4_0:
      QuantMutants::dequantize = reinterpret_cast<void (*)(int64_t, const uint8_t*, float*)>(f);
      r.fn = reinterpret_cast<const void*>(&QuantMutants::dequantize_last);
      m.defect = "perturbs the last value";
      break;
    case KernelFamily::quantize_rows_q8_0:
      QuantMutants::rows =
          reinterpret_cast<void (*)(int64_t, int64_t, const float*, int64_t, int8_t*, float*)>(f);
      r.fn = reinterpret_cast<const void*>(&QuantMutants::rows_last);
      m.defect = "perturbs the last row's last scale";
      break;
    case KernelFamily::quant_gemm_q8_0:
    case KernelFamily::quant_gemm_q4_0:
      QuantMutants::gemm = reinterpret_cast<arch::QGemmFn>(f);
      r.fn = reinterpret_cast<const void*>(&QuantMutants::gemm_short);
      m.defect = "leaves the last block out";
      break;
    case KernelFamily::quant_gemm_pack_q8_0:
    case KernelFamily::quant_gemm_pack_q4_0:
      QuantMutants::pack = reinterpret_cast<arch::QGemmPackFn>(f);
      if (const arch::KernelTable* t = tessera::detail::find_table(real.table))
        QuantMutants::pack_block_bytes =
            t->quant.gemm_block_bytes[real.family == KernelFamily::quant_gemm_pack_q8_0 ? 0 : 1];
      r.fn = reinterpret_cast<const void*>(&QuantMutants::pack_last);
      m.defect = "flips a bit of the last block's last byte";
      break;
    case KernelFamily::rope_angles_neox:
    case KernelFamily::rope_angles_gptj:
      RopeMutants::angles = reinterpret_cast<void (*)(int64_t, const double*, double, float*)>(f);
      r.fn = reinterpret_cast<const void*>(&RopeMutants::angles_last);
      m.defect = "a cosine 2^-10 off";
      break;
    case KernelFamily::rope_rotate_neox:
    case KernelFamily::rope_rotate_gptj:
      RopeMutants::rotate =
          reinterpret_cast<void (*)(int64_t, int64_t, int64_t, const float*, float*)>(f);
      r.fn = reinterpret_cast<const void*>(&RopeMutants::rotate_last);
      m.defect = "the last value 2^-10 off";
      break;
    case KernelFamily::norm_rms:
    case KernelFamily::norm_layer:
      NormActMutants::norm = reinterpret_cast<arch::NormRowFn>(f);
      r.fn = reinterpret_cast<const void*>(&NormActMutants::norm_last);
      m.defect = "the last value 2^-10 off";
      break;
    case KernelFamily::act_silu:
    case KernelFamily::act_gelu_tanh:
      NormActMutants::act = reinterpret_cast<arch::ActivationRowFn>(f);
      r.fn = reinterpret_cast<const void*>(&NormActMutants::act_last);
      m.defect = "the last value 2^-10 off";
      break;
    case KernelFamily::count:
      m.defect = nullptr;  // no mutant
  }
  r.name = "mutant_" + real.name;
  return m;
}

// ---- mutants of the softmax kernels -----------------------------------------------------------

using Sk = arch::SoftmaxKernels;
Sk g_real;  // the table's own kernels, which the mutants call

void exp_tail(int64_t n, const float* x, float* y) {
  g_real.exp(n, x, y);
  if (tail(n)) y[n - 1] = nudge(y[n - 1], 0x1p-16f);
}
void exp_nonpositive_tail(int64_t n, const float* x, float* y) {
  g_real.exp_nonpositive(n, x, y);
  if (tail(n)) y[n - 1] = nudge(y[n - 1], 0x1p-16f);
}
void exp_shifted_tail(int64_t n, const float* x, float scale, float shift, float* y) {
  g_real.exp_shifted(n, x, scale, shift, y);
  if (tail(n)) y[n - 1] = nudge(y[n - 1], 0x1p-16f);
}
void tanh_tail(int64_t n, const float* x, float* y) {
  g_real.tanh(n, x, y);
  if (tail(n)) y[n - 1] = nudge(y[n - 1], 0x1p-12f);
}
void stats_stream_short(int64_t n, const float* x, float scale, float* max, float* sum) {
  g_real.stats_stream(n > 1 ? n - 1 : n, x, scale, max, sum);
}
void stats_rows_short(int64_t rows, int64_t n, const float* x, int64_t ldx, float scale, float* max,
                      float* sum) {
  g_real.stats_rows(rows, n > 1 ? n - 1 : n, x, ldx, scale, max, sum);
}
void softmax_rows_cached_tail(int64_t rows, int64_t n, const float* x, int64_t ldx, float scale,
                              float* y, int64_t ldy, float* max, float* sum, float* stream) {
  g_real.softmax_rows_cached(rows, n, x, ldx, scale, y, ldy, max, sum, stream);
  if (tail(n))
    for (int64_t r = 0; r < rows; ++r) y[r * ldy + n - 1] = nudge(y[r * ldy + n - 1], 0x1p-10f);
}
void attention_rows_short(int64_t rows, int64_t n, float* s, int64_t lds, const float* m,
                          float* max, float* sum) {
  // The last key is left out: its score stays a score, outside the sum.
  g_real.attention_rows(rows, n > 1 ? n - 1 : n, s, lds, m, max, sum);
}
float max_short(int64_t n, const float* x) { return g_real.max(n > 1 ? n - 1 : n, x); }
float exp_sum_short(int64_t n, const float* x, float scale, float shift, float* y) {
  const float sum = g_real.exp_sum(n, x, scale, shift, y);
  return n > 1 ? sum - std::exp(x[n - 1] * scale - shift) : sum;  // the last term left out
}
void affine_tail(int64_t n, const float* x, float mul, float add, float* y) {
  g_real.affine(n, x, mul, add, y);
  if (tail(n)) y[n - 1] = nudge(y[n - 1], 0x1p-10f);
}

// One mutant of a table: its kernels with one replaced, and the tester that must reject it
// (run through the public API on that table, or on the table's kernels directly).
struct TableMutant {
  const char* family;
  const char* defect;
  void (*apply)(Sk& k);
  const char* tester_name;
  void (*tester)(const arch::KernelTable& t);
};

void api_softmax(const arch::KernelTable&) { testers::softmax_ops(); }
void api_attention(const arch::KernelTable&) { testers::attention_ops(); }
void api_additive(const arch::KernelTable&) { testers::additive_ops(); }

// Every SoftmaxKernels member has an entry (the static_assert counts the members).
static_assert(sizeof(Sk) == 11 * sizeof(void (*)()), "a new softmax kernel needs a mutant here");
const TableMutant kTableMutants[] = {
    {"softmax.exp", "a tail's last lane 2^-16 off", [](Sk& k) { k.exp = exp_tail; },
     "transcendental_kernels", testers::transcendental_kernels},
    {"softmax.exp_nonpositive", "a tail's last lane 2^-16 off",
     [](Sk& k) { k.exp_nonpositive = exp_nonpositive_tail; }, "transcendental_kernels",
     testers::transcendental_kernels},
    {"softmax.exp_shifted", "a tail's last lane 2^-16 off",
     [](Sk& k) { k.exp_shifted = exp_shifted_tail; }, "transcendental_kernels",
     testers::transcendental_kernels},
    {"softmax.tanh", "a tail's last lane 2^-12 off", [](Sk& k) { k.tanh = tanh_tail; },
     "transcendental_kernels", testers::transcendental_kernels},
    {"softmax.stats_stream (softmax passes)", "skips the last element",
     [](Sk& k) { k.stats_stream = stats_stream_short; }, "softmax_ops", api_softmax},
    {"softmax.stats_rows (softmax passes)", "skips each row's last element",
     [](Sk& k) { k.stats_rows = stats_rows_short; }, "softmax_ops", api_softmax},
    {"softmax.softmax_rows_cached (softmax passes)", "each row's tail lane 2^-10 off",
     [](Sk& k) { k.softmax_rows_cached = softmax_rows_cached_tail; }, "softmax_ops", api_softmax},
    {"softmax.attention_rows (the attention tile)", "leaves the tile's last key out",
     [](Sk& k) { k.attention_rows = attention_rows_short; }, "attention_ops", api_attention},
    {"softmax.max (attention's special rows)", "skips the last element",
     [](Sk& k) { k.max = max_short; }, "attention_ops", api_attention},
    {"softmax.exp_sum (softmax chunks)", "leaves the last term out of the sum",
     [](Sk& k) { k.exp_sum = exp_sum_short; }, "softmax_ops", api_softmax},
    {"softmax.affine", "a tail's last lane 2^-10 off", [](Sk& k) { k.affine = affine_tail; },
     "softmax_ops", api_softmax},
    // The Bahdanau step's own tester against the tanh it calls over each block of keys.
    {"additive step (its tanh)", "a tail's last lane 2^-12 off", [](Sk& k) { k.tanh = tanh_tail; },
     "additive_ops", api_additive},
};

// ---- mutants of attention over block-type K/V ------------------------------------------------

// Every dot kernel of a table (both types, every row count) or its dequantizers wrapped, the
// real ones kept per slot: a dropped block, every score scaled as a scale one f16 ulp off, or a
// P V that adds nothing.
struct QuantTable {
  static inline arch::QuantDotFn dot[2][arch::kMaxDotRows + 1] = {};
  static inline void (*dequantize[2])(int64_t, const uint8_t*, float*) = {};
  template <int T, int R>
  static void dot_dropped(const arch::QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n,
                          float* s, int64_t lds, float alpha) {
    arch::QuantRows fewer = q;
    fewer.blocks = q.blocks > 1 ? q.blocks - 1 : q.blocks;
    dot[T][R](fewer, k, ldk, n, s, lds, alpha);
  }
  template <int T, int R>
  static void dot_ulp(const arch::QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n, float* s,
                      int64_t lds, float alpha) {
    dot[T][R](q, k, ldk, n, s, lds, alpha * (1.0f + 0x1p-10f));
  }
  static void pv_nothing(int64_t, const float*, int64_t, const uint8_t*, int64_t, int64_t, float*,
                         int64_t, arch::NextRows) {}
  static void wrap_pvs(arch::QuantKernels& q) {
    for (auto& row : q.pv)
      for (auto& fn : row) fn = pv_nothing;
  }
  template <int T>
  static void dequantize_dropped(int64_t n, const uint8_t* x, float* y) {
    dequantize[T](n, x, y);
    if (n >= 64) std::fill(y + n - 32, y + n, 0.0f);
  }
  template <int T, int... R>
  static void wrap(arch::QuantKernels& q, bool ulp, std::integer_sequence<int, R...>) {
    ((dot[T][R] = q.dot[T][R], q.dot[T][R] = ulp ? dot_ulp<T, R> : dot_dropped<T, R>), ...);
  }
  static void wrap_dots(arch::QuantKernels& q, bool ulp) {
    wrap<0>(q, ulp, std::make_integer_sequence<int, arch::kMaxDotRows + 1>{});
    wrap<1>(q, ulp, std::make_integer_sequence<int, arch::kMaxDotRows + 1>{});
  }
  static void wrap_dequantizers(arch::QuantKernels& q) {
    dequantize[0] = q.dequantize[0], dequantize[1] = q.dequantize[1];
    q.dequantize[0] = dequantize_dropped<0>, q.dequantize[1] = dequantize_dropped<1>;
  }
};

// The exact path on the active table: decode and prefill over q8_0 and q4_0 K/V against the
// reference on the stored values (quant_test.cpp's tester at two shapes).
void quant_accuracy() { testers::quant_accuracy(true); }
void quant_exact_path() {
  for (const tessera_dtype t : {TESSERA_Q8_0, TESSERA_Q4_0})
    for (const int64_t q_len : {1, 40}) {
      AttentionTester a(1, 4, 2, q_len, 300, 64, 64);
      a.kv_types(t, t);
      a.test(1e-5, 3);
    }
}

// Runs f with gtest's failures intercepted; returns how many it reported.
int failures_of(const std::function<void()>& f) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    testers::g_mutant_failures = &results;
    f();
    testers::g_mutant_failures = nullptr;
  }
  return results.size();
}

TEST(Mutants, EveryFamilyHasOne) {
  for (int f = 0; f < int(KernelFamily::count); ++f) {
    KernelRow row;
    row.family = KernelFamily(f);
    EXPECT_NE(mutate(row).defect, nullptr)
        << tessera::detail::family_name(KernelFamily(f)) << " has no mutant";
  }
}

// Every registered kernel entry point of every table this machine runs (each row of the
// registry: every tile height, every dot kernel's row count, every packer and conversion): its
// family's tester rejects the row's mutant.
TEST(Mutants, EveryRegisteredKernelsTesterRejectsItsMutant) {
  int rows = 0;
  for (const KernelRow& row : tessera::detail::kernel_registry()) {
    const RowMutant m = mutate(row);
    ASSERT_NE(m.defect, nullptr) << row.name << " has no mutant";
    const int n = failures_of([&] { testers::registered_kernel(m.row); });
    std::printf("mutant %-26s %-11s %-44s %-34s %s (%d failures)\n", family_name(row.family),
                row.table, row.name.c_str(), m.defect, n > 0 ? "rejected" : "NOT REJECTED", n);
    EXPECT_GT(n, 0) << row.name << ": its tester passed the mutant that " << m.defect;
    ++rows;
  }
  std::printf("%d registered kernels, each rejected by its tester\n", rows);
}

// Each softmax kernel (and the layer steps built on them), on every table: the table with that
// kernel replaced is made the active one, and the family's tester must fail on it.
TEST(Mutants, EverySoftmaxKernelsTesterRejectsItsMutant) {
  for (const std::string& isa : tt::isas()) {
    const arch::KernelTable* real = tessera::detail::find_table(isa.c_str());
    ASSERT_NE(real, nullptr);
    for (const TableMutant& tm : kTableMutants) {
      arch::KernelTable mutant = *real;
      g_real = real->softmax;
      tm.apply(mutant.softmax);
      const auto* previous = tessera::detail::exchange_active_table_for_testing(&mutant);
      const int n = failures_of([&] { tm.tester(mutant); });
      tessera::detail::exchange_active_table_for_testing(previous);
      std::printf("mutant %-44s %-11s %-34s by %-22s %s (%d failures)\n", tm.family, isa.c_str(),
                  tm.defect, tm.tester_name, n > 0 ? "rejected" : "NOT REJECTED", n);
      std::fflush(stdout);
      EXPECT_GT(n, 0) << isa << " " << tm.family << ": " << tm.tester_name
                      << " passed the mutant that " << tm.defect;
    }
  }
}

// Attention over block-type K/V on every table: a dot kernel that drops a block (decode) or a
// dequantizer that drops one (prefill) fails the stated relative RMS (testers::quant_accuracy);
// scores scaled as by a scale one f16 ulp off, which that measure cannot see, fail the exact path.
TEST(Mutants, QuantizedAttentionsTestersRejectDroppedBlocksAndAScaleOneUlpOff) {
  if (!tt::block_types_built()) GTEST_SKIP() << "built with TESSERA_QUANTIZED=OFF";
  struct Case {
    const char* defect;
    void (*apply)(arch::QuantKernels&);
    void (*tester)();
  };
  const Case cases[] = {
      {"dot kernels drop the last block",
       [](arch::QuantKernels& q) { QuantTable::wrap_dots(q, false); }, quant_accuracy},
      {"dequantizers drop the last block", QuantTable::wrap_dequantizers, quant_accuracy},
      {"P V adds nothing (decode outputs zeros)", QuantTable::wrap_pvs, quant_accuracy},
      {"scores off by an f16 ulp of the scale",
       [](arch::QuantKernels& q) { QuantTable::wrap_dots(q, true); }, quant_exact_path},
  };
  for (const std::string& isa : tt::isas()) {
    const arch::KernelTable* real = tessera::detail::find_table(isa.c_str());
    ASSERT_NE(real, nullptr);
    if (real->quant.dot[0][1] == nullptr) continue;
    for (const Case& c : cases) {
      arch::KernelTable mutant = *real;
      c.apply(mutant.quant);
      const auto* previous = tessera::detail::exchange_active_table_for_testing(&mutant);
      const int n = failures_of(c.tester);
      tessera::detail::exchange_active_table_for_testing(previous);
      std::printf("mutant quantized attention %-11s %-40s %s (%d failures)\n", isa.c_str(),
                  c.defect, n > 0 ? "rejected" : "NOT REJECTED", n);
      EXPECT_GT(n, 0) << isa << ": the quantized attention's tester passed a mutant whose "
                      << c.defect;
    }
  }
}

}  // namespace

}  // namespace mutant_test
