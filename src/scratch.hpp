// Per-thread scratch memory: packed panels live in 64-byte aligned buffers that grow to the
// largest size a thread has needed and are then reused, so the steady state allocates nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace tessera::detail {

class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { release(); }

  // At least `floats` floats, 64-byte aligned; nullptr if the allocation fails.
  float* floats(size_t floats) { return floats <= capacity_ ? data_ : grow(floats); }
  void release();

 private:
  float* grow(size_t floats);
  float* data_ = nullptr;
  size_t capacity_ = 0;
};

// Scratch of the calling thread, one per purpose, at the thread's current call depth.
enum class ScratchSlot {
  gemm_a,
  gemm_b,
  gemm_tasks,  // the slices of a product's tasks (gemm_split.hpp: TaskScratch)
  attention,
  decode_partials,
  softmax,
  softmax_parts,
  softmax_negated,
  additive,
  layer,  // tessera_mha_forward's workspace when the caller gives none
  count
};
Scratch& thread_scratch(ScratchSlot slot);

// One block of a call's scratch cut into equal slices, one for each task running at once: a
// task claims a free slice and gives it back when done. (Indexing by the arena slot is not
// safe: TBB gives an arena of max_concurrency 1 two slots.) Taken whole before the parallel
// region, so that a failure comes before any output is written.
class Slices {
 public:
  // A block of `count` slices of `floats` floats each from `s`; false if it cannot be had.
  bool reserve(Scratch& s, size_t floats, int count);
  float* claim();
  void release(const float* slice);

  // The slice of the task that holds it.
  class Lease {
   public:
    explicit Lease(Slices& s) : s_(s), p_(s.claim()) {}
    ~Lease() { s_.release(p_); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    float* get() const { return p_; }

   private:
    Slices& s_;
    float* p_;
  };

 private:
  static constexpr int kMaxSlices = 512;
  float* base_ = nullptr;
  size_t per_ = 0;
  int count_ = 0;
  std::atomic<uint64_t> busy_[kMaxSlices / 64] = {};
};

// Slices for the tasks of a parallel region in the calling thread's arena: one per thread
// it can run at once, and one more.
int slices_for_arena();

// Bytes of scratch held over all threads, and freeing all of it (tessera_release_scratch):
// release waits for the calls in flight, and calls wait while it runs.
size_t scratch_bytes();
void release_all_scratch();

// Marks a public call running on this thread for its lifetime. A thread that waits inside a
// parallel region can run another call's work in the meantime (an arena that is full runs a
// caller's task_arena::execute on one of its threads), and that call must not take the scratch
// the first one still holds: each call depth has its own.
class CallDepth {
 public:
  CallDepth();  // at depth 0, also holds release_all_scratch off until the call ends
  ~CallDepth();
  CallDepth(const CallDepth&) = delete;
  CallDepth& operator=(const CallDepth&) = delete;
};

}  // namespace tessera::detail
