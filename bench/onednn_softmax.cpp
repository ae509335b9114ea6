// oneDNN's softmax primitive as a peer, through its C API loaded with dlopen (types from its
// own header, so no struct is guessed). Built only when the header is present.
#include "onednn_softmax.hpp"

#include <dlfcn.h>

#include <oneapi/dnnl/dnnl.h>

namespace bench {
namespace {

struct Api {
  void* h = nullptr;
  decltype(&dnnl_engine_create) engine_create = nullptr;
  decltype(&dnnl_stream_create) stream_create = nullptr;
  decltype(&dnnl_memory_desc_init_by_tag) md_init = nullptr;
  decltype(&dnnl_softmax_forward_desc_init) softmax_init = nullptr;
  decltype(&dnnl_logsoftmax_forward_desc_init) logsoftmax_init = nullptr;
  decltype(&dnnl_primitive_desc_create) pd_create = nullptr;
  decltype(&dnnl_primitive_create) prim_create = nullptr;
  decltype(&dnnl_memory_create) mem_create = nullptr;
  decltype(&dnnl_primitive_execute) execute = nullptr;
  decltype(&dnnl_stream_wait) wait = nullptr;
  void (*omp_threads)(int) = nullptr;
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
};

const Api* api() {
  static Api a = [] {
    Api x;
    x.h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!x.h) return x;
#define TESSERA_SYM(field, name) x.field = reinterpret_cast<decltype(x.field)>(dlsym(x.h, #name))
    TESSERA_SYM(engine_create, dnnl_engine_create);
    TESSERA_SYM(stream_create, dnnl_stream_create);
    TESSERA_SYM(md_init, dnnl_memory_desc_init_by_tag);
    TESSERA_SYM(softmax_init, dnnl_softmax_forward_desc_init);
    TESSERA_SYM(logsoftmax_init, dnnl_logsoftmax_forward_desc_init);
    TESSERA_SYM(pd_create, dnnl_primitive_desc_create);
    TESSERA_SYM(prim_create, dnnl_primitive_create);
    TESSERA_SYM(mem_create, dnnl_memory_create);
    TESSERA_SYM(execute, dnnl_primitive_execute);
    TESSERA_SYM(wait, dnnl_stream_wait);
    TESSERA_SYM(omp_threads, omp_set_num_threads);
#undef TESSERA_SYM
    if (!x.engine_create || !x.stream_create || !x.md_init || !x.softmax_init || !x.pd_create ||
        !x.prim_create || !x.mem_create || !x.execute || !x.wait || !x.omp_threads ||
        x.engine_create(&x.engine, dnnl_cpu, 0) != dnnl_success ||
        x.stream_create(&x.stream, x.engine, dnnl_stream_default_flags) != dnnl_success)
      x.h = nullptr;
    return x;
  }();
  return a.h ? &a : nullptr;
}

}  // namespace

struct OnednnSoftmax::Impl {
  dnnl_primitive_t prim = nullptr;
  dnnl_memory_t src = nullptr, dst = nullptr;
};

OnednnSoftmax::OnednnSoftmax(int64_t rows, int64_t cols, const float* x, float* y, int threads)
    : impl_(new Impl) {
  const Api* a = api();
  if (!a) return;
  a->omp_threads(threads);
  dnnl_memory_desc_t md;
  const dnnl_dims_t dims = {rows, cols};
  dnnl_softmax_desc_t sd;
  dnnl_primitive_desc_t pd;
  if (a->md_init(&md, 2, dims, dnnl_f32, dnnl_ab) != dnnl_success ||
      a->softmax_init(&sd, dnnl_forward_inference, &md, 1) != dnnl_success ||
      a->pd_create(&pd, &sd, nullptr, a->engine, nullptr) != dnnl_success ||
      a->prim_create(&impl_->prim, pd) != dnnl_success ||
      a->mem_create(&impl_->src, &md, a->engine, const_cast<float*>(x)) != dnnl_success ||
      a->mem_create(&impl_->dst, &md, a->engine, y) != dnnl_success)
    impl_->prim = nullptr;
}

OnednnSoftmax::~OnednnSoftmax() { delete impl_; }  // primitives live until exit (bench only)

bool OnednnSoftmax::ok() const { return impl_->prim != nullptr; }

void OnednnSoftmax::run() {
  const Api* a = api();
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, impl_->src}, {DNNL_ARG_DST, impl_->dst}};
  a->execute(impl_->prim, a->stream, 2, args);
  a->wait(a->stream);
}

}  // namespace bench
