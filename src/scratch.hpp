// Per-thread scratch memory: packed panels live in 64-byte aligned buffers that grow to the
// largest size a thread has needed and are then reused, so the steady state allocates nothing.
#pragma once

#include <cstddef>
#include <cstdlib>

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
      const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
      void* p = std::aligned_alloc(64, bytes);
      if (!p) return nullptr;
      std::free(data_);
      data_ = static_cast<float*>(p);
      capacity_ = bytes / sizeof(float);
    }
    return data_;
  }

 private:
  float* data_ = nullptr;
  size_t capacity_ = 0;
};

// Scratch of the calling thread, one per purpose.
enum class ScratchSlot { gemm_a, gemm_b, gemm_edge, attention, softmax, count };
Scratch& thread_scratch(ScratchSlot slot);

}  // namespace tessera::detail
