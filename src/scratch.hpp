// Per-thread scratch memory: packed panels live in 64-byte aligned buffers that grow to the
// largest size a thread has needed and are then reused, so the steady state allocates nothing.
#pragma once

#include <cstddef>
#include <cstdlib>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace tessera::detail {

class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { std::free(data_); }

  // At least `floats` floats, 64-byte aligned; nullptr if the allocation fails.
  float* floats(size_t floats) {
    if (floats > capacity_) {
      // Buffers of 2 MB and more (a packed B block) are 2 MB aligned and asked for as huge
      // pages: packing scatters each source row over every panel of the block, one 4 KB page
      // per panel, and under virtualisation each TLB miss is a two-level page walk.
      const size_t align = floats * sizeof(float) >= kHugePage ? kHugePage : 64;
      const size_t bytes = (floats * sizeof(float) + align - 1) / align * align;
      void* p = std::aligned_alloc(align, bytes);
      if (!p) return nullptr;
#ifdef MADV_HUGEPAGE
      if (align == kHugePage) madvise(p, bytes, MADV_HUGEPAGE);  // advice only: may be refused
#endif
      std::free(data_);
      data_ = static_cast<float*>(p);
      capacity_ = bytes / sizeof(float);
    }
    return data_;
  }

 private:
  static constexpr size_t kHugePage = size_t(2) << 20;
  float* data_ = nullptr;
  size_t capacity_ = 0;
};

// Scratch of the calling thread, one per purpose.
enum class ScratchSlot {
  gemm_a,
  gemm_b,
  attention,
  decode_partials,
  decode_merge,
  softmax,
  softmax_parts,
  softmax_negated,
  additive,
  count
};
Scratch& thread_scratch(ScratchSlot slot);

}  // namespace tessera::detail
