// Per-thread scratch memory: packed panels live in 64-byte aligned buffers that grow to the
// largest size a thread has needed and are then reused, so the steady state allocates nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace tessera::detail {

// A caller's buffer bound to its thread (bind_workspace): the scratch of the calls made on that
// thread is carved from it, a stack that each call pops when it returns.
struct Workspace {
  char* base = nullptr;  // 64-byte aligned
  size_t bytes = 0, used = 0, peak = 0;
};

// Memory that outlives a call (a prepared layer's packed weights). From 2 MB on, a mapping of its
// own, 2 MB aligned and advised as huge pages before anything touches it: a decode step streams
// every byte of it once, and each 4 KB page is a TLB miss, a two-level walk under virtualisation.
// (Heap memory may come back already faulted in as 4 KB pages, which the advice does not remap.)
// 64-byte aligned from the heap below 2 MB.
class LongLived {
 public:
  LongLived() = default;
  ~LongLived();
  LongLived(const LongLived&) = delete;
  LongLived& operator=(const LongLived&) = delete;
  bool allocate(size_t bytes);  // false when it fails; frees what it held first
  void* data() const { return p_; }

 private:
  void release();
  void* p_ = nullptr;
  size_t mapped_ = 0;  // the mapping's bytes, 0 for heap memory
};
// The bytes LongLived::allocate(bytes) takes (0 when they overflow).
size_t long_lived_bytes(size_t bytes);

class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { release(); }

  // At least `floats` floats, 64-byte aligned; nullptr if the allocation fails (or the bound
  // workspace is full).
  float* floats(size_t floats) { return floats <= capacity_ ? data_ : grow(floats); }
  void release();
  // Empty, and from now on carved from ws (null: from the heap).
  void carve_from(Workspace* ws) {
    release();
    ws_ = ws;
  }

 private:
  float* grow(size_t floats);
  float* data_ = nullptr;
  size_t capacity_ = 0;
  Workspace* ws_ = nullptr;
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

// The workspace a call made now on this thread takes its scratch from: the one of the call
// running on it (a nested call, or a call TBB runs here for another thread), else the thread's
// own binding; null: the heap.
Workspace* call_workspace();
// Binds buffer (null: unbinds) to the calling thread; the most bytes of it any call has used.
void bind_workspace(void* buffer, size_t bytes);
size_t workspace_peak();

// Marks a public call running on this thread for its lifetime. A thread that waits inside a
// parallel region can run another call's work in the meantime (an arena that is full runs a
// caller's task_arena::execute on one of its threads), and that call must not take the scratch
// the first one still holds: each call depth has its own. With a workspace (call_workspace on
// the calling thread), the call's scratch is carved from it and given back when it returns.
class CallDepth {
 public:
  explicit CallDepth(Workspace* ws);  // at depth 0, also holds release_all_scratch off
  ~CallDepth();
  CallDepth(const CallDepth&) = delete;
  CallDepth& operator=(const CallDepth&) = delete;

 private:
  Workspace* ws_;
  Workspace* outer_;  // the workspace of the call this one runs inside, if any
  size_t mark_ = 0;
};

}  // namespace tessera::detail
