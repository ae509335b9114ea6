// The multi-head attention layer with 16-bit weights and a 16-bit KV cache, every pair of types,
// against reference::mha_forward reading the same stored values: GQA, biases, causal with a
// window, value_dim != head_dim, cross attention, one and several new tokens on a cache already
// holding some.
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "tessera/layers.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"

namespace mha_types_test {

namespace {

using tessera::Status;
namespace ref = tessera::reference;

class MhaTypes : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(MhaTypes);

// An array of float values stored as `t` (rounded to nearest even).
struct Stored {
  tessera_dtype t;
  std::vector<char> bytes;
  Stored(const std::vector<float>& x, tessera_dtype type) : t(type) {
    bytes.resize(x.size() * (t == TESSERA_F32 ? 4 : 2));
    for (size_t i = 0; i < x.size(); ++i) ref::store_element(t, bytes.data(), int64_t(i), x[i]);
  }
  float at(size_t i) const { return ref::element(t, bytes.data(), int64_t(i)); }
  size_t size() const { return bytes.size() / (t == TESSERA_F32 ? 4 : 2); }
};

// The largest difference of two 16-bit arrays in units of the type's relative spacing (2^-10 or
// 2^-7 of the larger magnitude): at most 1 where they differ by one rounding.
double ulps(const Stored& a, const Stored& b) {
  const double eps = a.t == TESSERA_F16 ? 0x1p-10 : 0x1p-7;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a.at(i), y = b.at(i);
    const double mag = std::max({std::fabs(x), std::fabs(y), 1e-4});
    worst = std::max(worst, std::fabs(x - y) / (eps * mag));
  }
  return worst;
}

struct Case {
  int64_t step;
  bool cross;
};

void run_case(tessera_dtype wt, tessera_dtype ct, const Case& c, uint32_t seed) {
  tessera::MhaDesc d;
  ASSERT_EQ(tessera::mha_desc_init(d, 2, c.step, c.step, 24, 4), Status::ok);
  d.kv_heads = 2, d.value_dim = 5, d.causal = c.cross ? 0 : 1, d.window_left = 6;
  if (c.cross) d.kv_in_dim = 9;
  d.weight_type = wt, d.cache_type = ct;
  const float s = 0.3f;
  const Stored wq(tt::random_vec(size_t(24 * 4 * 6), seed, -s, s), wt);
  const Stored wk(tt::random_vec(size_t(d.kv_in_dim * 2 * 6), seed + 1, -s, s), wt);
  const Stored wv(tt::random_vec(size_t(d.kv_in_dim * 2 * 5), seed + 2, -s, s), wt);
  const Stored wo(tt::random_vec(size_t(4 * 5 * 24), seed + 3, -s, s), wt);
  const auto bq = tt::random_vec(24, seed + 4), bk = tt::random_vec(12, seed + 5);
  const auto bv = tt::random_vec(10, seed + 6), bo = tt::random_vec(24, seed + 7);
  d.w_q = wq.bytes.data(), d.w_k = wk.bytes.data(), d.w_v = wv.bytes.data();
  d.w_o = wo.bytes.data(), d.b_q = bq.data(), d.b_k = bk.data(), d.b_v = bv.data();
  d.b_o = bo.data();
  const int64_t cap = 16, held = 9;
  Stored kc(tt::random_vec(size_t(2 * 2 * cap * 6), seed + 8), ct);
  Stored vc(tt::random_vec(size_t(2 * 2 * cap * 5), seed + 9), ct);
  Stored ref_kc = kc, ref_vc = vc;
  d.cache_capacity = cap, d.cache_len = held;
  const auto xq = tt::random_vec(size_t(2 * c.step * 24), seed + 10);
  const auto xkv = c.cross ? tt::random_vec(size_t(2 * c.step * 9), seed + 11) : xq;
  std::vector<float> out(size_t(2 * c.step * 24), tt::kNaN), want(out.size());

  // Without a cache: the same weights, the reference on the same stored values.
  tessera::MhaDesc plain = d;
  plain.k_cache = plain.v_cache = nullptr;
  ASSERT_EQ(tessera::mha_forward(plain, xq.data(), xkv.data(), out.data()), Status::ok)
      << tessera::last_error();
  ref::mha_forward(plain, xq.data(), xkv.data(), want.data());
  EXPECT_LE(tt::rel_err(out, want), 1e-5) << "no cache";

  // With the cache: the appended rows are the reference's within one rounding of the cache's
  // type (the projections' float32 sums may round either side of a halfway point), and the
  // output is the reference's over the cache as the layer left it.
  d.k_cache = kc.bytes.data(), d.v_cache = vc.bytes.data();
  ASSERT_EQ(tessera::mha_forward(d, xq.data(), xkv.data(), out.data()), Status::ok)
      << tessera::last_error();
  tessera::MhaDesc r = d;
  r.k_cache = ref_kc.bytes.data(), r.v_cache = ref_vc.bytes.data();
  ref::mha_forward(r, xq.data(), xkv.data(), want.data());
  for (const auto& [got, ref_rows] : {std::pair(&kc, &ref_kc), std::pair(&vc, &ref_vc)}) {
    if (ct == TESSERA_F32)
      EXPECT_LE(tt::rel_err(reinterpret_cast<const float*>(got->bytes.data()),
                            reinterpret_cast<const float*>(ref_rows->bytes.data()), got->size()),
                1e-5);
    else
      EXPECT_LE(ulps(*got, *ref_rows), 1.0) << (got == &kc ? "k_cache" : "v_cache");
  }
  Stored left_k = kc, left_v = vc;
  r.k_cache = left_k.bytes.data(), r.v_cache = left_v.bytes.data();
  r.kv_len = 0, r.cache_len = held + c.step;  // attend over the cache as the layer wrote it
  ref::mha_forward(r, xq.data(), xkv.data(), want.data());
  EXPECT_LE(tt::rel_err(out, want), 1e-5) << "cached";
}

TEST_P(MhaTypes, EveryWeightAndCacheTypeAgainstReference) {
  const tessera_dtype types[] = {TESSERA_F32, TESSERA_F16, TESSERA_BF16};
  uint32_t seed = 40;
  for (tessera_dtype wt : types)
    for (tessera_dtype ct : types)
      for (const Case& c : {Case{1, false}, Case{4, false}, Case{3, true}}) {
        SCOPED_TRACE(testing::Message() << "weights " << wt << " cache " << ct << " step " << c.step
                                        << (c.cross ? " cross" : ""));
        run_case(wt, ct, c, seed);
        seed += 13;
        if (HasFatalFailure()) return;
      }
}

TEST(MhaTypesApi, RejectsBadTypesAndWritesNothing) {
  tessera::MhaDesc d;
  ASSERT_EQ(tessera::mha_desc_init(d, 1, 1, 1, 8, 2), Status::ok);
  std::vector<float> w(64, 0.5f), x(8, 1.0f), out(8, 7.0f), kc(32, 3.0f), vc(32, 3.0f);
  d.w_q = d.w_k = d.w_v = d.w_o = w.data();
  d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = 4;
  for (int bad : {0, 1}) {
    tessera::MhaDesc b = d;
    (bad ? b.cache_type : b.weight_type) = tessera_dtype(7);
    EXPECT_EQ(tessera::mha_forward(b, x.data(), x.data(), out.data()), Status::invalid_argument);
    EXPECT_NE(std::string(tessera::last_error()).find(bad ? "cache_type" : "weight_type"),
              std::string::npos)
        << tessera::last_error();
    for (float o : out) EXPECT_EQ(o, 7.0f);
    for (float k : kc) EXPECT_EQ(k, 3.0f);
  }
}

}  // namespace

}  // namespace mha_types_test
