// oneDNN's softmax primitive, when libdnnl is installed (see onednn_softmax.cpp).
#pragma once

#include <cstdint>

namespace bench {

class OnednnSoftmax {
 public:
  OnednnSoftmax(int64_t rows, int64_t cols, const float* x, float* y, int threads);
  ~OnednnSoftmax();
  OnednnSoftmax(const OnednnSoftmax&) = delete;
  OnednnSoftmax& operator=(const OnednnSoftmax&) = delete;
  bool ok() const;
  void run();

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace bench
