// A Llama-style decoder on Tessera: the program to run first on a board. A stack of blocks
//   h = x + Attention(RMSNorm(x)),  x' = h + W_down (silu(RMSNorm(h) W_gate) * RMSNorm(h) W_up)
// with the prepared attention layer (rotary positions, GQA, a KV cache per layer) and the MLP's
// three products through tessera_gemm_ex, on random weights of the chosen type. It prefills a
// prompt, then decodes tokens one at a time (each step's output, normalised, is the next input:
// no vocabulary or sampling, which are not attention's work), and prints prefill and decode
// tokens/s, the bytes of weights and cache, what a decode step must read, and the peak memory.
//
//   example_decoder [--model 2048 --layers 16 --heads 32 --kv-heads 8 --mlp 8192
//                    --prompt 128 --tokens 64 --weights f16 --cache f16 --threads 2]
// Without arguments: a tiny configuration (CI runs it under qemu). README: sizing it to a model.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace {

struct Config {
  int64_t model = 256, layers = 2, heads = 8, kv_heads = 2, mlp = 512, prompt = 32, tokens = 16;
  tessera_dtype weights = TESSERA_F16, cache = TESSERA_F16;
  int threads = 0;  // 0: Tessera's default
};

bool parse_type(const char* s, tessera_dtype& t) {
  const struct {
    const char* name;
    tessera_dtype t;
  } types[] = {{"f32", TESSERA_F32},
               {"f16", TESSERA_F16},
               {"bf16", TESSERA_BF16},
               {"q8_0", TESSERA_Q8_0},
               {"q4_0", TESSERA_Q4_0}};
  for (const auto& x : types)
    if (std::strcmp(s, x.name) == 0) return t = x.t, true;
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
                 : k == "--tokens"   ? &c.tokens
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
  return argc % 2 == 1 && c.weights != TESSERA_Q8_0 && c.weights != TESSERA_Q4_0;
}

// n random weights of type t in [-s, s] (float32 rounded by tessera_convert).
std::vector<char> random_weights(int64_t n, float s, tessera_dtype t, uint32_t seed) {
  std::vector<float> f(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 1;
  for (auto& v : f) x = x * 1664525u + 1013904223u, v = s * (float(x >> 8) / 8388608.0f - 1.0f);
  std::vector<char> out(tessera_dtype_size(t, n));
  if (t == TESSERA_F32)
    std::memcpy(out.data(), f.data(), out.size());
  else if (tessera_convert(TESSERA_F32, t, n, f.data(), out.data()) != TESSERA_OK)
    out.clear();
  return out;
}

void rms_norm(int64_t rows, int64_t n, const float* x, const std::vector<float>& g, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
    const float inv = float(1.0 / std::sqrt(ss / double(n) + 1e-5));
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = x[r * n + i] * inv * g[size_t(i)];
  }
}

long peak_rss_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

struct Block {
  tessera_mha_layer* attn = nullptr;
  std::vector<char> k_cache, v_cache, w_gate, w_up, w_down;
  std::vector<float> norm1, norm2;
};

