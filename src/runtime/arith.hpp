// Integer helpers every room uses: counts of whole tiles, pages and blocks, and sizes rounded to
// whole 64-byte lines (the alignment of every block a layer carves from one allocation).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::detail {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

constexpr size_t kLineBytes = 64;
inline size_t round_up_lines(size_t bytes) {
  return (bytes + kLineBytes - 1) / kLineBytes * kLineBytes;
}

}  // namespace tessera::detail
