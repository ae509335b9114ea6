// Validation of a tessera_attention_desc and its tensors (shared by the attention entry point
// and the layers that build descriptors).
#pragma once

#include "runtime/check.hpp"

namespace tessera::detail {

// tensors = false checks the sizes, strides and options alone (attention_desc_init, where the
// tensors are not known yet); true also the tensor pointers and that no output (o, lse) shares
// memory with another argument.
Status check_attention(const tessera_attention_desc& d, const float* q, const void* k,
                       const void* v, const float* o, bool tensors = true);

// A pool of pages (paged K/V, in the attention and the layer's cache): page_size a positive
// multiple of 16, num_pages >= 0 and an int32 table's entry.
Status check_page_pool(int64_t page_size, int64_t num_pages);

}  // namespace tessera::detail
