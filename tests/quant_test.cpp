// The block types q8_0 and q4_0 on every kernel table: tessera_convert against the reference
// quantizers bit for bit (ggml's rounding, the non-finite blocks), and fused attention over every
// pair of K/V types with a block type among them, on the decode and prefill paths, against the
// reference run on the dequantized K/V and the queries rounded as the kernels round them (the
// float32 tolerance), and against the unquantized inputs within the relative RMS tessera.h states.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "attention_tester.hpp"
#include "tessera/convert.hpp"
#include "tessera/layers.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"
#include "testers.hpp"

namespace quant_test {

namespace {

using tessera::DType;
using tessera::Status;
namespace ref = tessera::reference;

class Quant : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(Quant);

constexpr tessera_dtype kBlockTypes[] = {TESSERA_Q8_0, TESSERA_Q4_0};

// Values that exercise the quantizers: random blocks of varied scale, the largest value at each
// position and of each sign, ties of the rounding (x / d = k + 0.5), zeros, tiny and huge blocks.
std::vector<float> quantizer_inputs() {
  std::vector<float> x = tt::random_vec(32 * 64, 3, -3.0f, 3.0f);
  for (int b = 0; b < 64; ++b)
    for (int j = 0; j < 32; ++j) x[size_t(b * 32 + j)] *= std::ldexp(1.0f, b % 9 - 4);
  for (int pos = 0; pos < 32; ++pos) {  // the max at every position, both signs
    std::vector<float> blk = tt::random_vec(32, 100 + pos);
    blk[size_t(pos)] = pos % 2 ? 4.0f : -4.0f;
    x.insert(x.end(), blk.begin(), blk.end());
  }
  std::vector<float> ties(32);  // q8_0: d = 127 / 127 = 1, values at k + 0.5
  for (int j = 0; j < 32; ++j) ties[size_t(j)] = j == 0 ? 127.0f : float(j) - 15.5f;
  x.insert(x.end(), ties.begin(), ties.end());
  for (int j = 0; j < 32; ++j) ties[size_t(j)] = j == 0 ? -8.0f : float(j % 16) * 0.5f - 3.75f;
  x.insert(x.end(), ties.begin(), ties.end());  // q4_0: d = 1, x id + 8.5 at integers
  x.insert(x.end(), 32, 0.0f);
  x.insert(x.end(), 32, 1e-30f);
  // Scales below 2^-126: 1 / d inexact or infinite (x id past 127, or 0 x inf), f16 d = 0.
  for (float tiny : {3e-39f, 1e-40f, 1e-44f}) {
    std::vector<float> blk = tt::random_vec(32, 77, -1.0f, 1.0f);
    for (auto& v : blk) v *= tiny;
    blk[3] = tiny, blk[9] = 0.0f, blk[20] = -tiny;
    x.insert(x.end(), blk.begin(), blk.end());
  }
  std::vector<float> big(32, 6e4f);
  big[5] = -6.5e4f;
  x.insert(x.end(), big.begin(), big.end());
  const std::vector<float> near = tt::q4_0_contraction_blocks();
  x.insert(x.end(), near.begin(), near.end());
  return x;
}

TEST_P(Quant, ConvertMatchesTheReferenceQuantizersBitForBit) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  const std::vector<float> x = quantizer_inputs();
  const int64_t n = int64_t(x.size());
  for (tessera_dtype t : kBlockTypes) {
    SCOPED_TRACE(int(t));
    const size_t bytes = ref::storage_bytes(t, n);
    ASSERT_EQ(tessera_dtype_size(t, n), bytes);
    std::vector<uint8_t> want(bytes), got(bytes + 7, 0xAB);
    ref::quantize(t, n, x.data(), want.data());
    ASSERT_EQ(tessera_convert(TESSERA_F32, t, n, x.data(), got.data()), TESSERA_OK)
        << tessera_last_error();
    for (size_t i = 0; i < bytes; ++i)
      ASSERT_EQ(got[i], want[i]) << "byte " << i << " of block " << i / (bytes / size_t(n / 32));
    for (size_t i = bytes; i < got.size(); ++i) ASSERT_EQ(got[i], 0xAB) << "wrote past the blocks";
    std::vector<float> back(static_cast<size_t>(n)), ref_back(static_cast<size_t>(n));
    ASSERT_EQ(tessera_convert(t, TESSERA_F32, n, got.data(), back.data()), TESSERA_OK);
    ref::dequantize(t, n, want.data(), ref_back.data());
    ASSERT_EQ(std::memcmp(back.data(), ref_back.data(), back.size() * 4), 0);
  }
}

// ggml's layouts, by hand: a q8_0 block of 0, 1, ..., 31 (d = 31 / 127), a q4_0 block whose
// largest value is -8 (d = 1: n = x + 8).
// A build with TESSERA_QUANTIZED=OFF: every call that would read or write a block type is
// TESSERA_UNSUPPORTED, naming the argument, and writes nothing.
TEST(QuantFormat, UnsupportedInABuildWithoutThem) {
  if (tt::block_types_built()) GTEST_SKIP() << "built with TESSERA_QUANTIZED=ON";
  std::vector<float> x(64, 1.0f), o(64, -7.0f);
  std::vector<uint8_t> y(68, 0xAB);
  EXPECT_EQ(tessera_convert(TESSERA_F32, TESSERA_Q4_0, 64, x.data(), y.data()),
            TESSERA_UNSUPPORTED);
  EXPECT_NE(std::string(tessera_last_error()).find("to = q4_0"), std::string::npos)
      << tessera_last_error();
  for (uint8_t b : y) ASSERT_EQ(b, 0xAB);
  tessera_attention_desc d;
  ASSERT_EQ(tessera_attention_desc_init(&d, 1, 1, 1, 1, 1, 32, 32), TESSERA_OK);
  d.v_type = TESSERA_Q8_0;
  EXPECT_EQ(tessera_attention(&d, x.data(), x.data(), y.data(), o.data()), TESSERA_UNSUPPORTED);
  EXPECT_NE(std::string(tessera_last_error()).find("desc->v_type"), std::string::npos)
      << tessera_last_error();
  for (float v : o) ASSERT_EQ(v, -7.0f);
}

TEST(QuantFormat, BlocksByHand) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j);
  uint8_t b8[34], b4[18];
  ref::quantize(TESSERA_Q8_0, 32, x, b8);
  uint16_t d;
  std::memcpy(&d, b8, 2);
  EXPECT_EQ(d, ref::f32_to_f16(31.0f / 127.0f));
  EXPECT_EQ(int8_t(b8[2 + 31]), 127);
  EXPECT_EQ(int8_t(b8[2 + 1]), int(std::round(1.0f * (1.0f / (31.0f / 127.0f)))));
  for (int j = 0; j < 32; ++j) x[j] = j == 3 ? -8.0f : float(j % 8) - 4.0f;
  ref::quantize(TESSERA_Q4_0, 32, x, b4);
  std::memcpy(&d, b4, 2);
  EXPECT_EQ(ref::f16_to_f32(d), 1.0f);
  EXPECT_EQ(b4[2 + 3] & 15, 0);                 // -8 + 8
  EXPECT_EQ(b4[2 + 0] & 15, 4);                 // x[0] = -4
  EXPECT_EQ(b4[2 + 0] >> 4, (16 % 8) - 4 + 8);  // x[16] = -4 in the high nibble of byte 0
  float nan_block[32] = {};
  nan_block[7] = std::numeric_limits<float>::infinity();
  ref::quantize(TESSERA_Q8_0, 32, nan_block, b8);
  float back[32];
  ref::dequantize(TESSERA_Q8_0, 32, b8, back);
  for (float v : back) EXPECT_TRUE(std::isnan(v));
}

