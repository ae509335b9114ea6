// Rotary position embeddings (tessera_rope; the layer's `rope` option): a position's table once
// for every head of its token, then the table's rotation kernel over those heads.
#pragma once

#include <cstdint>

#include "tessera/attention.hpp"

namespace tessera::detail {

// desc's rope fields, checked (names as `prefix`rope.field), against head_dim.
Status check_rope(const char* prefix, const tessera_rope_desc& r, int64_t head_dim);

// Tokens t < tokens at positions pos(t): for each, the heads_a heads of a + t lda (ld_head
// floats apart) and heads_b of b + t ldb (b may be null) rotated in place. Parallel over tokens.
struct RopeRows {
  float* x;
  int64_t heads, ld_token, ld_head;
};
template <class Pos>
void rope_tokens(const tessera_rope_desc& r, int64_t head_dim, int64_t tokens, const Pos& pos,
                 RopeRows a, RopeRows b);
// The positions of the layer and of tessera_rope: an array, or start + i.
struct RopePositions {
  const int64_t* p;
  int64_t start, seq;  // token t = (batch, i), i = t % seq
  double operator()(int64_t t) const { return double(p ? p[t] : start + t % seq); }
};
extern template void rope_tokens<RopePositions>(const tessera_rope_desc&, int64_t, int64_t,
                                                const RopePositions&, RopeRows, RopeRows);

}  // namespace tessera::detail
