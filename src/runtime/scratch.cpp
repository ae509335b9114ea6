// Scratch memory: per thread, per call depth, per purpose; grown to the largest need and kept,
// counted, and freed on request (tessera_release_scratch) when no call is in flight.
#include "runtime/scratch.hpp"

#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <shared_mutex>
#include <thread>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace tessera::detail {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;
constexpr int kMaxDepth = 8;  // nested calls: a layer's own calls, a call TBB runs meanwhile
std::atomic<size_t> g_bytes{0};

using Level = std::array<Scratch, static_cast<size_t>(ScratchSlot::count)>;

// Calls hold it shared; release_all_scratch exclusively. The registry lists every thread's
// scratch (threads add theirs on first use and remove it when they exit). Fixed arrays and an
// intrusive list: a thread's first call allocates nothing of its own.
std::shared_mutex g_calls;
std::mutex g_registry_lock;
struct ThreadScratch;
ThreadScratch* g_threads = nullptr;

struct ThreadScratch {
  int depth = 0;
  Level heap[kMaxDepth];   // scratch held across calls, per call depth
  Level bound[kMaxDepth];  // carved from the call's workspace, per call depth
  Workspace own;           // this thread's binding (base null: none)
  Workspace* current = nullptr;
  Workspace none;  // zero bytes: past kMaxDepth every request fails
  Scratch past_depth;
  ThreadScratch *prev = nullptr, *next = nullptr;
  ThreadScratch() {
    past_depth.carve_from(&none);
    std::lock_guard<std::mutex> guard(g_registry_lock);
    next = g_threads;
    if (next) next->prev = this;
    g_threads = this;
  }
  ~ThreadScratch() {
    std::lock_guard<std::mutex> guard(g_registry_lock);
    (prev ? prev->next : g_threads) = next;
    if (next) next->prev = prev;
  }
};
thread_local ThreadScratch t_scratch;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// long_lived_bytes(bytes) from the heap (bytes as it rounds them), advised as huge pages from
// 2 MB. Scratch takes it: the allocation tests make it fail through malloc's entry points.
void* allocate_heap(size_t rounded) {
  void* p = std::aligned_alloc(rounded >= kHugePage ? kHugePage : 64, rounded);
#ifdef MADV_HUGEPAGE
  if (p && rounded >= kHugePage) madvise(p, rounded, MADV_HUGEPAGE);  // advice only
#endif
  return p;
}

}  // namespace

size_t long_lived_bytes(size_t bytes) {
  const size_t align = bytes >= kHugePage ? kHugePage : 64;
  return bytes > SIZE_MAX - align ? 0 : round_up(bytes, align);
}

LongLived::~LongLived() { release(); }

void LongLived::release() {
#ifdef __linux__
  if (mapped_) munmap(p_, mapped_);
#endif
  if (!mapped_) std::free(p_);
  p_ = nullptr, mapped_ = 0;
}