TEST(QuantFormat, ConvertRejectsPartialBlocksAndOtherPairs) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> y(256, 0x5A);
  EXPECT_EQ(tessera_convert(TESSERA_F32, TESSERA_Q8_0, 33, x.data(), y.data()),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_EQ(std::strncmp(tessera_last_error(), "n = 33", 6), 0) << tessera_last_error();
  EXPECT_EQ(tessera_convert(TESSERA_F16, TESSERA_Q4_0, 32, x.data(), y.data()),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_EQ(std::strncmp(tessera_last_error(), "from", 4), 0) << tessera_last_error();
  for (const auto& [from, to] :
       {std::pair{TESSERA_Q8_0, TESSERA_Q4_0}, std::pair{TESSERA_Q4_0, TESSERA_Q8_0},
        std::pair{TESSERA_Q8_0, TESSERA_F16}, std::pair{TESSERA_BF16, TESSERA_Q8_0}}) {
    EXPECT_EQ(tessera_convert(from, to, 32, x.data(), y.data()), TESSERA_INVALID_ARGUMENT)
        << from << " -> " << to;
    EXPECT_EQ(std::strncmp(tessera_last_error(), "from", 4), 0) << tessera_last_error();
  }
  for (uint8_t b : y) ASSERT_EQ(b, 0x5A);
  EXPECT_EQ(tessera_dtype_size(TESSERA_Q4_0, 31), 0u);
  EXPECT_EQ(tessera_dtype_size(TESSERA_Q4_0, 64), 36u);
  EXPECT_EQ(tessera_dtype_size(TESSERA_Q8_0, 64), 68u);
  EXPECT_EQ(tessera_dtype_size(tessera_dtype(9), 64), 0u);
}

// tessera.h: a block type converts to and from TESSERA_F32, and to itself as every type does:
// a copy of whole blocks (x == y allowed), n a multiple of 32.
TEST(QuantFormat, ConvertToItselfCopiesTheBlocks) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  for (const tessera_dtype t : kBlockTypes) {
    const auto x = tt::random_vec(96, 5);
    std::vector<uint8_t> blocks(tessera_dtype_size(t, 96)), copy(blocks.size(), 0x5A);
    ASSERT_EQ(tessera_convert(TESSERA_F32, t, 96, x.data(), blocks.data()), TESSERA_OK);
    ASSERT_EQ(tessera_convert(t, t, 96, blocks.data(), copy.data()), TESSERA_OK);
    EXPECT_EQ(copy, blocks);
    EXPECT_EQ(tessera_convert(t, t, 96, copy.data(), copy.data()), TESSERA_OK);  // in place
    EXPECT_EQ(copy, blocks);
    std::vector<uint8_t> untouched(blocks.size(), 0x5A);
    EXPECT_EQ(tessera_convert(t, t, 40, blocks.data(), untouched.data()), TESSERA_INVALID_ARGUMENT);
    EXPECT_EQ(std::strncmp(tessera_last_error(), "n = 40", 6), 0) << tessera_last_error();
    for (uint8_t b : untouched) ASSERT_EQ(b, 0x5A);
  }
}

