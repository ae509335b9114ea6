// Where a call runs: in Tessera's own arena when tessera_set_num_threads set one, else in the
// caller's current arena. Every public C++ entry point goes through in_arena.
#pragma once

#include <tbb/task_arena.h>

#include "runtime/scratch.hpp"
#include "runtime/tsan.hpp"
#include "tessera/common.hpp"

namespace tessera::detail {

// The arena set by set_num_threads, or null.
tbb::task_arena* tessera_arena();

template <class F>
Status in_arena(F&& f) {
  tbb::task_arena* arena = tessera_arena();
  Workspace* ws = call_workspace();  // the calling thread's, wherever the call runs
  if (arena == nullptr) {
    const CallDepth call(ws);
    return f();
  }
  Status s = Status::ok;
  ForkJoin fj;  // execute may run f on a thread of the arena
  arena->execute(task_body(fj, [&] {
    const CallDepth call(ws);  // on the thread that runs it
    s = f();
  }));
  fj.join();
  return s;
}

}  // namespace tessera::detail