#define CHECK(call)                                                         \
  do {                                                                      \
    if ((call) != TESSERA_OK) {                                             \
      std::fprintf(stderr, "%s failed: %s\n", #call, tessera_last_error()); \
      return 1;                                                             \
    }                                                                       \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  Config c;
  if (!parse(argc, argv, c)) {
    std::fprintf(stderr,
                 "usage: %s [--model N --layers N --heads N --kv-heads N --mlp N --prompt N "
                 "--tokens N --weights f32|f16|bf16 --cache f32|f16|bf16|q8_0|q4_0 --threads N]\n",
                 argv[0]);
    return 2;
  }
  if (c.threads > 0) CHECK(tessera_set_num_threads(c.threads));
  const int64_t M = c.model, hd = M / c.heads, cap = c.prompt + c.tokens;

  // The blocks: an attention layer prepared from random weights (packed, so the arrays go),
  // its cache, the MLP's weights and the two norms' gains.
  tessera_mha_desc d;
  CHECK(tessera_mha_desc_init(&d, 1, c.prompt, c.prompt, M, c.heads));
  d.kv_heads = c.kv_heads, d.causal = 1, d.weight_type = c.weights, d.cache_type = c.cache;
  d.rope.style = TESSERA_ROPE_NEOX, d.rope.theta = 500000.0f;
  std::vector<Block> blocks(size_t(c.layers));
  size_t weight_bytes = 0, cache_bytes = 0;
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
    weight_bytes += wq.size() + wk.size() + wv.size() + wo.size();
    b.w_gate = random_weights(M * c.mlp, s, c.weights, seed + 5);
    b.w_up = random_weights(M * c.mlp, s, c.weights, seed + 6);
    b.w_down = random_weights(c.mlp * M, s_down, c.weights, seed + 7);
    weight_bytes += b.w_gate.size() + b.w_up.size() + b.w_down.size();
    b.k_cache.assign(tessera_dtype_size(c.cache, c.kv_heads * cap * hd), 0);
    b.v_cache.assign(b.k_cache.size(), 0);
    cache_bytes += 2 * b.k_cache.size();
    b.norm1.assign(size_t(M), 1.0f), b.norm2.assign(size_t(M), 1.0f);
  }
  d.w_q = d.w_k = d.w_v = d.w_o = nullptr;

  // One pass of n tokens through every block (the caches at `pos`); x in place.
  std::vector<float> x(size_t(c.prompt * M)), xn(x.size()), attn(x.size());
  std::vector<float> gate(size_t(c.prompt * c.mlp)), up(gate.size());
  // One workspace for every call: the prompt's (every layer has the same shape) is the largest.
  size_t ws_bytes = 0;
  d.k_cache = blocks[0].k_cache.data(), d.v_cache = blocks[0].v_cache.data(),
  d.cache_capacity = cap;
  CHECK(tessera_mha_layer_workspace_size(blocks[0].attn, &d, &ws_bytes));
  std::vector<char> ws(ws_bytes);
  const auto pass = [&](int64_t n, int64_t pos) -> int {
    d.q_len = d.kv_len = n, d.cache_len = pos, d.cache_capacity = cap;
    for (Block& b : blocks) {
      rms_norm(n, M, x.data(), b.norm1, xn.data());
      d.k_cache = b.k_cache.data(), d.v_cache = b.v_cache.data();
      CHECK(tessera_mha_layer_forward(b.attn, &d, xn.data(), xn.data(), xn.data(), attn.data(),
                                      ws.data(), ws.size()));
      for (int64_t i = 0; i < n * M; ++i) x[size_t(i)] += attn[size_t(i)];
      rms_norm(n, M, x.data(), b.norm2, xn.data());
      const auto nn = TESSERA_NO_TRANS;
      CHECK(tessera_gemm_ex(nn, nn, n, c.mlp, M, 1.0f, TESSERA_F32, xn.data(), M, c.weights,
                            b.w_gate.data(), c.mlp, 0.0f, gate.data(), c.mlp));
      CHECK(tessera_gemm_ex(nn, nn, n, c.mlp, M, 1.0f, TESSERA_F32, xn.data(), M, c.weights,
                            b.w_up.data(), c.mlp, 0.0f, up.data(), c.mlp));
      for (int64_t i = 0; i < n * c.mlp; ++i) {  // SwiGLU
        const float g = gate[size_t(i)];
        gate[size_t(i)] = g / (1.0f + std::exp(-g)) * up[size_t(i)];
      }
      CHECK(tessera_gemm_ex(nn, nn, n, M, c.mlp, 1.0f, TESSERA_F32, gate.data(), c.mlp, c.weights,
                            b.w_down.data(), M, 1.0f, x.data(), M));
    }
    return 0;
  };

  uint32_t r = 12345;
  for (auto& v : x) r = r * 1664525u + 1013904223u, v = float(r >> 8) / 8388608.0f - 1.0f;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  if (pass(c.prompt, 0) != 0) return 1;
  const auto t1 = clock::now();
  const std::vector<float> norm_gain(size_t(M), 1.0f);
  for (int64_t t = 0; t < c.tokens; ++t) {
    // The last position's output, normalised, is the next token's input.
    rms_norm(1, M, x.data() + (t == 0 ? (c.prompt - 1) * M : 0), norm_gain, xn.data());
    std::memcpy(x.data(), xn.data(), size_t(M) * sizeof(float));
    if (pass(1, c.prompt + t) != 0) return 1;
  }
  const auto t2 = clock::now();
  double checksum = 0;
  for (int64_t i = 0; i < M; ++i) checksum += x[size_t(i)];
  if (!std::isfinite(checksum)) {
    std::fprintf(stderr, "the output is not finite\n");
    return 1;
  }

  const double prefill_s = std::chrono::duration<double>(t1 - t0).count();
  const double decode_s = std::chrono::duration<double>(t2 - t1).count();
  // A decode step reads every weight once and the cache rows held (at the last step, all).
  const double step_bytes = double(weight_bytes) + double(cache_bytes);
  std::printf("decoder: model %lld, %lld layers, heads %lld/%lld, mlp %lld, weights %s, cache %s\n",
              (long long)M, (long long)c.layers, (long long)c.heads, (long long)c.kv_heads,
              (long long)c.mlp, argc > 1 ? "as given" : "f16 (tiny defaults)",
              c.cache == TESSERA_F32    ? "f32"
              : c.cache == TESSERA_F16  ? "f16"
              : c.cache == TESSERA_BF16 ? "bf16"
              : c.cache == TESSERA_Q8_0 ? "q8_0"
                                        : "q4_0");
  std::printf("prefill: %lld tokens in %.3f s, %.1f tokens/s\n", (long long)c.prompt, prefill_s,
              double(c.prompt) / prefill_s);
  std::printf("decode: %lld tokens in %.3f s, %.2f tokens/s\n", (long long)c.tokens, decode_s,
              double(c.tokens) / decode_s);
  std::printf(
      "weights: %.1f MB; cache: %.1f MB (%lld positions); a decode step reads up to "
      "%.1f MB: at R GB/s of read bandwidth, at most R * 1000 / %.1f tokens/s\n",
      double(weight_bytes) / 1e6, double(cache_bytes) / 1e6, (long long)cap, step_bytes / 1e6,
      step_bytes / 1e6);
  std::printf("peak memory: %.1f MB (VmHWM); threads: %s; checksum %.6g\n",
              double(peak_rss_kb()) / 1024.0,
              c.threads ? std::to_string(c.threads).c_str() : "default", checksum);
  for (Block& b : blocks) tessera_mha_destroy(b.attn);
  return 0;
}