// Descriptor option `option` (0-6) of the lattice below. (ALiBi over thousands of keys adds
// scores of ~1000, whose float32 rounding alone passes the tolerance: short K/V only.)
void set_option(AttentionTester& t, int option, int64_t kv_len) {
  switch (option) {
    case 1:
      t.causal(TESSERA_ALIGN_BOTTOM_RIGHT);
      break;
    case 2:
      t.window(5, 3).align(TESSERA_ALIGN_BOTTOM_RIGHT).with_kv_lens();
      break;
    case 3:
      t.with_bias(false).causal(TESSERA_ALIGN_TOP_LEFT);
      break;
    case 4:
      t.with_mask();
      if (kv_len <= 1000) t.with_alibi();
      break;
    case 5:
      t.softcap(5.0f).scale(0.3f).bshd();
      break;
    case 6:
      t.causal(TESSERA_ALIGN_BOTTOM_RIGHT).with_kv_lens().bshd();
      break;
  }
}

// The exact path: every pair of K/V types with a block type among them, decode (one and few
// rows, split-KV) and prefill (packed tiles), against the reference on the dequantized K/V and
// the rounded queries, at the float32 tolerance.
TEST_P(Quant, AttentionAgainstTheReferenceOnTheStoredValues) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  constexpr tessera_dtype kTypes[] = {TESSERA_F32, TESSERA_F16, TESSERA_Q8_0, TESSERA_Q4_0};
  uint32_t seed = 1;
  for (tessera_dtype kt : kTypes)
    for (tessera_dtype vt : kTypes) {
      if (!AttentionProblem::block(kt) && !AttentionProblem::block(vt)) continue;
#ifdef TESSERA_LIGHT_SWEEPS
      // Under qemu and the sanitizers: each block type's K and V loaders, beside a block type and
      // beside the two others once (6 of the 12 pairs).
      const bool fk = !AttentionProblem::block(kt), fv = !AttentionProblem::block(vt);
      if ((fk && kt != TESSERA_F16) || (fv && vt != TESSERA_F32) || (fk && vt != TESSERA_Q8_0) ||
          (fv && kt != TESSERA_Q4_0))
        continue;
#endif
      // q_len, kv_len, q_heads, kv_heads, head_dim, value_dim
      for (const auto& s : {std::array<int64_t, 6>{1, 700, 8, 2, 64, 64},
                            std::array<int64_t, 6>{1, 3000, 4, 1, 128, 96},
                            std::array<int64_t, 6>{3, 300, 4, 1, 32, 32},
                            std::array<int64_t, 6>{65, 301, 2, 2, 64, 32}})
        for (int option = 0; option < 7; ++option) {
          if (s[1] == 3000 && option % 3 != 0) continue;  // the long rows: options 0, 3 and 6
#ifdef TESSERA_LIGHT_SWEEPS
          // Every option on every shape once over two pairs: each pair half of them, in turn.
          if ((option + int(kt) + int(vt)) % 2 != 0 && s[1] != 3000) continue;
#endif
          SCOPED_TRACE(testing::Message() << "k " << kt << " v " << vt << " q_len " << s[0]
                                          << " kv_len " << s[1] << " option " << option);
          AttentionTester t(2, s[2], s[3], s[0], s[1], s[4], s[5]);
          t.kv_types(kt, vt);
          set_option(t, option, s[1]);
          if (seed % 2) t.with_lse();
          t.test(1e-5, seed++);
          if (HasFatalFailure()) return;
        }
    }
}

}  // namespace

