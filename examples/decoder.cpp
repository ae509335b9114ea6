// A Llama-style decoder on Tessera: the program to run first on a board. A stack of blocks
//   h = x + Attention(RMSNorm(x)),  x' = h + FFN(RMSNorm(h)),  FFN = W_down (silu(W_gate) * W_up)
// on the library's prepared layers: the attention layer (rotary positions, GQA, a KV cache per
// layer), tessera_norm (the residual add fused into the second norm) and the prepared SwiGLU
// feed-forward layer, on random weights of any type (f32, f16, bf16, q8_0, q4_0), every weight
// packed once at load. Prefill and decode are timed as llama-bench times them: prefill of the
// prompt from an empty cache after a warm-up, the median of --repeats runs; decode of --tokens
// tokens one at a time after --depth tokens are in the cache (each step's output, normalised, is
// the next input: no vocabulary or sampling). It prints tokens/s, the bytes a decode step reads,
// and that rate against a plain read loop on the same threads.
//
//   example_decoder [--model 2048 --layers 16 --heads 32 --kv-heads 8 --mlp 8192 --prompt 512
//                    --depth 512 --tokens 64 --repeats 3 --weights q4_0 --cache f16 --threads 2]
// Without arguments: a tiny configuration (CI runs it under qemu). README: sizing it to a model.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tessera/tessera.h"

namespace {

struct Config {
  int64_t model = 256, layers = 2, heads = 8, kv_heads = 2, mlp = 512, prompt = 32, depth = -1,
          tokens = 16, repeats = 1;
  tessera_dtype weights = TESSERA_F16, cache = TESSERA_F16;
  int threads = 0;  // 0: Tessera's default
};

const char* type_name(tessera_dtype t) {
  return t == TESSERA_F32    ? "f32"
         : t == TESSERA_F16  ? "f16"
         : t == TESSERA_BF16 ? "bf16"
         : t == TESSERA_Q8_0 ? "q8_0"
                             : "q4_0";
}

bool parse_type(const char* s, tessera_dtype& t) {
  for (const tessera_dtype x : {TESSERA_F32, TESSERA_F16, TESSERA_BF16, TESSERA_Q8_0, TESSERA_Q4_0})
    if (std::strcmp(s, type_name(x)) == 0) return t = x, true;
  return false;
}

bool parse(int argc, char** argv, Config& c) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    int64_t* n = k == "--model"      ? &c.model
                 : k == "--layers"   ? &c.layers
                 : k == "--heads"    ? &c.heads
                 : k == "--kv-heads" ? &c.kv_heads
                 : k == "--mlp"      ? &c.mlp
                 : k == "--prompt"   ? &c.prompt
                 : k == "--depth"    ? &c.depth
                 : k == "--tokens"   ? &c.tokens
                 : k == "--repeats"  ? &c.repeats
                                     : nullptr;
    if (n) {
      *n = std::atoll(v);
    } else if (k == "--threads") {
      c.threads = std::atoi(v);
    } else if (k == "--weights" || k == "--cache") {
      if (!parse_type(v, k == "--cache" ? c.cache : c.weights)) return false;
    } else {
      return false;
    }
  }
  if (c.depth < 0) c.depth = c.prompt;
  return argc % 2 == 1 && c.repeats > 0 && c.prompt > 0 && c.tokens >= 0;
}

// n random weights of type t in [-s, s] (float32 rounded by tessera_convert).
std::vector<char> random_weights(int64_t n, float s, tessera_dtype t, uint32_t seed) {
  std::vector<float> f(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 1;
  for (auto& v : f) x = x * 1664525u + 1013904223u, v = s * (float(x >> 8) / 8388608.0f - 1.0f);
  std::vector<char> out(tessera_dtype_size(t, n));
  if (tessera_convert(TESSERA_F32, t, n, f.data(), out.data()) != TESSERA_OK) out.clear();
  return out;
}

long peak_rss_kb() {
  FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmHWM:", 6) == 0) kb = std::atol(line + 6);
  if (f) std::fclose(f);
  return kb;
}

// The read loop decode is measured against: `threads` threads summing their share of a buffer
// far past the caches, the best of five passes, in bytes/s.
double read_loop_bytes_per_s(int threads, size_t bytes) {
  std::vector<float> buf(bytes / sizeof(float), 1.0f);
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    std::vector<std::thread> pool;
    std::vector<double> sums(static_cast<size_t>(threads));
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const size_t n = buf.size() / size_t(threads), at = n * size_t(t);
        float acc[16] = {};
        for (size_t i = 0; i + 16 <= n; i += 16)
          for (int j = 0; j < 16; ++j) acc[j] += buf[at + i + size_t(j)];
        for (const float a : acc) sums[size_t(t)] += a;
      });
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (sums[0] >= 0) best = std::max(best, double(bytes) / s);
  }
  return best;
}

