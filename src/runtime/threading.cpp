// Thread control inside Tessera's own arena: tessera_set_num_threads(n) makes every call run in a
// task_arena of n slots, leaving the application's own TBB work (its arenas, its parallelism
// limit) as it was. A process-wide tbb::global_control used to cap the host's TBB work as well.
#include "runtime/threading.hpp"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/error.hpp"
#include "tessera/threading.hpp"

namespace tessera {
namespace detail {
namespace {

std::atomic<tbb::task_arena*> g_arena{nullptr};  // null: the caller's arena

// One arena per thread count ever asked for, never destroyed: a call still running in an
// arena that a later set_num_threads replaced must find it alive.
tbb::task_arena* arena_for(int n) {
  static std::mutex lock;
  static std::map<int, std::unique_ptr<tbb::task_arena>> arenas;
  std::lock_guard<std::mutex> guard(lock);
  auto& a = arenas[n];
  if (!a) a = std::make_unique<tbb::task_arena>(n);
  return a.get();
}

}  // namespace

tbb::task_arena* tessera_arena() { return g_arena.load(std::memory_order_acquire); }

}  // namespace detail

size_t scratch_bytes() { return detail::scratch_bytes(); }

Status release_scratch() {
  detail::release_all_scratch();
  return Status::ok;
}

Status bind_workspace(void* buffer, size_t bytes) {
  if (!buffer && bytes != 0)
    return detail::fail(Status::invalid_argument,
                        "bytes = %zu with a NULL buffer (unbinding takes bytes = 0)", bytes);
  detail::bind_workspace(buffer, bytes);
  return Status::ok;
}

size_t workspace_peak() { return detail::workspace_peak(); }

Status set_num_threads(int n) {
  detail::g_arena.store(n > 0 ? detail::arena_for(n) : nullptr, std::memory_order_release);
  return Status::ok;
}

}  // namespace tessera