namespace {

// A block-type K/V's rows are read in blocks: a stride that splits one is rejected, naming it,
// and o untouched.
TEST(QuantFormat, AttentionRejectsStridesThatSplitBlocks) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  tessera_attention_desc d;
  ASSERT_EQ(tessera_attention_desc_init(&d, 1, 2, 1, 4, 8, 32, 32), TESSERA_OK);
  d.k_type = TESSERA_Q8_0;
  d.k_stride[2] = 48;  // rows of 32 values 48 apart: the second row starts mid-block
  std::vector<float> q(2 * 4 * 32, 1.0f), o(q.size(), 42.0f), v(8 * 32, 1.0f);
  std::vector<uint8_t> k(8 * 48 / 32 * 34 + 34);
  EXPECT_EQ(tessera_attention(&d, q.data(), k.data(), v.data(), o.data()),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_EQ(std::strncmp(tessera_last_error(), "desc->k_stride[2]", 17), 0) << tessera_last_error();
  for (float x : o) ASSERT_EQ(x, 42.0f);
}

}  // namespace

namespace {

class QuantLayer : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(QuantLayer);

// The layer with a q8_0 / q4_0 cache, prepared and one-shot: a prefill then decode steps. Each
// output against the reference over the cache as the layer wrote it (the float32 tolerance);
// the appended rows within a quantization step of the reference's own (a float32 projection
// may round across a step where the double one does not). Without and with the rotation (keys
// by blocks of 32, and keys and values by 16).
TEST_P(QuantLayer, BlockCachesAgainstTheReference) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  const int64_t B = 2, M = 128, H = 4, T = 9, P = 5;
  for (tessera_dtype ct : kBlockTypes)
    for (int rotation = 0; rotation < 3; ++rotation)
      for (bool prepared : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << "cache " << ct << " prepared " << prepared << " rotation " << rotation);
        tessera::MhaDesc full;
        ASSERT_EQ(tessera::mha_desc_init(full, B, T, T, M, H), Status::ok);
        full.kv_heads = 2, full.value_dim = 64, full.causal = 1, full.cache_type = ct;
        full.hadamard = rotation == 0 ? 0 : rotation == 1 ? 32 : 16;
        full.hadamard_v = rotation == 2;
        const auto wq = tt::random_vec(size_t(M * H * 32), 1, -0.2f, 0.2f);
        const auto wk = tt::random_vec(size_t(M * 2 * 32), 2, -0.2f, 0.2f);
        const auto wv = tt::random_vec(size_t(M * 2 * 64), 3, -0.2f, 0.2f);
        const auto wo = tt::random_vec(size_t(H * 64 * M), 4, -0.2f, 0.2f);
        const auto bk = tt::random_vec(size_t(2 * 32), 5);
        full.w_q = wq.data(), full.w_k = wk.data(), full.w_v = wv.data(), full.w_o = wo.data();
        full.b_k = bk.data();
        tessera::MhaLayer layer;
        if (prepared) {
          ASSERT_EQ(layer.init(full), Status::ok) << tessera::last_error();
        }
        const auto x = tt::random_vec(size_t(B * T * M), 7);
        const size_t kbytes = ref::storage_bytes(ct, B * 2 * T * 32);
        const size_t vbytes = ref::storage_bytes(ct, B * 2 * T * 64);
        std::vector<uint8_t> kc(kbytes, 0), vc(vbytes, 0);
        for (int64_t pos = 0; pos < T;) {
          const int64_t step = pos == 0 ? P : 1;
          tessera::MhaDesc d = full;
          d.q_len = d.kv_len = step;
          d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = T, d.cache_len = pos;
          std::vector<float> xs(size_t(B * step * M)), out(xs.size(), tt::kNaN);
          for (int64_t b = 0; b < B; ++b)
            std::copy_n(&x[size_t((b * T + pos) * M)], step * M, &xs[size_t(b * step * M)]);
          std::vector<uint8_t> rk = kc, rv = vc;  // the reference appends to copies
          ASSERT_EQ(prepared ? layer.forward(d, xs.data(), xs.data(), xs.data(), out.data())
                             : tessera::mha_forward(d, xs.data(), xs.data(), out.data()),
                    Status::ok)
              << tessera::last_error();
          tessera::MhaDesc r = d;
          r.k_cache = rk.data(), r.v_cache = rv.data();
          std::vector<float> want(out.size());
          ref::mha_forward(r, xs.data(), xs.data(), want.data());
          // Appended rows: the same values within one step of the block's scale (and more than a
          // few of them bit for bit).
          for (const bool vside : {false, true}) {
            const int64_t dim = vside ? 64 : 32;
            const auto& got = vside ? vc : kc;
            const auto& exp = vside ? rv : rk;
            for (int64_t bh = 0; bh < B * 2; ++bh)
              for (int64_t t = pos; t < pos + step; ++t) {
                const int64_t at = (bh * T + t) * dim;
                std::vector<float> g(static_cast<size_t>(dim)), e(static_cast<size_t>(dim));
                ref::dequantize(ct, dim, got.data() + ref::storage_bytes(ct, at), g.data());
                ref::dequantize(ct, dim, exp.data() + ref::storage_bytes(ct, at), e.data());
                for (int64_t c = 0; c < dim; ++c) {
                  const uint8_t* blk = exp.data() + ref::storage_bytes(ct, at + c / 32 * 32);
                  uint16_t h;
                  std::memcpy(&h, blk, 2);
                  const float step_size = std::fabs(ref::f16_to_f32(h)) * 1.01f + 1e-6f;
                  ASSERT_LE(std::fabs(g[size_t(c)] - e[size_t(c)]), step_size)
                      << (vside ? "v" : "k") << " row " << t << " value " << c;
                }
              }
          }
          // The output against the reference over the layer's own cache.
          r.k_cache = kc.data(), r.v_cache = vc.data();
          std::vector<uint8_t> kc2 = kc, vc2 = vc;
          r.k_cache = kc2.data(), r.v_cache = vc2.data();
          r.cache_len = pos + step, r.kv_len = 0;
          ref::mha_forward(r, xs.data(), xs.data(), want.data());
          EXPECT_LE(tt::rel_err(out, want), 2e-5) << "position " << pos;
          pos += step;
        }
      }
}

}  // namespace

