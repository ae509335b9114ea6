// Shared by the seed examples: each redoes one of the seed notebooks' computations through
// Tessera's C API and prints its numbers the way NumPy prints them.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tessera/reference.hpp"
#include "tessera/tessera.h"

namespace seed {

// Stops the example on any status but TESSERA_OK, with the message naming the argument.
inline void check(tessera_status s, const char* what) {
  if (s == TESSERA_OK) return;
  std::fprintf(stderr, "%s: %s: %s\n", what, tessera_status_string(s), tessera_last_error());
  std::exit(1);
}

// rows x cols, row-major, as NumPy prints a 2-D array (8 decimals).
inline void print(const char* name, const float* x, int rows, int cols) {
  std::printf("%s =\n[", name);
  for (int i = 0; i < rows; ++i) {
    std::printf(i == 0 ? "[" : " [");
    for (int j = 0; j < cols; ++j) std::printf(j ? " %.8f" : "%.8f", double(x[i * cols + j]));
    std::printf(i + 1 < rows ? "]\n" : "]]\n");
  }
}

// Every element of got within tol of want, else a message and exit status 1.
inline void expect_near(const char* what, const float* got, const float* want, size_t n,
                        double tol) {
  for (size_t i = 0; i < n; ++i)
    if (!(std::fabs(double(got[i]) - double(want[i])) <= tol)) {
      std::fprintf(stderr, "%s: element %zu is %.8f, expected %.8f\n", what, i, double(got[i]),
                   double(want[i]));
      std::exit(1);
    }
}

// C (m x n) = A (m x k) op(B): op(B) = B (k x n) or, with trans, B^T for B n x k (a weight
// stored as PyTorch's Linear stores it).
inline void matmul(int m, int n, int k, const float* a, const float* b, bool trans, float* c) {
  check(tessera_sgemm(TESSERA_NO_TRANS, trans ? TESSERA_TRANS : TESSERA_NO_TRANS, m, n, k, 1.0f, a,
                      k, b, trans ? k : n, 0.0f, c, n),
        "tessera_sgemm");
}

// Deterministic uniform numbers in [lo, hi) (the notebooks draw theirs from NumPy's or
// PyTorch's generators, whose streams are not reproduced here).
struct Random {
  unsigned state;
  float uniform(float lo, float hi) {
    state = state * 1664525u + 1013904223u;
    return lo + (hi - lo) * float(state >> 8) / float(1u << 24);
  }
  int below(int n) { return int(uniform(0.0f, float(n))); }
};

}  // namespace seed
