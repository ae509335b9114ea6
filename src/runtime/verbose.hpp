// TESSERA_VERBOSE=1: one line per call on stderr, as ONEDNN_VERBOSE prints them:
//   tessera_verbose,<operation>,<shape>,rule:<rule>,kernels:<names>,threads:<n>,<status>,<ms>
// The planner's rule that fired and the registered names of the kernels it chose. Off (the
// default), a call pays one load of a flag.
#pragma once

#include <chrono>
#include <cstdarg>

#include "tessera/common.hpp"

namespace tessera::detail {

bool verbose_on();

class Verbose {
 public:
  Verbose() : on_(verbose_on()) {
    if (on_) t0_ = std::chrono::steady_clock::now();
  }
  bool on() const { return on_; }
  // shape: a printf format and its arguments.
  void print(const char* op, Status st, const char* rule, const char* kernels, int threads,
             const char* shape, ...) const __attribute__((format(printf, 7, 8)));

 private:
  bool on_;
  std::chrono::steady_clock::time_point t0_{};
};

}  // namespace tessera::detail
