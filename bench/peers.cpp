#include "peers.hpp"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <fstream>

#include <cstdio>
#include <cstdlib>

#include "tessera/threading.hpp"

namespace bench {
namespace {

using tessera::Transpose;

// RTLD_LOCAL keeps each library's symbols out of the global scope, so OpenBLAS's and BLIS's
// identical cblas_* exports never interpose on each other; dlsym on the handle answers from that
// library. (dlmopen namespaces would isolate more, but each gets its own libc and allocator, and
// the heaps corrupt each other.)
void* open_local(const char* lib) { return dlopen(lib, RTLD_NOW | RTLD_LOCAL); }

// A second, independent instance of a library (its own globals, so its own kernel choice): load
// a private copy of the file, which the dynamic loader cannot match to the loaded one.
void* open_second_instance(const char* lib) {
  void* probe = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!probe) probe = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
  if (!probe) return nullptr;
  char path[4096] = "";
  if (dlinfo(probe, RTLD_DI_ORIGIN, path) != 0) return nullptr;
  const std::string src = std::string(path) + "/" + lib;
  char dir[] = "/tmp/tessera-bench-XXXXXX";
  if (!mkdtemp(dir)) return nullptr;
  const std::string dst = std::string(dir) + "/" + lib;
  std::ifstream in(src, std::ios::binary);
  std::ofstream out(dst, std::ios::binary);
  out << in.rdbuf();
  out.close();
  void* h = in && out ? dlopen(dst.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  std::remove(dst.c_str());  // the mapping stays valid
  rmdir(dir);
  return h;
}

// ---- OpenBLAS: cblas_sgemm -----------------------------------------------------------------
using cblas_sgemm_t = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                               int, float, float*, int);
void openblas_sgemm(const GemmPeer& p, Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k,
                    float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                    float beta, float* c, int64_t ldc) {
  constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
  reinterpret_cast<cblas_sgemm_t>(p.fn)(kRowMajor, ta == Transpose::trans ? kTrans : kNoTrans,
                                        tb == Transpose::trans ? kTrans : kNoTrans, int(m), int(n),
                                        int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}
void openblas_threads(const GemmPeer& p, int t) {
  reinterpret_cast<void (*)(int)>(p.threads_fn)(t);
}

// ---- BLIS: the typed API, with general strides (row-major: rs = ld, cs = 1) -----------------
using bli_sgemm_t = void (*)(int, int, int64_t, int64_t, int64_t, const float*, const float*,
                             int64_t, int64_t, const float*, int64_t, int64_t, const float*, float*,
                             int64_t, int64_t);
void blis_sgemm(const GemmPeer& p, Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k,
                float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                float* c, int64_t ldc) {
  constexpr int kNoTrans = 0, kTrans = 8;  // BLIS_NO_TRANSPOSE, BLIS_TRANSPOSE (1 << 3)
  reinterpret_cast<bli_sgemm_t>(p.fn)(ta == Transpose::trans ? kTrans : kNoTrans,
                                      tb == Transpose::trans ? kTrans : kNoTrans, m, n, k, &alpha,
                                      a, lda, 1, b, ldb, 1, &beta, c, ldc, 1);
}
void blis_threads(const GemmPeer& p, int t) {
  reinterpret_cast<void (*)(int64_t)>(p.threads_fn)(t);
}

// ---- oneDNN: dnnl_sgemm is row-major; threads through its OpenMP runtime --------------------
using dnnl_sgemm_t = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t,
                             const float*, int64_t, float, float*, int64_t);
void onednn_sgemm(const GemmPeer& p, Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k,
                  float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                  float* c, int64_t ldc) {
  reinterpret_cast<dnnl_sgemm_t>(p.fn)(ta == Transpose::trans ? 'T' : 'N',
                                       tb == Transpose::trans ? 'T' : 'N', m, n, k, alpha, a, lda,
                                       b, ldb, beta, c, ldc);
}
void omp_threads(const GemmPeer& p, int t) { reinterpret_cast<void (*)(int)>(p.threads_fn)(t); }

// Sets an environment variable for the scope of one library load (both BLIS and OpenBLAS read
// their kernel override once, when they initialise).
class ScopedEnv {
 public:
  ScopedEnv(const char* var, const char* value) : var_(var) {
    if (const char* old = std::getenv(var)) had_ = true, old_ = old;
    if (value) setenv(var, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(var_, old_.c_str(), 1);
    else
      unsetenv(var_);
  }

 private:
  const char* var_;
  bool had_ = false;
  std::string old_;
};

// OpenBLAS 0.3.21 does not recognise CPUs newer than its release (it falls back to Prescott
// kernels on Sapphire/Emerald Rapids), so it is measured as it runs and forced to SkylakeX.
void add_openblas(std::vector<GemmPeer>& out, const char* coretype) {
  ScopedEnv env("OPENBLAS_CORETYPE", coretype);
  void* h = coretype ? open_second_instance("libopenblas.so.0") : open_local("libopenblas.so.0");
  if (!h) return;
  GemmPeer p;
  p.name = coretype ? "openblas-skx" : "openblas";
  p.fn = dlsym(h, "cblas_sgemm");
  p.threads_fn = dlsym(h, "openblas_set_num_threads");
  auto core = reinterpret_cast<const char* (*)()>(dlsym(h, "openblas_get_corename"));
  if (!p.fn || !p.threads_fn) return;
  p.kernel = core ? core() : "?";
  p.sgemm = openblas_sgemm;
  p.set_threads = openblas_threads;
  out.push_back(p);
}

void add_blis(std::vector<GemmPeer>& out, const char* arch_type) {
  // BLIS 0.9 picks its haswell kernels on this CPU unless told otherwise.
  ScopedEnv env("BLIS_ARCH_TYPE", arch_type);
  void* h = arch_type ? open_second_instance("libblis.so.4") : open_local("libblis.so.4");
  GemmPeer p;
  if (h) {
    p.fn = dlsym(h, "bli_sgemm");
    p.threads_fn = dlsym(h, "bli_thread_set_num_threads");
    auto init = reinterpret_cast<void (*)()>(dlsym(h, "bli_init"));
    auto query = reinterpret_cast<int (*)()>(dlsym(h, "bli_arch_query_id"));
    auto arch_name = reinterpret_cast<const char* (*)(int)>(dlsym(h, "bli_arch_string"));
    if (init) init();
    if (query && arch_name) p.kernel = arch_name(query());
  }
  if (!h || !p.fn || !p.threads_fn) return;
  p.name = arch_type ? std::string("blis-") + arch_type : "blis";
  p.sgemm = blis_sgemm;
  p.set_threads = blis_threads;
  out.push_back(p);
}

void add_onednn(std::vector<GemmPeer>& out) {
  void* h = open_local("libdnnl.so.2");
  if (!h) return;
  GemmPeer p;
  p.name = "onednn";
  p.fn = dlsym(h, "dnnl_sgemm");
  p.bf16_fn = dlsym(h, "dnnl_gemm_bf16bf16f32");
  p.u8s8_fn = dlsym(h, "dnnl_gemm_u8s8s32");
  p.threads_fn = dlsym(h, "omp_set_num_threads");  // from libgomp, a dependency of libdnnl
  struct Version {
    int major, minor, patch;
    const char *hash, *cpu_runtime, *gpu_runtime;
  };
  auto version = reinterpret_cast<const Version* (*)()>(dlsym(h, "dnnl_version"));
  if (!p.fn || !p.threads_fn) return;
  if (version) {
    const Version* v = version();
    char buf[64];
    std::snprintf(buf, sizeof buf, "oneDNN %d.%d.%d", v->major, v->minor, v->patch);
    p.kernel = buf;
  }
  p.sgemm = onednn_sgemm;
  p.set_threads = omp_threads;
  out.push_back(p);
}

}  // namespace

const std::vector<GemmPeer>& gemm_peers() {
  static const std::vector<GemmPeer> peers = [] {
    std::vector<GemmPeer> out;
    // The forced SkylakeX kernels only where the CPU runs AVX-512 (elsewhere they die of an
    // illegal instruction, as they did on a Zen 3 VM).
    const bool avx512 = tessera::isa_supported("avx512");
    add_openblas(out, nullptr);
    if (avx512) add_openblas(out, "SkylakeX");
    add_blis(out, nullptr);
    if (avx512) add_blis(out, "skx");
    add_onednn(out);
    return out;
  }();
  return peers;
}

}  // namespace bench
