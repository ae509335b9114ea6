// The batched Bahdanau step (tessera::additive_attention_batch) against the reference on every
// kernel table: odd sizes across the 128-key score blocks, valid lengths from 0 to full, the
// same result on any thread count, no allocation in the steady state, and the argument checks.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tessera/layers.hpp"
#include "tessera/reference.hpp"
#include "tessera/tessera.h"
#include "test_util.hpp"
#include "testers.hpp"

namespace additive_batch_test {

using tessera::Status;
namespace ref = tessera::reference;

namespace {

struct Case {
  int64_t batch, len, enc_dim, dec_dim, attn;
};

struct Data {
  std::vector<float> enc, keys, dec, w_dec, v;
  std::vector<int32_t> lens;
  Data(const Case& c, uint32_t seed)
      : enc(tt::random_vec(size_t(c.batch * c.len * c.enc_dim), seed)),
        keys(tt::random_vec(size_t(c.batch * c.len * c.attn), seed + 1)),
        dec(tt::random_vec(size_t(c.batch * c.dec_dim), seed + 2)),
        w_dec(tt::random_vec(size_t(c.dec_dim * c.attn), seed + 3, -0.3f, 0.3f)),
        v(tt::random_vec(size_t(c.attn), seed + 4)) {
    // Lengths 0, full and in between (a padded batch).
    for (int64_t b = 0; b < c.batch; ++b)
      lens.push_back(int32_t(b == 0 ? c.len : b == 1 ? 0 : (c.len * (b + 1)) / (c.batch + 1)));
  }
};

class AdditiveBatch : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(AdditiveBatch);

void odd_sizes_against_reference() {
  const Case cases[] = {{1, 1, 1, 1, 1},     {3, 3, 17, 3, 17},    {3, 17, 63, 17, 65},
                        {4, 63, 65, 17, 3},  {3, 65, 17, 63, 256}, {3, 130, 33, 16, 17},
                        {2, 257, 16, 8, 64}, {5, 129, 3, 1, 1}};
  uint32_t seed = 1;
  for (const Case& c : cases)
    for (bool with_lens : {false, true}) {
      const Data d(c, seed++);
      const int32_t* lens = with_lens ? d.lens.data() : nullptr;
      std::vector<float> ctx(size_t(c.batch * c.enc_dim), tt::kNaN),
          w(size_t(c.batch * c.len), tt::kNaN), rctx(ctx.size()), rw(w.size());
      ASSERT_EQ(tessera::additive_attention_batch(c.batch, c.len, c.enc_dim, c.dec_dim, c.attn,
                                                  d.enc.data(), d.keys.data(), lens, d.dec.data(),
                                                  d.w_dec.data(), d.v.data(), ctx.data(), w.data()),
                Status::ok)
          << tessera_last_error();
      ref::additive_attention_batch(c.batch, c.len, c.enc_dim, c.dec_dim, c.attn, d.enc.data(),
                                    d.keys.data(), lens, d.dec.data(), d.w_dec.data(), d.v.data(),
                                    rctx.data(), rw.data());
      EXPECT_LE(tt::rel_err(ctx, rctx), 1e-5) << "len " << c.len << " attn " << c.attn;
      EXPECT_LE(tt::rel_err(w, rw), 1e-5) << "len " << c.len << " attn " << c.attn;
      // weights may be NULL; the context is the same.
      std::vector<float> ctx2(ctx.size());
      ASSERT_EQ(tessera::additive_attention_batch(c.batch, c.len, c.enc_dim, c.dec_dim, c.attn,
                                                  d.enc.data(), d.keys.data(), lens, d.dec.data(),
                                                  d.w_dec.data(), d.v.data(), ctx2.data()),
                Status::ok);
      EXPECT_EQ(std::memcmp(ctx.data(), ctx2.data(), ctx.size() * 4), 0);
      if (::testing::Test::HasFailure()) return;
    }
}

TEST_P(AdditiveBatch, OddSizesAgainstReference) { odd_sizes_against_reference(); }

// A state of the batch equals the same state alone (its own sequence, its own length).
TEST_P(AdditiveBatch, EachStateIndependentOfTheOthers) {
  const Case c{4, 200, 24, 16, 48};
  const Data d(c, 77);
  std::vector<float> ctx(size_t(c.batch * c.enc_dim)), w(size_t(c.batch * c.len));
  ASSERT_EQ(tessera::additive_attention_batch(
                c.batch, c.len, c.enc_dim, c.dec_dim, c.attn, d.enc.data(), d.keys.data(),
                d.lens.data(), d.dec.data(), d.w_dec.data(), d.v.data(), ctx.data(), w.data()),
            Status::ok);
  for (int64_t b = 0; b < c.batch; ++b) {
    std::vector<float> one(size_t(c.enc_dim)), w1(size_t(c.len));
    ASSERT_EQ(tessera::additive_attention_batch(
                  1, c.len, c.enc_dim, c.dec_dim, c.attn, d.enc.data() + b * c.len * c.enc_dim,
                  d.keys.data() + b * c.len * c.attn, d.lens.data() + b,
                  d.dec.data() + b * c.dec_dim, d.w_dec.data(), d.v.data(), one.data(), w1.data()),
              Status::ok);
    // (The query GEMM of one row may take another kernel than that of four: not bitwise.)
    EXPECT_LE(tt::rel_err(one.data(), ctx.data() + b * c.enc_dim, one.size()), 1e-6) << b;
    EXPECT_LE(tt::rel_err(w1.data(), w.data() + b * c.len, w1.size()), 1e-6) << b;
  }
}

TEST_P(AdditiveBatch, SameOnAnyThreadCount) {
  const Case c{3, 700, 40, 24, 96};
  const Data d(c, 5);
  std::vector<float> c1(size_t(c.batch * c.enc_dim)), c2(c1.size());
  for (auto* out : {&c1, &c2}) {
    ASSERT_EQ(tessera::set_num_threads(out == &c1 ? 1 : 2), Status::ok);
    ASSERT_EQ(tessera::additive_attention_batch(
                  c.batch, c.len, c.enc_dim, c.dec_dim, c.attn, d.enc.data(), d.keys.data(),
                  d.lens.data(), d.dec.data(), d.w_dec.data(), d.v.data(), out->data()),
              Status::ok);
  }
  tessera::set_num_threads(0);
  EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * 4), 0);
}

