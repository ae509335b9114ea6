#include <memory>
#include <mutex>

#include <tbb/global_control.h>

#include "error.hpp"
#include "tessera/threading.hpp"

namespace tessera {

Status set_num_threads(int n) {
  static std::mutex lock;
  static std::unique_ptr<tbb::global_control> control;
  std::lock_guard<std::mutex> guard(lock);
  control.reset();
  if (n > 0) {
    control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                    static_cast<size_t>(n));
  }
  return Status::ok;
}

}  // namespace tessera
