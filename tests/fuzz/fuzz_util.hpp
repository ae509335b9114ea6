// Shared by the libFuzzer harnesses: decoding sizes, flags and data from the fuzzer's bytes,
// poisoned output buffers, and the comparison with the reference. The contract each harness
// checks on every input: an error status leaves every output byte as it was and names an
// argument (out of memory only when a workspace too small is bound); TESSERA_OK means the outputs
// equal the reference's (NaN where it has NaN, the same infinity, finite values within the
// tolerance).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "tessera/tessera.h"

namespace fz {

// Outputs compared with the reference, and those left unchecked because float32 rounding
// decides them (the harnesses' narrow, input-derived skips). At exit a harness prints both; past
// 1% skipped (over at least 1000 compared) it exits with status 1, so that a skip grown too wide
// fails the run instead of hiding it.
struct Counts {
  int64_t compared = 0, skipped = 0;
  Counts() {
    std::atexit([] {
      const Counts& c = counts();
      const double pct = c.compared ? 100.0 * double(c.skipped) / double(c.compared) : 0.0;
      std::fprintf(stderr,
                   "fuzz: %lld outputs compared with the reference, %lld skipped (%.3f%%)\n",
                   (long long)c.compared, (long long)c.skipped, pct);
      if (c.compared >= 1000 && pct > 1.0) {
        std::fprintf(stderr, "fuzz: more than 1%% of the compared outputs were skipped\n");
        std::_Exit(1);
      }
    });
  }
  static Counts& counts();
};
inline Counts& Counts::counts() {
  static Counts c;
  return c;
}
// n outputs left unchecked (they are still counted as compared where the caller copies them
// into the reference).
inline void skip(int64_t n) { Counts::counts().skipped += n; }

// Reads the fuzzer's bytes front to back; past the end every read gives 0.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  uint8_t byte() { return p_ < end_ ? *p_++ : 0; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | byte();
    return v;
  }
  // An integer in [lo, hi].
  int64_t range(int64_t lo, int64_t hi) { return lo + int64_t(u32() % uint64_t(hi - lo + 1)); }
  bool flag() { return byte() & 1; }
  // Mostly a small size; now and then 0 or one whose products overflow 64 bits.
  int64_t size(int64_t hi) {
    const uint8_t sel = byte();
    if (sel < 8) return 0;
    if (sel == 255) return int64_t(1) << 40;
    return range(1, hi);
  }
  // A float: mostly in [-mag, mag], sometimes 0, -0, a denormal, +-inf or NaN.
  float value(float mag, bool specials) {
    const uint8_t sel = byte();
    if (specials && sel >= 248) {
      const float s[] = {std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::quiet_NaN(),
                         std::numeric_limits<float>::denorm_min(),
                         -1e-40f,
                         0.0f,
                         -0.0f,
                         std::numeric_limits<float>::min()};
      return s[sel - 248];
    }
    return mag * (float(int32_t(u32() % 2000001) - 1000000) / 1e6f);
  }
  // n floats; past the input's end they come from a generator seeded by it.
  void fill(std::vector<float>& v, float mag, bool specials) {
    uint32_t seed = u32() | 1;
    for (float& x : v) {
      if (p_ < end_) {
        x = value(mag, specials);
      } else {
        seed = seed * 1664525u + 1013904223u;
        x = mag * (float(seed >> 8) / float(1 << 24) * 2.0f - 1.0f);
      }
    }
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// A workspace of the caller's, bound to the thread for one input (tessera_bind_workspace): when
// the input's last byte is 224 or more, 0 to 1 MB at any alignment. The byte is read in place,
// not consumed, so the rest of the input decodes as it does without it.
class Workspace {
 public:
  Workspace(const uint8_t* data, size_t size) {
    const uint8_t sel = size > 0 ? data[size - 1] : 0;
    if (sel < 224) return;
    const size_t bytes = size_t(sel - 224) << 15;
    buf_.resize(bytes + 64);
    tessera_bind_workspace(buf_.data() + size % 64, bytes);
    bound_ = true;
  }
  ~Workspace() {
    if (bound_) tessera_bind_workspace(nullptr, 0);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  bool bound() const { return bound_; }

 private:
  std::vector<uint8_t> buf_;
  bool bound_ = false;
};

[[noreturn]] inline void violated(const char* what, const char* detail) {
  std::fprintf(stderr, "contract violated: %s (%s)\n", what, detail);
  std::abort();
}

// Poisoned buffer: a copy taken before the call, compared after a rejected one.
struct Snapshot {
  std::vector<uint8_t> bytes;
  const void* at = nullptr;
  Snapshot(const void* p, size_t n) : bytes(n), at(p) {
    if (n) std::memcpy(bytes.data(), p, n);
  }
  bool same() const { return bytes.empty() || std::memcmp(bytes.data(), at, bytes.size()) == 0; }
};

// The checks after a call: on an error, nothing written and a message; on OK, the caller
// compares with the reference.
inline bool rejected(tessera_status s, const std::vector<Snapshot>& outputs) {
  if (s == TESSERA_OK) return false;
  if (s != TESSERA_INVALID_ARGUMENT && s != TESSERA_OUT_OF_MEMORY)
    violated("unexpected status", tessera_status_string(s));
  for (const Snapshot& o : outputs)
    if (!o.same()) violated("an output was written by a rejected call", tessera_last_error());
  if (tessera_last_error()[0] == '\0') violated("a rejection without a message", "");
  return true;
}

// out against ref: NaN for NaN, the same infinity, finite values within
// tol * max(1, |ref|) (relative where the values are large).
inline void expect_close(const float* out, const float* ref, size_t n, double tol,
                         const char* what) {
  Counts::counts().compared += int64_t(n);
  for (size_t i = 0; i < n; ++i) {
    const float o = out[i], r = ref[i];
    if (std::isnan(r) || std::isnan(o)) {
      if (std::isnan(r) != std::isnan(o)) violated(what, "NaN differs from the reference");
      continue;
    }
    if (std::isinf(r) || std::isinf(o)) {
      if (o != r) violated(what, "an infinity differs from the reference");
      continue;
    }
    if (std::fabs(double(o) - double(r)) > tol * std::fmax(1.0, std::fabs(double(r)))) {
      char msg[128];
      std::snprintf(msg, sizeof msg, "element %zu: %g against %g", i, double(o), double(r));
      violated(what, msg);
    }
  }
}

}  // namespace fz