TEST(AdditiveBatchApi, BadArgumentsNameTheArgumentAndWriteNothing) {
  const Case c{2, 5, 4, 3, 6};
  const Data d(c, 9);
  std::vector<float> ctx(size_t(c.batch * c.enc_dim), 42.0f), w(size_t(c.batch * c.len), 42.0f);
  const auto call = [&](int64_t batch, const int32_t* lens, const float* v, float* context) {
    return tessera_additive_attention_batch(batch, c.len, c.enc_dim, c.dec_dim, c.attn,
                                            d.enc.data(), d.keys.data(), lens, d.dec.data(),
                                            d.w_dec.data(), v, context, w.data());
  };
  const int32_t too_long[2] = {5, 6}, negative[2] = {-1, 0};
  EXPECT_EQ(call(-1, nullptr, d.v.data(), ctx.data()), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tessera_last_error(), "batch"), nullptr) << tessera_last_error();
  EXPECT_EQ(call(2, too_long, d.v.data(), ctx.data()), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tessera_last_error(), "enc_lens[1]"), nullptr) << tessera_last_error();
  EXPECT_EQ(call(2, negative, d.v.data(), ctx.data()), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tessera_last_error(), "enc_lens[0]"), nullptr) << tessera_last_error();
  EXPECT_EQ(call(2, nullptr, nullptr, ctx.data()), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tessera_last_error(), "v"), nullptr) << tessera_last_error();
  EXPECT_EQ(call(2, nullptr, d.v.data(), w.data() + 1), TESSERA_INVALID_ARGUMENT);  // overlap
  EXPECT_NE(std::strstr(tessera_last_error(), "overlap"), nullptr) << tessera_last_error();
  for (float x : ctx) EXPECT_EQ(x, 42.0f);
  for (float x : w) EXPECT_EQ(x, 42.0f);
}

}  // namespace

}  // namespace additive_batch_test

// The batched step over odd sizes and valid lengths, and the one-shot and keys-then-step forms,
// against the reference.
void testers::additive_ops() {
  using namespace additive_batch_test;
  odd_sizes_against_reference();
  const int64_t L = 37, E = 24, Dd = 18, A = 13;
  const auto enc = tt::random_vec(L * E, 1), dec = tt::random_vec(Dd, 2);
  const auto we = tt::random_vec(E * A, 3), wd = tt::random_vec(Dd * A, 4),
             v = tt::random_vec(A, 5);
  std::vector<float> ctx(E), w(L), ctx2(E), w2(L), keys(L * A), rctx(E), rw(L);
  ASSERT_EQ(tessera::additive_attention(L, E, Dd, A, enc.data(), dec.data(), we.data(), wd.data(),
                                        v.data(), ctx.data(), w.data()),
            Status::ok);
  ASSERT_EQ(tessera::additive_keys(L, E, A, enc.data(), we.data(), keys.data()), Status::ok);
  ASSERT_EQ(tessera::additive_attention_step(L, E, Dd, A, enc.data(), keys.data(), dec.data(),
                                             wd.data(), v.data(), ctx2.data(), w2.data()),
            Status::ok);
  ref::additive_attention(L, E, Dd, A, enc.data(), dec.data(), we.data(), wd.data(), v.data(),
                          rctx.data(), rw.data());
  EXPECT_LE(tt::rel_err(ctx, ctx2), 1e-6);
  EXPECT_LE(tt::rel_err(w, w2), 1e-6);
  EXPECT_LE(tt::rel_err(ctx, rctx), 1e-5);
  EXPECT_LE(tt::rel_err(w, rw), 1e-5);
  EXPECT_LE(tt::rel_err(ctx2, rctx), 1e-5);
  EXPECT_LE(tt::rel_err(w2, rw), 1e-5);
  double sum = 0;
  for (float x : w) sum += x;
  EXPECT_NEAR(sum, 1.0, 1e-5);
  // weights may be NULL.
  EXPECT_EQ(tessera::additive_attention(L, E, Dd, A, enc.data(), dec.data(), we.data(), wd.data(),
                                        v.data(), ctx2.data(), nullptr),
            Status::ok);
  EXPECT_EQ(ctx, ctx2);
}
