// ThreadSanitizer cannot see the synchronisation inside TBB (Debian's libtbb is not built with
// it), so it reports every task's reads of what the forking thread wrote, and the code after a
// parallel region reading what its tasks wrote, as races. Each parallel region here tells it
// what TBB guarantees, and nothing more:
//  - a task body (TaskBody) is made, and copied by TBB, before it runs: its constructors
//    release at the copy's own address and its call acquires there first (taking the address
//    reads no memory), so a task sees what the thread that made its copy had written;
//  - a region's tasks end before the code after it: each call releases at the region's
//    ForkJoin, which join() acquires.
// Outside TSan builds all of this is empty. tests/tsan.supp holds only TBB's own accesses.
#pragma once

#include <utility>

#if defined(__SANITIZE_THREAD__)
#define TESSERA_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TESSERA_TSAN 1
#endif
#endif

#ifdef TESSERA_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace tessera::detail {

inline void tsan_acquire(const void* p) {
#ifdef TESSERA_TSAN
  __tsan_acquire(const_cast<void*>(p));
#else
  (void)p;
#endif
}
inline void tsan_release(const void* p) {
#ifdef TESSERA_TSAN
  __tsan_release(const_cast<void*>(p));
#else
  (void)p;
#endif
}

class ForkJoin {
 public:
  void join() const { tsan_acquire(&token_); }
  void task_end() const { tsan_release(&token_); }

 private:
  char token_ = 0;
};

template <class F>
class TaskBody {
 public:
  TaskBody(const ForkJoin& fj, F f) : fj_(&fj), f_(std::move(f)) { tsan_release(this); }
  TaskBody(const TaskBody& o) : fj_((tsan_acquire(&o), o.fj_)), f_(o.f_) { tsan_release(this); }
  TaskBody& operator=(const TaskBody&) = delete;
  template <class... A>
  void operator()(A&&... args) const {
    tsan_acquire(this);
    f_(std::forward<A>(args)...);
    fj_->task_end();
  }

 private:
  const ForkJoin* fj_;
  F f_;
};

// A parallel region's body: tbb::parallel_for(range, task_body(fj, [&](...) {...}), ...).
template <class F>
TaskBody<F> task_body(const ForkJoin& fj, F f) {
  return TaskBody<F>(fj, std::move(f));
}

}  // namespace tessera::detail