namespace {

// ---- the error users plan with ----------------------------------------------------------------

// Gaussian q, k, v; `outliers`: four channels of K 20 times the rest (as LLM keys have).
void make_data(int64_t heads, int64_t kv_heads, int64_t q_len, int64_t kv_len, int64_t d,
               bool outliers, std::vector<float>& q, std::vector<float>& k, std::vector<float>& v) {
  std::mt19937 gen(17);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  q.resize(size_t(heads * q_len * d)), k.resize(size_t(kv_heads * kv_len * d)), v.resize(k.size());
  for (auto& x : q) x = n01(gen);
  for (auto& x : v) x = n01(gen);
  for (size_t i = 0; i < k.size(); ++i) {
    const int64_t c = int64_t(i) % d;
    k[i] = n01(gen) * (outliers && (c == 3 || c == 17 || c == 40 || c == 77) ? 20.0f : 1.0f);
  }
}

const char* type_name(tessera_dtype t) {
  return t == TESSERA_Q8_0 ? "q8_0" : t == TESSERA_Q4_0 ? "q4_0" : t == TESSERA_F16 ? "f16" : "f32";
}

// One problem (Gaussian data, or with K's outlier channels) and the reference's result on it.
struct Unquantized {
  static constexpr int64_t heads = 4, kv_heads = 2, d = 128;
  int64_t q_len, kv_len;
  std::vector<float> q, k, v, exact;
  Unquantized(int64_t ql, int64_t kvl, bool outliers) : q_len(ql), kv_len(kvl) {
    make_data(heads, kv_heads, q_len, kv_len, d, outliers, q, k, v);
    exact.resize(q.size());
    ref::attention(desc(), q.data(), k.data(), v.data(), exact.data());
  }
  tessera_attention_desc desc() const {
    tessera_attention_desc a;
    EXPECT_EQ(tessera_attention_desc_init(&a, 1, heads, kv_heads, q_len, kv_len, d, d), TESSERA_OK);
    return a;
  }
};

// Relative RMS of Tessera's output over K/V stored as kt / vt (rotated first when `hadamard`)
// against the reference on the unquantized float32 inputs: sqrt(sum err^2 / sum exact^2).
double relative_rms(const Unquantized& u, tessera_dtype kt, tessera_dtype vt, bool hadamard) {
  const int64_t d = Unquantized::d, rows = Unquantized::kv_heads * u.kv_len;
  tessera_attention_desc desc = u.desc();
  std::vector<float> k = u.k, v = u.v, got(u.q.size(), tt::kNaN);
  if (hadamard) {  // H is orthonormal and its own inverse: the exact result is unchanged
    desc.hadamard = d, desc.hadamard_v = 1;
    EXPECT_EQ(tessera_hadamard(rows, d, d, k.data(), d, k.data(), d), TESSERA_OK);
    EXPECT_EQ(tessera_hadamard(rows, d, d, v.data(), d, v.data(), d), TESSERA_OK);
  }
  auto store = [](tessera_dtype t, const std::vector<float>& x) {
    std::vector<uint8_t> out(tessera_dtype_size(t, int64_t(x.size())));
    EXPECT_EQ(tessera_convert(TESSERA_F32, t, int64_t(x.size()), x.data(), out.data()), TESSERA_OK);
    return out;
  };
  const std::vector<uint8_t> ks = store(kt, k), vs = store(vt, v);
  desc.k_type = kt, desc.v_type = vt;
  EXPECT_EQ(tessera_attention(&desc, u.q.data(), ks.data(), vs.data(), got.data()), TESSERA_OK)
      << tessera_last_error();
  double err = 0, ref_sq = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = double(got[i]) - u.exact[i];
    err += std::isfinite(e) ? e * e : std::numeric_limits<double>::infinity();
    ref_sq += double(u.exact[i]) * u.exact[i];
  }
  return std::sqrt(err / ref_sq);
}

