// libFuzzer harness for tessera_convert: types (the block types q8_0 / q4_0 among them, and values
// that are none), sizes (0, small, of part blocks, overflowing), x and y apart, the same, or
// overlapping, and raw bit patterns for the data (every NaN payload, subnormal and tie the input
// holds, and blocks of any scale). On OK every element (every block's bytes) must equal the
// reference's conversion bit for bit; on an error nothing may be written.
#include <cstring>
#include <vector>

#include "fuzz_util.hpp"
#include "tessera/reference.hpp"

namespace {

size_t width(int t) { return t == TESSERA_F32 ? 4 : 2; }
bool block(int t) { return t == TESSERA_Q8_0 || t == TESSERA_Q4_0; }
// Bytes of n values of t, part blocks rounded up (so a rejected call has its arrays too).
size_t bytes(int t, int64_t n) {
  if (block(t)) return size_t((n + 31) / 32) * (t == TESSERA_Q8_0 ? 34 : 18);
  return size_t(n) * (t == 7 ? 4 : width(t));
}

// The specification of one element, as bits in the destination's width.
uint32_t expected(int from, int to, const uint8_t* src) {
  namespace ref = tessera::reference;
  float f;
  if (from == TESSERA_F32) {
    std::memcpy(&f, src, 4);
  } else {
    uint16_t h;
    std::memcpy(&h, src, 2);
    f = from == TESSERA_F16 ? ref::f16_to_f32(h) : ref::bf16_to_f32(h);
  }
  if (from == to) {  // copied as it is
    uint32_t b = 0;
    std::memcpy(&b, src, width(from));
    return b;
  }
  if (to == TESSERA_F32) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  }
  return to == TESSERA_F16 ? ref::f32_to_f16(f) : ref::f32_to_bf16(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fz::Bytes in(data, size);
  const fz::Workspace ws(data, size);
  const int types[] = {TESSERA_F32, TESSERA_F16, TESSERA_BF16, TESSERA_Q8_0, TESSERA_Q4_0, 7};
  const int from = types[in.range(0, 5)], to = types[in.range(0, 5)];
  // size()'s overflowing value (2^40) is a valid count of elements: 2^62 overflows the bytes.
  const int64_t drawn =
      block(from) || block(to) ? (in.flag() ? 32 * in.range(0, 90) : in.size(3000)) : in.size(3000);
  const bool huge = drawn == (int64_t(1) << 40);
  const int64_t n = huge ? int64_t(1) << 62 : drawn;
  const int place = in.byte() < 32 ? in.range(1, 2) : 0;  // apart, the same, overlapping
  const size_t wf = from == 7 ? 4 : width(from), wt = to == 7 ? 4 : width(to);
  const size_t xb = huge ? 64 : bytes(from, n), yb = huge ? 64 : bytes(to, n);
  std::vector<uint8_t> arena(xb + yb + 64);
  for (uint8_t& b : arena) b = in.byte() ^ uint8_t(0x5A);
  uint8_t* x = arena.data();
  uint8_t* y = place == 1 ? x : place == 2 ? x + (xb > 2 ? 2 : 0) : x + xb + 16;
  const std::vector<uint8_t> before(arena);
  const tessera_status s =
      tessera_convert(static_cast<tessera_dtype>(from), static_cast<tessera_dtype>(to), n, x, y);
  if (s != TESSERA_OK) {
    if (before != arena) fz::violated("a rejected call wrote", tessera_last_error());
    fz::rejected(s, {});
    const bool valid_types = from != 7 && to != 7;
    const bool pair =
        from == to || !(block(from) || block(to)) || from == TESSERA_F32 || to == TESSERA_F32;
    const bool whole = !(block(from) || block(to)) || n % 32 == 0;
    const bool apart = place == 0 || (place == 1 && from == to) || n == 0;
    if (valid_types && pair && whole && !huge && apart)
      fz::violated("a valid call was rejected", tessera_last_error());
    return 0;
  }
  if (from == 7 || to == 7) fz::violated("a bad type was accepted", "");
  if ((block(from) || block(to)) && n % 32 != 0) fz::violated("part blocks were accepted", "");
  if (from != to && (block(from) || block(to)) && from != TESSERA_F32 && to != TESSERA_F32)
    fz::violated("a block type to a 16-bit type was accepted", "");
  if (block(from) || block(to)) {  // the whole array against the reference, bit for bit
    if (huge) fz::violated("an overflowing size was accepted", "");
    if (place == 2 && n > 0 && !(from == to && y == x))
      fz::violated("overlapping arrays were accepted", "");
    if (n == 0) return 0;
    std::vector<uint8_t> want(yb);
    const uint8_t* src = before.data();
    if (from == to)
      std::memcpy(want.data(), src, yb);
    else if (from == TESSERA_F32)
      tessera::reference::quantize(tessera_dtype(to), n, reinterpret_cast<const float*>(src),
                                   want.data());
    else
      tessera::reference::dequantize(tessera_dtype(from), n, src,
                                     reinterpret_cast<float*>(want.data()));
    if (std::memcmp(want.data(), y, yb) != 0)
      fz::violated("a block or value differs from the reference", "");
    fz::Counts::counts().compared += n;
    return 0;
  }
  if (huge) fz::violated("an overflowing size was accepted", "");
  if (place == 2 && n > 0 && !(from == to && y == x))
    fz::violated("overlapping arrays were accepted", "");
  for (int64_t i = 0; i < n; ++i) {
    uint32_t got = 0;
    std::memcpy(&got, y + size_t(i) * wt, wt);
    if (got != expected(from, to, before.data() + size_t(i) * wf))
      fz::violated("an element differs from the reference", "");
  }
  return 0;
}
