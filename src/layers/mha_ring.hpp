// The layer's ring cache (desc.ring_window > 0, StreamingLLM): the first ring_keep positions
// pinned in slots 0..keep-1, every later position p in slot keep + (p - keep) % R, R =
// cache_capacity - keep >= window. cache_len counts every token seen, so positions (and rotary
// angles) keep counting while the memory stays that of the capacity. A query at position P sees
// key j <= P where j < keep or j > P - window. The attention reads the slots in place, in slot
// order (softmax does not care which): with no mask where every filled slot is visible to every
// query (one new token and R == window: a decode step), else with a keep-mask the layer builds
// from each slot's position.
#pragma once

#include <cstdint>

#include "layers/mha_check.hpp"

namespace tessera::detail {

inline bool ring_on(const MhaDesc& d) { return d.ring_window > 0 && d.k_cache != nullptr; }

// The ring's fields and the call's other options against them (before anything is written).
Status check_mha_ring(const MhaDesc& d);

// The slot of position p.
int64_t ring_slot(const MhaDesc& d, int64_t p);

// Bytes of the keep-mask a call needs (0: none, every filled slot visible).
int64_t ring_mask_bytes(const MhaDesc& d);

// The attention over the ring: kv_len the filled slots, no causal or window rule (the mask
// carries them), mask as given (q_len rows of cache_capacity bytes) or null.
void ring_attention(const MhaDesc& d, const uint8_t* mask, tessera_attention_desc& a);

// mask[i cap + s]: query i sees the row in slot s (after the call's rows are written).
void ring_mask(const MhaDesc& d, uint8_t* mask);

}  // namespace tessera::detail
