// Peer libraries measured in the same run: OpenBLAS, BLIS (its auto-selected kernels and, in a
// second copy, BLIS_ARCH_TYPE=skx) and oneDNN. Each is dlopen'ed locally (see peers.cpp), so
// their identical cblas_* exports never meet and a missing library only removes its rows. Every
// peer reports which kernel answered, so no peer runs under a wrong name.
#pragma once

#include <string>
#include <vector>

#include "tessera/common.hpp"

namespace bench {

struct GemmPeer {
  std::string name;    // row label: "openblas", "blis", "blis-skx", "onednn"
  std::string kernel;  // what the library says it runs: core name, BLIS arch, oneDNN version
  // Row-major C = alpha op(A) op(B) + beta C.
  void (*sgemm)(const GemmPeer& self, tessera::Transpose ta, tessera::Transpose tb, int64_t m,
                int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                int64_t ldb, float beta, float* c, int64_t ldc) = nullptr;
  void (*set_threads)(const GemmPeer& self, int threads) = nullptr;
  void* fn = nullptr;  // the library's gemm entry point
  // oneDNN's dnnl_gemm_bf16bf16f32 (row-major, bf16 A and B, f32 C), or null.
  void* bf16_fn = nullptr;
  // oneDNN's dnnl_gemm_u8s8s32 (row-major, u8 A, s8 B, s32 C, one offset per matrix), or null.
  void* u8s8_fn = nullptr;
  void* threads_fn = nullptr;  // the library's thread-count setter
};

// The peers found on this machine (loaded once).
const std::vector<GemmPeer>& gemm_peers();

}  // namespace bench
