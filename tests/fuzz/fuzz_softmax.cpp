// libFuzzer harness: tessera_softmax, tessera_log_softmax and tessera_logsumexp under decoded
// shapes, leading dimensions, scales (softmin and 0 included), in place or overlapping, and
// rows holding NaN, +-inf, denormals and zeros.
#include <algorithm>

#include "fuzz_util.hpp"
#include "tessera/reference.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fz::Bytes in(data, size);
  const fz::Workspace ws(data, size);
  const int op = in.range(0, 2);
  int64_t rows = in.size(40), cols = in.byte() < 16 ? in.size(40000) : in.size(300);
  const bool huge = rows == (int64_t(1) << 40) || cols == (int64_t(1) << 40);
  if (huge) rows = cols = int64_t(1) << 40;
  const uint8_t ld_sel = in.byte();
  const int64_t need = std::max<int64_t>(cols, 1);
  const int64_t ldx = huge ? int64_t(1) << 40 : ld_sel < 16 ? need - 1 : need + ld_sel % 3;
  const int64_t ldy = huge ? int64_t(1) << 40 : in.byte() < 16 ? need - 1 : need + in.range(0, 2);
  const float scales[] = {1.0f, 0.5f,   -1.0f, 0.0f,
                          3.0f, -0.25f, 1e-3f, std::numeric_limits<float>::infinity()};
  const float scale = scales[in.range(0, 7)];
  // x and y apart, y == x (in place), or y overlapping x partially.
  const int place = in.byte() < 48 ? in.range(1, 2) : 0;
  const int64_t x_span =
      huge || rows == 0 || cols == 0 ? 0 : (rows - 1) * std::max<int64_t>(ldx, 1) + cols;
  const int64_t y_span =
      huge || rows == 0 || cols == 0 ? 0 : (rows - 1) * std::max<int64_t>(ldy, 1) + cols;
  std::vector<float> arena(size_t(x_span + y_span + rows * !huge + 16));
  in.fill(arena, 50.0f, true);
  float* x = arena.data();
  float* y = x + x_span;
  if (place == 1 && ldx == ldy) y = x;
  // (With x_span 1, y = x + x_span is already x + 1, and apart.)
  const bool partial = place == 2 && x_span > 1;
  if (partial) y = x + 1;
  const std::vector<float> before(arena);
  tessera_status s;
  if (op == 0)
    s = tessera_softmax(rows, cols, x, ldx, y, ldy, scale);
  else if (op == 1)
    s = tessera_log_softmax(rows, cols, x, ldx, y, ldy, scale);
  else
    s = tessera_logsumexp(rows, cols, x, ldx, scale, y);
  if (s != TESSERA_OK) {
    if (std::memcmp(before.data(), arena.data(), arena.size() * 4) != 0)
      fz::violated("a rejected call wrote", tessera_last_error());
    fz::rejected(s, {});
    const bool apart = y != x && !partial;
    if (!huge && std::isfinite(scale) && ldx >= need && (op == 2 || ldy >= need) &&
        !(s == TESSERA_OUT_OF_MEMORY && ws.bound()) && (apart || (y == x && op != 2)))
      fz::violated("a valid call was rejected", tessera_last_error());
    return 0;
  }
  if (huge) return 0;
  if (partial && rows > 0 && cols > 0)
    fz::violated("an output partially overlapping x was accepted", "");
  if (y == x && op == 2 && rows > 0 && cols > 0) fz::violated("out over x was accepted", "");
  std::vector<float> ref(before.begin() + (y - x), before.end());
  const float* x0 = before.data();
  if (op == 0)
    tessera::reference::softmax(rows, cols, x0, ldx, ref.data(), ldy, scale);
  else if (op == 1)
    tessera::reference::log_softmax(rows, cols, x0, ldx, ref.data(), ldy, scale);
  else
    tessera::reference::logsumexp(rows, cols, x0, ldx, scale, ref.data());
  const size_t n = op == 2 ? size_t(rows) : size_t(y_span);
  fz::expect_close(y, ref.data(), n, 1e-4, "softmax family result");
  return 0;
}
