// The C API's argument contract: each bad argument gives TESSERA_INVALID_ARGUMENT, a message
// naming the argument, and no write to any output.
#include <cctype>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/tessera.h"
#include "test_util.hpp"

namespace api_test {

namespace {

constexpr float kSentinel = 42.0f;

// Does the message start by naming `arg` (as the caller spells it, or as a descriptor field
// "desc->arg"), followed by no further identifier character? A substring test would let "m",
// "k" or "a" match almost any message.
bool names(const std::string& message, const std::string& arg) {
  for (const std::string& name : {arg, "desc->" + arg}) {
    if (message.compare(0, name.size(), name) != 0) continue;
    const char next = message.size() > name.size() ? message[name.size()] : ' ';
    if (!std::isalnum(static_cast<unsigned char>(next)) && next != '_') return true;
  }
  return false;
}

// Expects the call to be rejected, naming `arg`, with `out` untouched.
#define EXPECT_REJECTED(call, arg, out)                                                         \
  do {                                                                                          \
    std::fill((out).begin(), (out).end(), kSentinel);                                           \
    EXPECT_EQ((call), TESSERA_INVALID_ARGUMENT) << #call;                                       \
    EXPECT_TRUE(names(tessera_last_error(), arg))                                               \
        << #call << ": message \"" << tessera_last_error() << "\" does not start with " << arg; \
    for (float x_ : (out)) ASSERT_EQ(x_, kSentinel) << #call << " wrote its output";            \
  } while (0)

// The same for a call with two outputs: both untouched.
#define EXPECT_REJECTED2(call, arg, out, out2)                                               \
  do {                                                                                       \
    std::fill((out2).begin(), (out2).end(), kSentinel);                                      \
    EXPECT_REJECTED(call, arg, out);                                                         \
    for (float x_ : (out2)) ASSERT_EQ(x_, kSentinel) << #call << " wrote its second output"; \
  } while (0)

TEST(CApi, RejectionMatcherNeedsTheWholeName) {
  EXPECT_TRUE(names("m = -1 must be >= 0", "m"));
  EXPECT_TRUE(names("desc->kv_lens[1] = 9 is outside", "kv_lens"));
  EXPECT_FALSE(names("n = -1 must be >= 0", "m"));     // another argument
  EXPECT_FALSE(names("mask = ...", "m"));              // a longer name that starts the same
  EXPECT_FALSE(names("packed holds a 4 x 4 B", "a"));  // the name elsewhere in the message
}

const tessera_transpose N = TESSERA_NO_TRANS, T = TESSERA_TRANS;

TEST(CApi, SgemmRejectsEachBadArgument) {
  std::vector<float> a(64, 1), b(64, 1), c(64);
  const float* A = a.data();
  const float* B = b.data();
  float* C = c.data();
  EXPECT_REJECTED(tessera_sgemm((tessera_transpose)7, N, 4, 4, 4, 1, A, 4, B, 4, 0, C, 4), "ta", c);
  EXPECT_REJECTED(tessera_sgemm(N, (tessera_transpose)-1, 4, 4, 4, 1, A, 4, B, 4, 0, C, 4), "tb",
                  c);
  EXPECT_REJECTED(tessera_sgemm(N, N, -1, 4, 4, 1, A, 4, B, 4, 0, C, 4), "m", c);
  EXPECT_REJECTED(tessera_sgemm(N, N, 4, -2, 4, 1, A, 4, B, 4, 0, C, 4), "n", c);
  EXPECT_REJECTED(tessera_sgemm(N, N, 4, 4, -3, 1, A, 4, B, 4, 0, C, 4), "k", c);
  EXPECT_REJECTED(tessera_sgemm(N, N, 4, 4, 5, 1, A, 4, B, 4, 0, C, 4), "lda", c);
  EXPECT_REJECTED(tessera_sgemm(T, N, 5, 4, 4, 1, A, 4, B, 4, 0, C, 5), "lda", c);
  EXPECT_REJECTED(tessera_sgemm(N, N, 4, 5, 4, 1, A, 4, B, 4, 0, C, 5), "ldb", c);
  EXPECT_REJECTED(tessera_sgemm(N, T, 4, 4, 5, 1, A, 5, B, 4, 0, C, 4), "ldb", c);
  EXPECT_REJECTED(tessera_sgemm(N, N, 4, 5, 4, 1, A, 4, B, 5, 0, C, 4), "ldc", c);
  EXPECT_REJECTED(tessera_sgemm(N, N, 4, 4, 4, 1, nullptr, 4, B, 4, 0, C, 4), "a", c);
  EXPECT_REJECTED(tessera_sgemm(N, N, 4, 4, 4, 1, A, 4, nullptr, 4, 0, C, 4), "b", c);
  EXPECT_EQ(tessera_sgemm(N, N, 4, 4, 4, 1, A, 4, B, 4, 0, nullptr, 4), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("c is NULL"), std::string::npos);
}

TEST(CApi, BatchedAndPackedRejectBadArguments) {
  std::vector<float> a(256, 1), b(256, 1), c(256);
  EXPECT_REJECTED(tessera_sgemm_strided_batched(N, N, 4, 4, 4, 1, a.data(), 4, 16, b.data(), 4, 16,
                                                0, c.data(), 4, 16, -1),
                  "batch", c);
  EXPECT_REJECTED(tessera_sgemm_strided_batched(N, N, 4, 4, 4, 1, a.data(), 4, -16, b.data(), 4, 16,
                                                0, c.data(), 4, 16, 2),
                  "stride_a", c);
  EXPECT_REJECTED(tessera_sgemm_strided_batched(N, N, 4, 4, 4, 1, a.data(), 4, 16, b.data(), 4, -1,
                                                0, c.data(), 4, 16, 2),
                  "stride_b", c);
  EXPECT_REJECTED(tessera_sgemm_strided_batched(N, N, 4, 4, 4, 1, a.data(), 4, 16, b.data(), 4, 16,
                                                0, c.data(), 4, 8, 2),
                  "stride_c", c);
  EXPECT_EQ(tessera_sgemm_pack_b_size(N, -1, 4), 0u);
  EXPECT_NE(std::string(tessera_last_error()).find("k"), std::string::npos);
  EXPECT_EQ(tessera_sgemm_pack_b_size((tessera_transpose)3, 4, 4), 0u);
  EXPECT_NE(std::string(tessera_last_error()).find("tb"), std::string::npos);
  std::vector<float> packed(tessera_sgemm_pack_b_size(N, 4, 4) / 4 + 1);
  const size_t bytes = packed.size() * 4;
  EXPECT_REJECTED(tessera_sgemm_pack_b(N, 4, 4, b.data(), 4, nullptr, bytes), "packed", packed);
  EXPECT_REJECTED(tessera_sgemm_pack_b(N, 4, 4, b.data(), 3, packed.data(), bytes), "ldb", packed);
  EXPECT_REJECTED(tessera_sgemm_pack_b(N, 4, 4, b.data(), 4, packed.data(), bytes - 8),
                  "packed_bytes", packed);
  ASSERT_EQ(tessera_sgemm_pack_b(N, 4, 4, b.data(), 4, packed.data(), bytes), TESSERA_OK);
  EXPECT_REJECTED(tessera_sgemm_packed(N, 4, 4, 4, 1, a.data(), 3, packed.data(), 0, c.data(), 4),
                  "lda", c);
  EXPECT_REJECTED(tessera_sgemm_packed(N, 4, 4, 4, 1, a.data(), 4, nullptr, 0, c.data(), 4),
                  "packed", c);
  EXPECT_REJECTED(tessera_sgemm_packed(N, 4, 3, 4, 1, a.data(), 4, packed.data(), 0, c.data(), 4),
                  "packed", c);
}

TEST(CApi, SoftmaxFamilyRejectsBadArguments) {
  std::vector<float> x(64, 1), y(64);
  EXPECT_REJECTED(tessera_softmax(-1, 4, x.data(), 4, y.data(), 4, 1), "rows", y);
  EXPECT_REJECTED(tessera_softmax(4, -4, x.data(), 4, y.data(), 4, 1), "cols", y);
  EXPECT_REJECTED(tessera_softmax(4, 4, x.data(), 3, y.data(), 4, 1), "ldx", y);
  EXPECT_REJECTED(tessera_softmax(4, 4, x.data(), 4, y.data(), 2, 1), "ldy", y);
  EXPECT_REJECTED(tessera_softmax(4, 4, nullptr, 4, y.data(), 4, 1), "x", y);
  EXPECT_REJECTED(tessera_softmax(4, 4, x.data(), 4, y.data(), 4, -tt::kInf), "scale", y);
  EXPECT_REJECTED(tessera_softmax(4, 4, x.data(), 4, y.data(), 4, tt::kNaN), "scale", y);
  EXPECT_REJECTED(tessera_log_softmax(4, 4, x.data(), 4, y.data(), 4, tt::kInf), "scale", y);
  EXPECT_REJECTED(tessera_log_softmax(4, 4, x.data(), 4, y.data(), 3, 1), "ldy", y);
  // Partial overlap (y is x shifted by one element) is rejected; exact in place is allowed.
  std::vector<float> xy(64, 1);
  EXPECT_EQ(tessera_softmax(4, 4, xy.data(), 4, xy.data() + 1, 4, 1), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("y overlaps x"), std::string::npos);
  for (float v : xy) EXPECT_EQ(v, 1.0f);
  EXPECT_EQ(tessera_softmax(4, 4, xy.data(), 4, xy.data(), 4, 1), TESSERA_OK);
  EXPECT_REJECTED(tessera_logsumexp(4, 4, x.data(), 4, 1, nullptr), "out", y);
  EXPECT_REJECTED(tessera_logsumexp(4, 4, x.data(), 4, tt::kInf, y.data()), "scale", y);
}

TEST(CApi, AttentionRejectsBadDescriptors) {
  tessera_attention_desc good;
  ASSERT_EQ(tessera_attention_desc_init(&good, 2, 4, 2, 8, 8, 16, 16), TESSERA_OK);
  std::vector<float> q(2 * 4 * 8 * 16, 1), k(2 * 2 * 8 * 16, 1), v(k), o(q.size()), lse(64);
  std::vector<int32_t> lens = {8, 9};
  struct Case {
    const char* arg;
    void (*mutate)(tessera_attention_desc&);
  };
  const Case cases[] = {
      {"batch", [](tessera_attention_desc& d) { d.batch = -1; }},
      {"q_heads", [](tessera_attention_desc& d) { d.q_heads = -4; }},
      {"kv_heads", [](tessera_attention_desc& d) { d.kv_heads = 0; }},
      // Heads that do not divide: the message names q_heads (and gives kv_heads).
      {"q_heads", [](tessera_attention_desc& d) { d.kv_heads = 3; }},
      {"q_heads", [](tessera_attention_desc& d) { d.q_heads = 5; }},
      {"q_len", [](tessera_attention_desc& d) { d.q_len = -1; }},
      {"kv_len", [](tessera_attention_desc& d) { d.kv_len = -8; }},
      {"head_dim", [](tessera_attention_desc& d) { d.head_dim = 0; }},
      {"value_dim", [](tessera_attention_desc& d) { d.value_dim = -1; }},
      {"scale", [](tessera_attention_desc& d) { d.scale = tt::kInf; }},
      {"q_stride", [](tessera_attention_desc& d) { d.q_stride[2] = -1; }},
      {"k_stride", [](tessera_attention_desc& d) { d.k_stride[0] = -1; }},
      {"v_stride", [](tessera_attention_desc& d) { d.v_stride[1] = -5; }},
      {"o_stride", [](tessera_attention_desc& d) { d.o_stride[2] = 8; }},  // rows overlap
      {"o_stride", [](tessera_attention_desc& d) { d.o_stride[1] = 0; }},  // heads alias
      {"causal", [](tessera_attention_desc& d) { d.causal = 2; }},
      {"align", [](tessera_attention_desc& d) { d.align = (tessera_align)9; }},
      {"window_left", [](tessera_attention_desc& d) { d.window_left = -2; }},
      {"window_right", [](tessera_attention_desc& d) { d.window_right = -3; }},
      {"softcap", [](tessera_attention_desc& d) { d.softcap = -1; }},
      {"k_type", [](tessera_attention_desc& d) { d.k_type = (tessera_dtype)5; }},
      // A block type needs whole blocks along the rows (head_dim 16 here).
      {"desc->head_dim", [](tessera_attention_desc& d) { d.k_type = TESSERA_Q8_0; }},
      {"desc->value_dim", [](tessera_attention_desc& d) { d.v_type = TESSERA_Q4_0; }},
      {"v_type", [](tessera_attention_desc& d) { d.v_type = (tessera_dtype)-1; }},
      {"bias_stride",
       [](tessera_attention_desc& d) {
         static const float bias[1] = {0};
         d.bias = bias;
         d.bias_stride[3] = -1;
       }},
      {"mask_stride",
       [](tessera_attention_desc& d) {
         static const uint8_t mask[1] = {1};
         d.mask = mask;
         d.mask_stride[0] = -1;
       }},
      {"alibi_slopes",
       [](tessera_attention_desc& d) {
         static const float slopes[4] = {1, 1, tt::kNaN, 1};
         d.alibi_slopes = slopes;
       }},
  };
  for (const Case& c : cases) {
    tessera_attention_desc d = good;
    c.mutate(d);
    EXPECT_REJECTED(tessera_attention(&d, q.data(), k.data(), v.data(), o.data()), c.arg, o);
  }
  tessera_attention_desc d = good;
  d.kv_lens = lens.data();  // 9 > kv_len
  EXPECT_REJECTED(tessera_attention(&d, q.data(), k.data(), v.data(), o.data()), "kv_lens[1]", o);
  d = good;
  d.lse = lse.data();
  EXPECT_REJECTED2(tessera_attention(&d, nullptr, k.data(), v.data(), o.data()), "q", lse, o);
  EXPECT_REJECTED2(tessera_attention(&d, q.data(), nullptr, v.data(), o.data()), "k", lse, o);
  EXPECT_REJECTED2(tessera_attention(&d, q.data(), k.data(), nullptr, o.data()), "v", lse, o);
  EXPECT_REJECTED(tessera_attention(nullptr, q.data(), k.data(), v.data(), o.data()), "desc", o);
  tessera_attention_desc untouched = good;
  EXPECT_EQ(tessera_attention_desc_init(&untouched, 1, 3, 2, 4, 4, 8, 8), TESSERA_INVALID_ARGUMENT);
  EXPECT_EQ(std::memcmp(&untouched, &good, sizeof good), 0) << "init wrote a rejected descriptor";
}

TEST(CApi, LayersRejectBadArguments) {
  std::vector<float> enc(64, 1), dec(8, 1), we(64, 1), wd(64, 1), v(8, 1), ctx(8);
  EXPECT_REJECTED(tessera_additive_attention(-1, 4, 4, 4, enc.data(), dec.data(), we.data(),
                                             wd.data(), v.data(), ctx.data(), nullptr),
                  "enc_len", ctx);
  EXPECT_REJECTED(tessera_additive_attention(4, 4, 4, -4, enc.data(), dec.data(), we.data(),
                                             wd.data(), v.data(), ctx.data(), nullptr),
                  "attn_dim", ctx);
  EXPECT_REJECTED(tessera_additive_attention(4, 4, 4, 4, enc.data(), dec.data(), nullptr, wd.data(),
                                             v.data(), ctx.data(), nullptr),
                  "w_enc", ctx);
  EXPECT_REJECTED(tessera_additive_attention_step(4, 4, 4, 4, enc.data(), nullptr, dec.data(),
                                                  wd.data(), v.data(), ctx.data(), nullptr),
                  "keys", ctx);
  EXPECT_REJECTED(tessera_additive_keys(4, -2, 4, enc.data(), we.data(), ctx.data()), "enc_dim",
                  ctx);

  tessera_mha_desc d;
  ASSERT_EQ(tessera_mha_desc_init(&d, 1, 2, 2, 4, 2), TESSERA_OK);
  std::vector<float> w(16, 0.1f), x(8, 1), out(8);
  d.w_q = d.w_k = d.w_v = d.w_o = w.data();
  tessera_mha_desc bad = d;
  bad.kv_heads = 3;
  EXPECT_REJECTED(tessera_mha_forward(&bad, x.data(), x.data(), out.data(), nullptr, 0), "q_heads",
                  out);
  bad = d;
  bad.w_o = nullptr;
  EXPECT_REJECTED(tessera_mha_forward(&bad, x.data(), x.data(), out.data(), nullptr, 0), "w_o",
                  out);
  bad = d;
  bad.k_cache = out.data();
  EXPECT_REJECTED(tessera_mha_forward(&bad, x.data(), x.data(), out.data(), nullptr, 0), "v_cache",
                  out);
  bad = d;
  bad.k_cache = bad.v_cache = w.data();
  bad.cache_capacity = 2, bad.cache_len = 1;
  EXPECT_REJECTED(tessera_mha_forward(&bad, x.data(), x.data(), out.data(), nullptr, 0),
                  "cache_capacity", out);
  std::vector<char> ws(8);
  EXPECT_REJECTED(tessera_mha_forward(&d, x.data(), x.data(), out.data(), ws.data(), ws.size()),
                  "workspace_bytes", out);
  EXPECT_REJECTED(tessera_mha_forward(&d, nullptr, x.data(), out.data(), nullptr, 0), "x_q", out);
  EXPECT_EQ(tessera_mha_desc_init(&d, 1, 2, 2, 5, 2), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("model_dim"), std::string::npos);
  size_t bytes = 0;
  EXPECT_EQ(tessera_mha_workspace_size(&d, nullptr), TESSERA_INVALID_ARGUMENT);
  EXPECT_EQ(tessera_mha_workspace_size(&d, &bytes), TESSERA_OK);
  EXPECT_GT(bytes, 0u);
}

TEST(CApi, PreparedLayerRejectsBadArguments) {
  tessera_mha_desc d;
  ASSERT_EQ(tessera_mha_desc_init(&d, 1, 2, 2, 4, 2), TESSERA_OK);
  std::vector<float> w(16, 0.1f), x(8, 1), x2(8, 2), out(8), lse(4);
  d.w_q = d.w_k = d.w_v = d.w_o = w.data();
  tessera_mha_layer* layer = nullptr;
  tessera_mha_desc bad = d;
  bad.w_k = nullptr;
  EXPECT_EQ(tessera_mha_create(&bad, &layer), TESSERA_INVALID_ARGUMENT);
  EXPECT_TRUE(names(tessera_last_error(), "desc->w_k")) << tessera_last_error();
  EXPECT_EQ(layer, nullptr);
  EXPECT_EQ(tessera_mha_create(&d, nullptr), TESSERA_INVALID_ARGUMENT);
  ASSERT_EQ(tessera_mha_create(&d, &layer), TESSERA_OK) << tessera_last_error();
  // The call's weight pointers are not read.
  tessera_mha_desc call = d;
  call.w_q = call.w_k = call.w_v = call.w_o = nullptr;
  EXPECT_EQ(tessera_mha_layer_forward(layer, &call, x.data(), x.data(), x2.data(), out.data(),
                                      nullptr, 0),
            TESSERA_OK)
      << tessera_last_error();
  bad = call;
  bad.head_dim = 1;
  EXPECT_REJECTED(
      tessera_mha_layer_forward(layer, &bad, x.data(), x.data(), x.data(), out.data(), nullptr, 0),
      "desc->head_dim", out);
  EXPECT_REJECTED(
      tessera_mha_layer_forward(layer, &call, x.data(), nullptr, x.data(), out.data(), nullptr, 0),
      "x_k", out);
  EXPECT_REJECTED(tessera_mha_layer_forward(nullptr, &call, x.data(), x.data(), x.data(),
                                            out.data(), nullptr, 0),
                  "layer", out);
  bad = call;
  bad.lse = out.data();  // lse may not overlap out
  EXPECT_REJECTED(
      tessera_mha_layer_forward(layer, &bad, x.data(), x.data(), x.data(), out.data(), nullptr, 0),
      "out", out);
  bad = call;
  bad.lse = x2.data();  // nor an input
  EXPECT_REJECTED(
      tessera_mha_layer_forward(layer, &bad, x.data(), x.data(), x2.data(), out.data(), nullptr, 0),
      "desc->lse", out);
  const int32_t too_long = 3;
  bad = call;
  bad.kv_lens = &too_long;
  EXPECT_REJECTED(
      tessera_mha_layer_forward(layer, &bad, x.data(), x.data(), x.data(), out.data(), nullptr, 0),
      "desc->kv_lens", out);
  bad = call;
  bad.softcap = -1;
  EXPECT_REJECTED(
      tessera_mha_layer_forward(layer, &bad, x.data(), x.data(), x.data(), out.data(), nullptr, 0),
      "desc->softcap", out);
  size_t bytes = 0;
  EXPECT_EQ(tessera_mha_layer_workspace_size(layer, &call, &bytes), TESSERA_OK);
  EXPECT_GT(bytes, 0u);
  EXPECT_EQ(tessera_mha_layer_workspace_size(layer, &call, nullptr), TESSERA_INVALID_ARGUMENT);
  tessera_mha_destroy(layer);
  tessera_mha_destroy(nullptr);
}

TEST(CApi, IntrospectionAndThreads) {
  EXPECT_STREQ(tessera_status_string(TESSERA_INVALID_ARGUMENT), "TESSERA_INVALID_ARGUMENT");
  EXPECT_STREQ(tessera_status_string(TESSERA_OK), "TESSERA_OK");
  EXPECT_TRUE(tessera_isa_supported(tessera_isa_name()));
  EXPECT_EQ(tessera_set_isa("no-such-isa"), TESSERA_UNSUPPORTED);
  EXPECT_NE(std::string(tessera_last_error()).find("name"), std::string::npos);
  EXPECT_EQ(tessera_set_num_threads(1), TESSERA_OK);
  EXPECT_EQ(tessera_set_num_threads(0), TESSERA_OK);
}

}  // namespace

// The library linked and the headers agree on the version, and the string is the numbers'.
TEST(Version, LibraryMatchesHeaders) {
  EXPECT_EQ(tessera_version_number(), TESSERA_VERSION);
  const std::string want = std::to_string(TESSERA_VERSION_MAJOR) + "." +
                           std::to_string(TESSERA_VERSION_MINOR) + "." +
                           std::to_string(TESSERA_VERSION_PATCH);
  EXPECT_EQ(std::string(tessera_version()), want);
}

}  // namespace api_test
