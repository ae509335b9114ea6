// Reference quantizers of the block types, written from the formats (tessera.h): q8_0 and q4_0
// as ggml's quantize_row_q8_0_ref and quantize_row_q4_0_ref compute them for finite values, so
// that blocks are byte-compatible; a non-finite value makes its block's scale NaN.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tessera/reference.hpp"

namespace tessera::reference {
namespace {

constexpr int kBlock = 32;
constexpr uint16_t kNaNScale = 0x7E00;

void q8_0_block(const float* x, uint8_t* y) {
  float amax = 0.0f;
  bool finite = true;
  for (int j = 0; j < kBlock; ++j) {
    finite = finite && std::isfinite(x[j]);
    amax = std::fmax(amax, std::fabs(x[j]));
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t dh = finite ? f32_to_f16(d) : kNaNScale;
  std::memcpy(y, &dh, 2);
  // round: half away from 0. Clamped (a NaN 0): x id leaves [-127, 127] only where d is so
  // small (below 2^-126) that 1 / d is inexact or infinite, and its f16 is 0 anyway.
  for (int j = 0; j < kBlock; ++j) {
    const float v = std::round(x[j] * id);
    y[2 + j] =
        finite && !std::isnan(v) ? uint8_t(int8_t(std::fmin(127.0f, std::fmax(-127.0f, v)))) : 0;
  }
}

void q4_0_block(const float* x, uint8_t* y) {
  float amax = 0.0f, max = 0.0f;
  bool finite = true;
  for (int j = 0; j < kBlock; ++j) {
    finite = finite && std::isfinite(x[j]);
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];  // the first largest
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t dh = finite ? f32_to_f16(d) : kNaNScale;
  std::memcpy(y, &dh, 2);
  for (int j = 0; j < kBlock / 2; ++j) {
    // x id is in [-8, 8]: x id + 8.5 in [0.5, 16.5], truncated (it is >= 0: floor) and capped
    // (at 0 too, and a NaN 8, where d is so small that 1 / d is inexact or infinite).
    const auto nibble = [&](float v) {
      volatile float p = v * id;  // rounded before the add, as ggml's C does: never fused
      const float n = std::trunc(p + 8.5f);
      return finite && !std::isnan(n) ? uint8_t(std::fmin(15.0f, std::fmax(0.0f, n))) : uint8_t(8);
    };
    y[2 + j] = uint8_t(nibble(x[j]) | nibble(x[j + kBlock / 2]) << 4);
  }
}

// Integer j of one block (q4_0: the low nibbles are values 0-15, the high ones 16-31, each
// offset by 8); the value is the block's d times it.
int block_int(tessera_dtype t, const uint8_t* blk, int j) {
  return t == TESSERA_Q8_0 ? int(int8_t(blk[2 + j]))
                           : int((blk[2 + j % 16] >> (4 * (j / 16))) & 15) - 8;
}
float block_scale(const uint8_t* blk) {
  uint16_t dh;
  std::memcpy(&dh, blk, 2);
  return f16_to_f32(dh);
}

}  // namespace

size_t storage_bytes(tessera_dtype t, int64_t n) {
  switch (t) {
    case TESSERA_F32:
      return size_t(n) * 4;
    case TESSERA_F16:
    case TESSERA_BF16:
      return size_t(n) * 2;
    case TESSERA_Q8_0:
      return size_t(n / kBlock) * 34;
    case TESSERA_Q4_0:
      return size_t(n / kBlock) * 18;
    default:
      return 0;
  }
}

void quantize(tessera_dtype t, int64_t n, const float* x, void* y) {
  auto* out = static_cast<uint8_t*>(y);
  const size_t bytes = storage_bytes(t, kBlock);
  for (int64_t b = 0; b < n / kBlock; ++b)
    (t == TESSERA_Q8_0 ? q8_0_block : q4_0_block)(x + b * kBlock, out + size_t(b) * bytes);
}

void dequantize(tessera_dtype t, int64_t n, const void* x, float* y) {
  const auto* in = static_cast<const uint8_t*>(x);
  const size_t bytes = storage_bytes(t, kBlock);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const uint8_t* blk = in + size_t(b) * bytes;
    const float d = block_scale(blk);
    for (int j = 0; j < kBlock; ++j) y[b * kBlock + j] = d * float(block_int(t, blk, j));
  }
}

float element(tessera_dtype t, const void* p, int64_t i) {
  if (t == TESSERA_F32) return static_cast<const float*>(p)[i];
  if (t == TESSERA_Q8_0 || t == TESSERA_Q4_0) {
    const auto* blk = static_cast<const uint8_t*>(p) + storage_bytes(t, i / kBlock * kBlock);
    return block_scale(blk) * float(block_int(t, blk, int(i % kBlock)));
  }
  const uint16_t h = static_cast<const uint16_t*>(p)[i];
  return t == TESSERA_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

void hadamard(int64_t rows, int64_t dim, int64_t n, const float* x, int64_t ldx, float* y,
              int64_t ldy) {
  const float scale = float(1.0 / std::sqrt(double(n)));
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < dim; b += n) {
      for (int64_t j = 0; j < n; ++j) v[size_t(j)] = x[r * ldx + b + j];
      for (int64_t h = 1; h < n; h *= 2)  // the butterflies, stride by stride
        for (int64_t i = 0; i < n; i += 2 * h)
          for (int64_t j = i; j < i + h; ++j) {
            const float a = v[size_t(j)], c = v[size_t(j + h)];
            v[size_t(j)] = a + c, v[size_t(j + h)] = a - c;
          }
      for (int64_t j = 0; j < n; ++j) y[r * ldy + b + j] = v[size_t(j)] * scale;
    }
}

}  // namespace tessera::reference