bool LongLived::allocate(size_t bytes) {
  release();
  const size_t rounded = long_lived_bytes(bytes);
  if (rounded == 0 || rounded > SIZE_MAX / 2) return false;  // no such allocation can succeed
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (rounded >= kHugePage) {
    // Mapped with a huge page to spare, then trimmed to the 2 MB aligned span inside.
    void* m = mmap(nullptr, rounded + kHugePage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return false;
    char* const base = static_cast<char*>(m);
    const size_t head = (kHugePage - reinterpret_cast<uintptr_t>(base) % kHugePage) % kHugePage;
    if (head) munmap(base, head);
    munmap(base + head + rounded, kHugePage - head);  // head < kHugePage: a tail is left
    p_ = base + head, mapped_ = rounded;
    madvise(p_, rounded, MADV_HUGEPAGE);  // advice only: may be refused
    return true;
  }
#endif
  p_ = allocate_heap(rounded);
  return p_ != nullptr;
}

float* Scratch::grow(size_t floats) {
  if (ws_) {
    // Carved from the top of the workspace; the buffer that is on top grows in place.
    if (floats > (SIZE_MAX - 64) / sizeof(float)) return nullptr;
    const size_t bytes = round_up(floats * sizeof(float), 64);
    const bool on_top =
        data_ && reinterpret_cast<char*>(data_ + capacity_) == ws_->base + ws_->used;
    const size_t start = on_top ? size_t(reinterpret_cast<char*>(data_) - ws_->base) : ws_->used;
    if (bytes > ws_->bytes - start) return nullptr;
    ws_->used = start + bytes;
    ws_->peak = std::max(ws_->peak, ws_->used);
    // cppcheck-suppress invalidPointerCast
    data_ = reinterpret_cast<float*>(ws_->base + start);
    capacity_ = bytes / sizeof(float);
    return data_;
  }
  // Buffers of 2 MB and more (a packed B block) in huge pages: packing scatters each source
  // row over every panel of the block, one 4 KB page per panel.
  if (floats > (SIZE_MAX - kHugePage) / sizeof(float)) return nullptr;
  const size_t bytes = long_lived_bytes(floats * sizeof(float));  // as allocated
  void* p = allocate_heap(bytes);
  if (!p) return nullptr;
  release();
  data_ = static_cast<float*>(p);
  capacity_ = bytes / sizeof(float);
  g_bytes += bytes;
  return data_;
}

void Scratch::release() {
  if (!ws_) {
    std::free(data_);
    g_bytes -= capacity_ * sizeof(float);
  }
  data_ = nullptr;
  capacity_ = 0;
}

Scratch& thread_scratch(ScratchSlot slot) {
  ThreadScratch& t = t_scratch;
  if (t.depth >= kMaxDepth) return t.past_depth;
  return (t.current ? t.bound : t.heap)[t.depth][static_cast<size_t>(slot)];
}

Workspace* call_workspace() {
  ThreadScratch& t = t_scratch;
  if (t.depth > 0) return t.current;
  return t.own.base ? &t.own : nullptr;
}

void bind_workspace(void* buffer, size_t bytes) {
  Workspace& w = t_scratch.own;
  w = Workspace{};
  if (!buffer) return;
  const auto at = reinterpret_cast<uintptr_t>(buffer);
  const size_t skip = size_t((64 - at % 64) % 64);
  w.base = static_cast<char*>(buffer) + std::min(skip, bytes);
  w.bytes = bytes - std::min(skip, bytes);
}

// With 63 bytes for the alignment of any buffer.
size_t workspace_peak() {
  const size_t peak = t_scratch.own.peak;
  return peak > 0 ? peak + 63 : 0;
}

CallDepth::CallDepth(Workspace* ws) : ws_(ws) {
  ThreadScratch& t = t_scratch;
  if (t.depth++ == 0) g_calls.lock_shared();
  outer_ = t.current;
  t.current = ws;
  if (ws && t.depth < kMaxDepth) {
    mark_ = ws->used;
    for (Scratch& s : t.bound[t.depth]) s.carve_from(ws);
  }
}

CallDepth::~CallDepth() {
  ThreadScratch& t = t_scratch;
  if (ws_ && t.depth < kMaxDepth) {
    for (Scratch& s : t.bound[t.depth]) s.carve_from(nullptr);
    ws_->used = mark_;
  }
  t.current = outer_;
  if (--t.depth == 0) g_calls.unlock_shared();
}

size_t scratch_bytes() { return g_bytes.load(); }

void release_all_scratch() {
  std::unique_lock<std::shared_mutex> no_calls(g_calls);
  std::lock_guard<std::mutex> guard(g_registry_lock);
  for (ThreadScratch* t = g_threads; t; t = t->next)
    for (Level& level : t->heap)
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
  // First the slice of the thread's arena slot: a thread then gets the same slice call after
  // call, still in its core's caches (a slice claimed in any order was last written by the other
  // core half the time: the streamed-B sums of 4 x 1024 x 1024 on 2 threads ran 21% slower).
  // Only a preference: two tasks of one slot (TBB gives an arena of concurrency 1 two slots)
  // find it taken, and scan.
  const int home = tbb::this_task_arena::current_thread_index();
  if (home >= 0 && home < count_) {
    const uint64_t bit = uint64_t(1) << (home % 64);
    if (!(busy_[home / 64].fetch_or(bit, std::memory_order_acquire) & bit))
      return base_ + size_t(home) * per_;
  }
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
