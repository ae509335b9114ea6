// A Llama-style decoder on Tessera (examples/decoder_model.hpp: the library's prepared attention
// and feed-forward layers and its norms), the program to run first on a board, on random
// weights of any type (f32, f16, bf16, q8_0, q4_0), every weight packed once at load. Prefill and
// decode are timed as llama-bench times them: prefill of the prompt from an empty cache after a
// warm-up, the median of --repeats runs; decode of --tokens tokens one at a time after --depth
// tokens are in the cache (each step's output, normalised, is the next input: no vocabulary or
// sampling). It prints tokens/s, the bytes a decode step reads, and that rate against a plain read
// loop on the same threads, a pass of it after every 8 decoded tokens.
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

#include "decoder_model.hpp"
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

long peak_rss_kb() {
  FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmHWM:", 6) == 0) kb = std::atol(line + 6);
  if (f) std::fclose(f);
  return kb;
}

// One pass of the read loop decode is measured against: `threads` threads summing their share
// of a buffer far past the caches, in bytes/s.
double read_pass_bytes_per_s(const decoder::ReadBuffer& buf, int threads) {
  std::vector<std::thread> pool;
  std::vector<double> sums(static_cast<size_t>(threads));
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const size_t n = buf.size() / size_t(threads), at = n * size_t(t);
      float acc[16] = {};
      for (size_t i = 0; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; ++j) acc[j] += buf.data()[at + i + size_t(j)];
      for (const float a : acc) sums[size_t(t)] += a;
    });
  for (auto& th : pool) th.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sums[0] >= 0 ? double(buf.size() * sizeof(float)) / s : 0.0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

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
  const int64_t M = c.model, cap = std::max(c.prompt, c.depth + c.tokens);
  decoder::Shape shape;
  shape.model = M, shape.layers = c.layers, shape.heads = c.heads, shape.kv_heads = c.kv_heads;
  shape.mlp = c.mlp, shape.capacity = cap, shape.max_rows = std::max<int64_t>(c.prompt, c.depth);
  shape.weights = c.weights, shape.cache = c.cache;
  decoder::Model model;
  CHECK(model.build(shape));

  // Prefill: a warm-up, then the median of the repeats, each from an empty cache.
  std::vector<double> prefill;
  for (int64_t rep = 0; rep <= c.repeats; ++rep) {
    model.fill_input(c.prompt);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(model.pass(c.prompt, 0));
    if (rep > 0) prefill.push_back(seconds_since(t0));
  }
  std::sort(prefill.begin(), prefill.end());
  const double prefill_s = prefill[prefill.size() / 2];

  // Decode from `depth` tokens in the cache (filled untimed); each step's output, normalised,
  // is the next input. Sized runs time it in chunks of kChunk tokens, each followed by an
  // untimed pass of the read loop on the same threads: the VM's bandwidth drifts within seconds,
  // so each chunk is judged against the pass beside it (the median of the pairs' ratios).
  constexpr int64_t kChunk = 8;
  const int threads = c.threads > 0 ? c.threads : int(std::thread::hardware_concurrency());
  const bool sized = argc > 1 && c.tokens > 0;
  const decoder::ReadBuffer buf(sized ? (size_t(1) << 29) / sizeof(float) : 0);
  std::vector<double> ratios, passes;
  model.fill_input(std::max<int64_t>(c.depth, 1));
  if (c.depth > 0) CHECK(model.pass(c.depth, 0));
  double decode_s = 0;
  for (int64_t t0 = 0; t0 < c.tokens; t0 += kChunk) {
    const int64_t n = std::min(kChunk, c.tokens - t0);
    const auto t1 = std::chrono::steady_clock::now();
    for (int64_t t = t0; t < t0 + n; ++t) {
      CHECK(model.feed_back(t == 0 ? std::max<int64_t>(c.depth - 1, 0) : 0));
      CHECK(model.pass(1, c.depth + t));
    }
    const double s = seconds_since(t1);
    decode_s += s;
    if (buf.size() == 0) continue;
    const double bytes = model.step_bytes(double(c.depth + t0) + double(n + 1) / 2.0);
    passes.push_back(read_pass_bytes_per_s(buf, threads));
    ratios.push_back(double(n) / s * bytes / passes.back());
  }
  double checksum = 0;
  for (int64_t i = 0; i < M; ++i) checksum += model.x()[size_t(i)];
  if (!std::isfinite(checksum)) {
    std::fprintf(stderr, "the output is not finite\n");
    return 1;
  }

  // A decode step reads every weight once and the cache rows it holds (the mean over the steps).
  const double step_bytes = model.step_bytes(double(c.depth) + double(c.tokens + 1) / 2.0);
  const double tok_s = c.tokens > 0 ? double(c.tokens) / decode_s : 0.0;
  std::printf("decoder: model %lld, %lld layers, heads %lld/%lld, mlp %lld, weights %s, cache %s\n",
              (long long)M, (long long)c.layers, (long long)c.heads, (long long)c.kv_heads,
              (long long)c.mlp, type_name(c.weights), type_name(c.cache));
  std::printf("prefill: %lld tokens in %.3f s, %.1f tokens/s (median of %lld)\n",
              (long long)c.prompt, prefill_s, double(c.prompt) / prefill_s, (long long)c.repeats);
  std::printf("decode: %lld tokens after %lld in %.3f s, %.2f tokens/s\n", (long long)c.tokens,
              (long long)c.depth, decode_s, tok_s);
  std::printf("weights: %.1f MB; cache: %.1f MB (%lld positions); a decode step reads %.1f MB\n",
              model.weight_bytes() / 1e6, model.cache_row_bytes() * double(cap) / 1e6,
              (long long)cap, step_bytes / 1e6);
  if (!ratios.empty())
    std::printf(
        "decode reads %.1f GB/s: %.0f%% of the read loop (the median over %zu chunks of %lld "
        "tokens, each against a read pass beside it; the passes' median %.1f GB/s, best %.1f, "
        "%d threads)\n",
        tok_s * step_bytes / 1e9, 100.0 * median(ratios), ratios.size(), (long long)kChunk,
        median(passes) / 1e9, *std::max_element(passes.begin(), passes.end()) / 1e9, threads);
  std::printf("peak memory: %.1f MB (VmHWM); threads: %s; checksum %.6g\n",
              double(peak_rss_kb()) / 1024.0,
              c.threads ? std::to_string(c.threads).c_str() : "default", checksum);
  return 0;
}