// tessera.h's table: the relative RMS stated per K/V type pair and data (Gaussian; four
// outlier channels of K at 20x), without and with `hadamard` (= head_dim, V rotated too); each
// the measured worst over decode and prefill on every table, times 1.25.
struct StatedError {
  tessera_dtype k, v;
  double gaussian, outliers, gaussian_h, outliers_h;
};
constexpr StatedError kStated[] = {
    {TESSERA_Q8_0, TESSERA_Q8_0, 0.012, 0.057, 0.012, 0.035},
    {TESSERA_Q8_0, TESSERA_F16, 0.010, 0.057, 0.010, 0.035},
    {TESSERA_F16, TESSERA_Q8_0, 0.007, 0.0075, 0.007, 0.007},
    {TESSERA_Q4_0, TESSERA_Q4_0, 0.16, 0.77, 0.16, 0.49},
    {TESSERA_Q4_0, TESSERA_F16, 0.12, 0.77, 0.11, 0.49},
    {TESSERA_F16, TESSERA_Q4_0, 0.11, 0.11, 0.11, 0.11},
    {TESSERA_Q4_0, TESSERA_Q8_0, 0.12, 0.77, 0.11, 0.49},
};

}  // namespace

}  // namespace quant_test

// On the active table: decode (one query, 2048 keys) and prefill (64 queries, 256 keys) within
// the stated relative RMS of the unquantized result. An output of zeros is 1.0. A mutant's run
// stops at its first failure.
void testers::quant_accuracy(bool until_first_failure) {
  using namespace quant_test;
  bool failed = false;
  for (const bool outliers : {false, true})
    for (const auto& qk : {std::array<int64_t, 2>{1, 2048}, std::array<int64_t, 2>{64, 256}}) {
      const Unquantized u(qk[0], qk[1], outliers);
      for (const StatedError& st : kStated)
        for (const bool hadamard : {false, true}) {
          if (failed && until_first_failure) return;
          const double got = relative_rms(u, st.k, st.v, hadamard);
          const double limit = hadamard ? (outliers ? st.outliers_h : st.gaussian_h)
                                        : (outliers ? st.outliers : st.gaussian);
          std::printf("[ %s ] K/V %s/%s %s%s q %lld kv %lld: relative RMS %.3e (stated %.1e)\n",
                      tessera::isa_name(), type_name(st.k), type_name(st.v),
                      outliers ? "outliers" : "gaussian", hadamard ? " hadamard" : "",
                      (long long)qk[0], (long long)qk[1], got, limit);
          failed |= !(got <= limit);
          EXPECT_LE(got, limit) << type_name(st.k) << "/" << type_name(st.v)
                                << (outliers ? " outliers" : " gaussian")
                                << (hadamard ? " hadamard" : "") << " q_len " << qk[0];
        }
    }
}

namespace quant_test {

namespace {

TEST_P(Quant, OutputWithinTheStatedRelativeRmsOfTheUnquantizedResult) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  testers::quant_accuracy(false);
}

}  // namespace

}  // namespace quant_test
