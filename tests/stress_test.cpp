// Eight application threads (four with a workspace bound) call every operation at once, checking
// each result against the reference, while another thread switches the kernel table and the thread
// cap and now and then releases all scratch. Run under ThreadSanitizer by scripts/test.sh (the tsan
// stage); elsewhere it checks the results alone.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tessera/reference.hpp"
#include "tessera/tessera.h"
#include "test_util.hpp"

namespace stress_test {

namespace {

const tessera_transpose N = TESSERA_NO_TRANS;

// One thread's round of every operation; false (with a message) on a wrong result.
bool round_of_everything(uint32_t seed, std::string& why) {
  // GEMM, plain and packed.
  const auto a = tt::random_vec(40 * 70, seed), b = tt::random_vec(70 * 50, seed + 1);
  std::vector<float> c(40 * 50), ref(c.size());
  if (tessera_sgemm(N, N, 40, 50, 70, 1, a.data(), 70, b.data(), 50, 0, c.data(), 50) != TESSERA_OK)
    return why = tessera_last_error(), false;
  tessera::reference::sgemm(tessera::Transpose::no_trans, tessera::Transpose::no_trans, 40, 50, 70,
                            1, a.data(), 70, b.data(), 50, 0, ref.data(), 50);
  if (tt::rel_err(c, ref) > 1e-5) return why = "sgemm", false;
  const size_t bytes = tessera_sgemm_pack_b_size(N, 70, 50);
  std::vector<float> packed(bytes / 4 + 1);
  const tessera_status ps = tessera_sgemm_pack_b(N, 70, 50, b.data(), 50, packed.data(), bytes);
  if (ps == TESSERA_OK) {
    // The table may change between packing and use: then the packed buffer is refused.
    const tessera_status s =
        tessera_sgemm_packed(N, 40, 50, 70, 1, a.data(), 70, packed.data(), 0, c.data(), 50);
    if (s == TESSERA_OK && tt::rel_err(c, ref) > 1e-5) return why = "sgemm_packed", false;
  }
  // Softmax, long rows included.
  const auto x = tt::random_vec(2 * 20000, seed + 2, -5, 5);
  std::vector<float> y(x.size()), yr(x.size());
  if (tessera_softmax(2, 20000, x.data(), 20000, y.data(), 20000, -0.5f) != TESSERA_OK)
    return why = tessera_last_error(), false;
  tessera::reference::softmax(2, 20000, x.data(), 20000, yr.data(), 20000, -0.5f);
  if (tt::rel_err(y, yr) > 1e-5) return why = "softmax", false;
  // Attention: prefill and split-KV decode.
  for (int64_t q_len : {1, 70}) {
    tessera_attention_desc d;
    tessera_attention_desc_init(&d, 1, 4, 2, q_len, 700, 32, 32);
    d.causal = 1, d.align = TESSERA_ALIGN_BOTTOM_RIGHT;
    const auto q = tt::random_vec(size_t(4 * q_len * 32), seed + 3);
    const auto k = tt::random_vec(2 * 700 * 32, seed + 4),
               v = tt::random_vec(2 * 700 * 32, seed + 5);
    std::vector<float> o(q.size()), ro(q.size());
    if (tessera_attention(&d, q.data(), k.data(), v.data(), o.data()) != TESSERA_OK)
      return why = tessera_last_error(), false;
    tessera::reference::attention(d, q.data(), k.data(), v.data(), ro.data());
    if (tt::rel_err(o, ro) > 1e-5) return why = "attention", false;
  }
  // The layers.
  const auto enc = tt::random_vec(30 * 16, seed + 6), w = tt::random_vec(16 * 16, seed + 7);
  std::vector<float> ctx(16), rctx(16);
  if (tessera_additive_attention(30, 16, 16, 16, enc.data(), w.data(), w.data(), w.data(), w.data(),
                                 ctx.data(), nullptr) != TESSERA_OK)
    return why = tessera_last_error(), false;
  tessera::reference::additive_attention(30, 16, 16, 16, enc.data(), w.data(), w.data(), w.data(),
                                         w.data(), rctx.data(), nullptr);
  if (tt::rel_err(ctx, rctx) > 1e-5) return why = "additive", false;
  tessera_mha_desc md;
  tessera_mha_desc_init(&md, 1, 5, 5, 16, 4);
  md.w_q = md.w_k = md.w_v = md.w_o = w.data();
  md.causal = 1;
  std::vector<float> out(5 * 16), rout(out.size());
  if (tessera_mha_forward(&md, enc.data(), enc.data(), out.data(), nullptr, 0) != TESSERA_OK)
    return why = tessera_last_error(), false;
  tessera::reference::mha_forward(md, enc.data(), enc.data(), rout.data());
  if (tt::rel_err(out, rout) > 1e-5) return why = "mha", false;
  return true;
}

// Rounds per caller: fewer under qemu and ASan (their reference loops are most of the time),
// all six under TSan, which is what the test is for.
#if defined(TESSERA_LIGHT_SWEEPS) && !defined(__SANITIZE_THREAD__)
constexpr int kRounds = 3;
#else
constexpr int kRounds = 6;
#endif

TEST(Stress, EightThreadsWhileTablesAndThreadCapsChange) {
  const std::string previous = tessera_isa_name();
  const auto isas = tt::all_isas();
  std::atomic<bool> stop{false};
  std::thread switcher([&] {
    for (int i = 0; !stop; ++i) {
      tessera_set_isa(isas[size_t(i) % isas.size()].c_str());
      tessera_set_num_threads(i % 3);              // 0 (the caller's arena), 1, 2
      if (i % 50 == 0) tessera_release_scratch();  // waits for the calls in flight
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> callers;
  std::vector<std::string> failures(8);
  for (int t = 0; t < 8; ++t)
    callers.emplace_back([&, t] {
      // Odd threads with a workspace of their own: their calls, wherever TBB runs them, take
      // scratch from it alone.
      std::vector<float> ws(t % 2 ? size_t(1) << 20 : 0);  // 4 MB
      if (t % 2) tessera_bind_workspace(ws.data(), ws.size() * sizeof(float));
      for (int r = 0; r < kRounds && failures[size_t(t)].empty(); ++r) {
        std::string why;
        if (!round_of_everything(uint32_t(100 * t + r), why)) failures[size_t(t)] = why;
      }
      tessera_bind_workspace(nullptr, 0);
    });
  for (auto& c : callers) c.join();
  stop = true;
  switcher.join();
  tessera_set_num_threads(0);
  tessera_set_isa(previous.c_str());
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[size_t(t)], "") << "thread " << t;
}

}  // namespace

}  // namespace stress_test
