#include "runtime/verbose.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tessera::detail {

bool verbose_on() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_VERBOSE");
    return v != nullptr && std::strcmp(v, "0") != 0 && *v != '\0';
  }();
  return on;
}

void Verbose::print(const char* op, Status st, const char* rule, const char* kernels, int threads,
                    const char* shape, ...) const {
  if (!on_) return;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  char dims[256];
  va_list args;
  va_start(args, shape);
  std::vsnprintf(dims, sizeof dims, shape, args);
  va_end(args);
  // One fprintf per line, so that lines of concurrent calls do not interleave.
  std::fprintf(stderr, "tessera_verbose,%s,%s,rule:%s,kernels:%s,threads:%d,%s,%.4f\n", op, dims,
               rule, kernels, threads, st == Status::ok ? "ok" : status_string(st), ms);
}

}  // namespace tessera::detail
