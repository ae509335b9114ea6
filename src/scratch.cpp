// Scratch memory: per thread, per call depth, per purpose; grown to the largest need and kept,
// counted, and freed on request (tessera_release_scratch) when no call is in flight.
#include "scratch.hpp"

#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <deque>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace tessera::detail {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;
std::atomic<size_t> g_bytes{0};

struct ThreadScratch;
// Calls hold it shared; release_all_scratch exclusively. The registry lists every thread's
// scratch (threads add theirs on first use and remove it when they exit).
std::shared_mutex g_calls;
std::mutex g_registry_lock;
std::set<ThreadScratch*>& registry() {
  static auto* r = new std::set<ThreadScratch*>;  // never destroyed: threads exit after main
  return *r;
}

struct ThreadScratch {
  int depth = 0;
  // One set of slots per call depth, made when first reached (a deque never moves them).
  std::deque<std::array<Scratch, static_cast<size_t>(ScratchSlot::count)>> levels;
  ThreadScratch() {
    std::lock_guard<std::mutex> guard(g_registry_lock);
    registry().insert(this);
  }
  ~ThreadScratch() {
    std::lock_guard<std::mutex> guard(g_registry_lock);
    registry().erase(this);
  }
};
thread_local ThreadScratch t_scratch;

}  // namespace

float* Scratch::grow(size_t floats) {
  // Buffers of 2 MB and more (a packed B block) are 2 MB aligned and asked for as huge pages:
  // packing scatters each source row over every panel of the block, one 4 KB page per panel,
  // and under virtualisation each TLB miss is a two-level page walk.
  const size_t align = floats * sizeof(float) >= kHugePage ? kHugePage : 64;
  if (floats > (SIZE_MAX - align) / sizeof(float)) return nullptr;
  const size_t bytes = (floats * sizeof(float) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, bytes);
  if (!p) return nullptr;
#ifdef MADV_HUGEPAGE
  if (align == kHugePage) madvise(p, bytes, MADV_HUGEPAGE);  // advice only: may be refused
#endif
  release();
  data_ = static_cast<float*>(p);
  capacity_ = bytes / sizeof(float);
  g_bytes += bytes;
  return data_;
}

void Scratch::release() {
  std::free(data_);
  g_bytes -= capacity_ * sizeof(float);
  data_ = nullptr;
  capacity_ = 0;
}

Scratch& thread_scratch(ScratchSlot slot) {
  ThreadScratch& t = t_scratch;
  while (int(t.levels.size()) <= t.depth) t.levels.emplace_back();
  return t.levels[size_t(t.depth)][static_cast<size_t>(slot)];
}

CallDepth::CallDepth() {
  if (t_scratch.depth++ == 0) g_calls.lock_shared();
}
CallDepth::~CallDepth() {
  if (--t_scratch.depth == 0) g_calls.unlock_shared();
}

size_t scratch_bytes() { return g_bytes.load(); }

void release_all_scratch() {
  std::unique_lock<std::shared_mutex> no_calls(g_calls);
  std::lock_guard<std::mutex> guard(g_registry_lock);
  for (ThreadScratch* t : registry())
    for (auto& level : t->levels)
      for (Scratch& s : level) s.release();
}

bool Slices::reserve(Scratch& s, size_t floats, int count) {
  count_ = std::min(count, kMaxSlices);
  per_ = (floats + 15) / 16 * 16;  // each slice 64-byte aligned
  base_ =
      per_ <= SIZE_MAX / sizeof(float) / size_t(count_) ? s.floats(per_ * size_t(count_)) : nullptr;
  return base_ != nullptr;
}

float* Slices::claim() {
  for (;;) {  // at most one pass while slices >= running tasks; else wait for one to end
    for (int i = 0; i < count_; ++i) {
      std::atomic<uint64_t>& word = busy_[i / 64];
      const uint64_t bit = uint64_t(1) << (i % 64);
      if (!(word.fetch_or(bit, std::memory_order_acquire) & bit)) return base_ + size_t(i) * per_;
    }
    std::this_thread::yield();
  }
}

void Slices::release(const float* slice) {
  const auto i = size_t(slice - base_) / per_;
  busy_[i / 64].fetch_and(~(uint64_t(1) << (i % 64)), std::memory_order_release);
}

int slices_for_arena() { return tbb::this_task_arena::max_concurrency() + 1; }

}  // namespace tessera::detail