struct Block {
  tessera_mha_layer* attn = nullptr;
  tessera_ffn* ffn = nullptr;
  std::vector<char> k_cache, v_cache;
  std::vector<float> norm1, norm2;
};

#define CHECK(call)                                                         \
  do {                                                                      \
    if ((call) != TESSERA_OK) {                                             \
      std::fprintf(stderr, "%s failed: %s\n", #call, tessera_last_error()); \
      return 1;                                                             \
    }                                                                       \
  } while (0)

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  if (!parse(argc, argv, c)) {
    std::fprintf(stderr,
                 "usage: %s [--model N --layers N --heads N --kv-heads N --mlp N --prompt N "
                 "--depth N --tokens N --repeats N --weights T --cache T --threads N]\n"
                 "  T: f32, f16, bf16, q8_0 or q4_0\n",
                 argv[0]);
    return 2;
  }
  if (c.threads > 0) CHECK(tessera_set_num_threads(c.threads));
  const int64_t M = c.model, hd = M / c.heads, cap = std::max(c.prompt, c.depth + c.tokens);
  const int64_t rows = std::max<int64_t>(c.prompt, c.depth);

  // The blocks: an attention and a feed-forward layer prepared from random weights (packed, so
  // the arrays go), the cache, the two norms' gains.
  tessera_mha_desc d;
  CHECK(tessera_mha_desc_init(&d, 1, 1, 1, M, c.heads));
  d.kv_heads = c.kv_heads, d.causal = 1, d.weight_type = c.weights, d.cache_type = c.cache;
  d.rope.style = TESSERA_ROPE_NEOX, d.rope.theta = 500000.0f;
  std::vector<Block> blocks(size_t(c.layers));
  double weight_bytes = 0, cache_row_bytes = 0;
  const float s = 1.0f / std::sqrt(float(M)), s_down = 1.0f / std::sqrt(float(c.mlp));
  for (int64_t l = 0; l < c.layers; ++l) {
    Block& b = blocks[size_t(l)];
    const uint32_t seed = uint32_t(10 * l);
    const auto wq = random_weights(M * M, s, c.weights, seed + 1);
    const auto wk = random_weights(M * c.kv_heads * hd, s, c.weights, seed + 2);
    const auto wv = random_weights(M * c.kv_heads * hd, s, c.weights, seed + 3);
    const auto wo = random_weights(M * M, s, c.weights, seed + 4);
    d.w_q = wq.data(), d.w_k = wk.data(), d.w_v = wv.data(), d.w_o = wo.data();
    CHECK(tessera_mha_create(&d, &b.attn));
    const auto wg = random_weights(c.mlp * M, s, c.weights, seed + 5);
    const auto wu = random_weights(c.mlp * M, s, c.weights, seed + 6);
    const auto wd = random_weights(M * c.mlp, s_down, c.weights, seed + 7);
    const tessera_ffn_desc fd{M,         c.mlp,     TESSERA_ACT_SILU, 1,       c.weights, wg.data(),
                              wu.data(), wd.data(), nullptr,          nullptr, nullptr};
    CHECK(tessera_ffn_create(&fd, &b.ffn));
    weight_bytes +=
        double(wq.size() + wk.size() + wv.size() + wo.size() + wg.size() + wu.size() + wd.size());
    b.k_cache.assign(tessera_dtype_size(c.cache, c.kv_heads * cap * hd), 0);
    b.v_cache.assign(b.k_cache.size(), 0);
    cache_row_bytes += 2.0 * double(tessera_dtype_size(c.cache, c.kv_heads * hd));
    b.norm1.assign(size_t(M), 1.0f), b.norm2.assign(size_t(M), 1.0f);
  }
  d.w_q = d.w_k = d.w_v = d.w_o = nullptr;

  // One pass of n tokens through every block (the caches at `pos`); x, the residual stream, in
  // place. One workspace for every call, sized for the longest pass.
  std::vector<float> x(size_t(rows * M)), xn(x.size()), attn(x.size());
  size_t ws_bytes = 0;
  d.q_len = d.kv_len = rows, d.cache_len = 0, d.cache_capacity = cap;
  d.k_cache = blocks[0].k_cache.data(), d.v_cache = blocks[0].v_cache.data();
  CHECK(tessera_mha_layer_workspace_size(blocks[0].attn, &d, &ws_bytes));
  size_t step_ws = 0;  // a decode step at the last position
  d.q_len = d.kv_len = 1, d.cache_len = cap - 1;
  CHECK(tessera_mha_layer_workspace_size(blocks[0].attn, &d, &step_ws));
  ws_bytes = std::max(ws_bytes, step_ws);
  ws_bytes = std::max(ws_bytes, tessera_ffn_workspace_size(blocks[0].ffn, rows));
  void* ws = std::aligned_alloc(64, (ws_bytes + 63) / 64 * 64);
  if (!ws) return 1;
  const auto pass = [&](int64_t n, int64_t pos) -> int {
    d.q_len = d.kv_len = n, d.cache_len = pos;
    for (Block& b : blocks) {
      CHECK(tessera_norm(TESSERA_NORM_RMS, n, M, x.data(), M, nullptr, 0, b.norm1.data(), nullptr,
                         1e-5f, xn.data(), M));
      d.k_cache = b.k_cache.data(), d.v_cache = b.v_cache.data();
      CHECK(tessera_mha_layer_forward(b.attn, &d, xn.data(), xn.data(), xn.data(), attn.data(), ws,
                                      ws_bytes));
      // h = x + attention, and its norm, in one pass
      CHECK(tessera_norm(TESSERA_NORM_RMS, n, M, x.data(), M, attn.data(), M, b.norm2.data(),
                         nullptr, 1e-5f, xn.data(), M));
      CHECK(tessera_ffn_forward(b.ffn, n, xn.data(), M, 1.0f, x.data(), M, ws, ws_bytes));
    }
    return 0;
  };
  const auto fill_input = [&](int64_t n) {
    uint32_t r = 12345;
    for (int64_t i = 0; i < n * M; ++i)
      r = r * 1664525u + 1013904223u, x[size_t(i)] = float(r >> 8) / 8388608.0f - 1.0f;
  };

  // Prefill: a warm-up, then the median of the repeats, each from an empty cache.
  std::vector<double> prefill;
  for (int64_t rep = 0; rep <= c.repeats; ++rep) {
    fill_input(c.prompt);
    const auto t0 = std::chrono::steady_clock::now();
    if (pass(c.prompt, 0) != 0) return 1;
    if (rep > 0) prefill.push_back(seconds_since(t0));
  }
  std::sort(prefill.begin(), prefill.end());
  const double prefill_s = prefill[prefill.size() / 2];

  // Decode from `depth` tokens in the cache (filled untimed).
  fill_input(std::max<int64_t>(c.depth, 1));
  if (c.depth > 0 && pass(c.depth, 0) != 0) return 1;
  const std::vector<float> ones(size_t(M), 1.0f);
  const auto t1 = std::chrono::steady_clock::now();
  for (int64_t t = 0; t < c.tokens; ++t) {
    // The last position's output, normalised, is the next token's input.
    const int64_t last = t == 0 ? std::max<int64_t>(c.depth - 1, 0) : 0;
    CHECK(tessera_norm(TESSERA_NORM_RMS, 1, M, x.data() + last * M, M, nullptr, 0, ones.data(),
                       nullptr, 1e-5f, x.data(), M));
    if (pass(1, c.depth + t) != 0) return 1;
  }
  const double decode_s = seconds_since(t1);
  double checksum = 0;
  for (int64_t i = 0; i < M; ++i) checksum += x[size_t(i)];
  if (!std::isfinite(checksum)) {
    std::fprintf(stderr, "the output is not finite\n");
    return 1;
  }

  // A decode step reads every weight once and the cache rows it holds (the mean over the steps).
  const double step_bytes =
      weight_bytes + cache_row_bytes * (double(c.depth) + double(c.tokens + 1) / 2.0);
  const int threads = c.threads > 0 ? c.threads : int(std::thread::hardware_concurrency());
  const double tok_s = c.tokens > 0 ? double(c.tokens) / decode_s : 0.0;
  std::printf("decoder: model %lld, %lld layers, heads %lld/%lld, mlp %lld, weights %s, cache %s\n",
              (long long)M, (long long)c.layers, (long long)c.heads, (long long)c.kv_heads,
              (long long)c.mlp, type_name(c.weights), type_name(c.cache));
  std::printf("prefill: %lld tokens in %.3f s, %.1f tokens/s (median of %lld)\n",
              (long long)c.prompt, prefill_s, double(c.prompt) / prefill_s, (long long)c.repeats);
  std::printf("decode: %lld tokens after %lld in %.3f s, %.2f tokens/s\n", (long long)c.tokens,
              (long long)c.depth, decode_s, tok_s);
  std::printf("weights: %.1f MB; cache: %.1f MB (%lld positions); a decode step reads %.1f MB\n",
              weight_bytes / 1e6, cache_row_bytes * double(cap) / 1e6, (long long)cap,
              step_bytes / 1e6);
  if (argc > 1 && c.tokens > 0) {
    const double read = read_loop_bytes_per_s(threads, size_t(1) << 29);
    std::printf("decode reads %.1f GB/s: %.0f%% of the read loop (%.1f GB/s, %d threads)\n",
                tok_s * step_bytes / 1e9, 100.0 * tok_s * step_bytes / read, read / 1e9, threads);
  }
  std::printf("peak memory: %.1f MB (VmHWM); threads: %s; checksum %.6g\n",
              double(peak_rss_kb()) / 1024.0,
              c.threads ? std::to_string(c.threads).c_str() : "default", checksum);
  for (Block& b : blocks) tessera_mha_destroy(b.attn), tessera_ffn_destroy(b.ffn);
  std::free(ws);
  return 0;
}
