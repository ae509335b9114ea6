// The steps of fused attention's key loop that live in files of their own (key_loop.cpp runs
// them): one task's fixed inputs and the P V step of each V storage type (pv_steps.cpp).
#pragma once

#include <cstdint>

#include "arch/kernels.hpp"
#include "attention/attention_tile.hpp"
#include "attention/kv_rows.hpp"

namespace tessera::detail::fa {

// One task's fixed inputs, shared by the steps.
struct Task {
  const Geometry& g;
  const arch::KernelTable& kt;
  int64_t b, hk, i0, bq, rows;
  const KvRows& krows;
  const KvRows& vrows;
  TileState& st;
};

// O += P V over the keys [lo, hi) of the tile at j0 (n keys; few rows: the packed path takes
// the whole tile, prefetching the next tile's next_n K rows), `a` the rows to prefetch.
using PvStep = void (*)(const Task& t, const Ahead& a, int64_t j0, int64_t n, int64_t next_n,
                        int64_t lo, int64_t hi);

// The P V step for this task's rows and V storage type.
PvStep pv_step(const Task& t, bool few);

// Few rows with 16-bit V, read in place: its calls take kDecodeKeys keys over short pages
// (KvRows::call_keys), so a task of several heads gives it a whole page group at a time.
void pv_in_place_16(const Task& t, const Ahead& a, int64_t j0, int64_t n, int64_t next_n,
                    int64_t lo, int64_t hi);

}  // namespace tessera::detail::fa
