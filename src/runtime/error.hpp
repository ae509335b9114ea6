// Thread-local error reporting: every rejected argument is named in tessera_last_error().
#pragma once

#include <atomic>
#include <mutex>

#include "tessera/common.hpp"

namespace tessera::detail {

// Records a printf-style message for last_error() and returns `s`.
Status fail(Status s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void clear_error();

// The outcome of a call's parallel tasks: the first failure and its message, which the task
// recorded on its own thread, handed back on the calling thread by result().
class TaskStatus {
 public:
  void record(Status s);
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  // Status::ok, or the first failure with its message set for last_error() on this thread.
  Status result() const;

 private:
  std::atomic<bool> failed_{false};
  std::mutex lock_;
  Status status_ = Status::ok;
  char message_[512] = "";
};

}  // namespace tessera::detail
