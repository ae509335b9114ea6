// The prepared linear layer: the weight packed once for the active table (float32 panels, 16-bit
// panels, or the integer tile's block panels), then tessera_sgemm_packed per call and the bias.
#include <cstdlib>
#include <cstring>
#include <new>

#include "runtime/arith.hpp"
#include "runtime/check.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/scratch.hpp"
#include "runtime/threading.hpp"
#include "tessera/gemm.hpp"
#include "tessera/layers.hpp"

namespace tessera {

// The packed weight and the bias in one 64-byte aligned block.
struct Linear::Impl {
  int64_t in = 0, out = 0;
  const char* table = nullptr;  // the kernel table the weight was packed for
  detail::LongLived packed;
  const float* bias = nullptr;  // within `packed`'s block, or null
};

namespace {

Status check_desc(const LinearDesc& d) {
  TESSERA_CHECK(detail::check_positive("desc->in_features", d.in_features));
  TESSERA_CHECK(detail::check_positive("desc->out_features", d.out_features));
  const DType t = DType(d.weight_type);
  TESSERA_CHECK(detail::check_storage_type("desc->weight_type", t));
  TESSERA_CHECK(detail::check_block_kernels("desc->weight_type", t, detail::active_table()));
  TESSERA_CHECK(detail::check_blocks("desc->in_features", d.in_features, t));
  TESSERA_CHECK(detail::check_ptr("desc->weight", d.weight, true));
  int64_t values = 0;
  return detail::checked_count("desc->weight", {d.in_features, d.out_features}, values);
}

size_t packed_size(const LinearDesc& d) {
  const DType t = DType(d.weight_type);
  const int64_t k = d.in_features, n = d.out_features;
  if (t == DType::f32) return sgemm_pack_b_size(Transpose::trans, k, n);
  if (detail::is_block(t)) return sgemm_pack_bq_size(Transpose::trans, k, n, t);
  return sgemm_pack_b16_size(Transpose::trans, k, n);
}

Status pack(const LinearDesc& d, void* out, size_t bytes) {
  const DType t = DType(d.weight_type);
  const int64_t k = d.in_features, n = d.out_features;
  const auto tr = Transpose::trans;
  if (t == DType::f32)
    return sgemm_pack_b(tr, k, n, static_cast<const float*>(d.weight), k, out, bytes);
  if (detail::is_block(t)) return sgemm_pack_bq(tr, k, n, t, d.weight, k, out, bytes);
  return sgemm_pack_b16(tr, k, n, t, d.weight, k, out, bytes);
}

}  // namespace

Linear& Linear::operator=(Linear&& o) noexcept {
  if (this != &o) {
    delete impl_;
    impl_ = o.impl_;
    o.impl_ = nullptr;
  }
  return *this;
}

Linear::~Linear() { delete impl_; }

int64_t Linear::in_features() const { return impl_ ? impl_->in : 0; }
int64_t Linear::out_features() const { return impl_ ? impl_->out : 0; }

Status Linear::init(const LinearDesc& d) {
  return detail::in_arena([&] {
    TESSERA_CHECK(check_desc(d));
    const size_t bytes = packed_size(d);
    if (bytes == 0)
      return detail::fail(Status::invalid_argument, "desc: the weight cannot be packed");
    const size_t bias_bytes = d.bias ? size_t(d.out_features) * sizeof(float) : 0;
    auto* impl = new (std::nothrow) Impl;
    if (!impl || !impl->packed.allocate(detail::round_up_lines(bytes) +
                                        detail::round_up_lines(bias_bytes))) {
      delete impl;
      return detail::fail(Status::out_of_memory, "linear: cannot allocate %zu bytes", bytes);
    }
    const Status s = pack(d, impl->packed.data(), bytes);
    if (s != Status::ok) {
      delete impl;
      return s;
    }
    if (d.bias) {
      char* at = static_cast<char*>(impl->packed.data()) + detail::round_up_lines(bytes);
      std::memcpy(at, d.bias, bias_bytes);
      // cppcheck-suppress invalidPointerCast
      impl->bias = reinterpret_cast<const float*>(at);
    }
    impl->in = d.in_features, impl->out = d.out_features;
    impl->table = detail::active_table().name;
    delete impl_;
    impl_ = impl;
    return Status::ok;
  });
}

Status Linear::forward(int64_t rows, const float* x, int64_t ldx, float beta, float* y,
                       int64_t ldy) const {
  return detail::in_arena([&] {
    if (!impl_) return detail::fail(Status::invalid_argument, "linear is not initialised");
    TESSERA_CHECK(detail::check_nonneg("rows", rows));
    TESSERA_CHECK(detail::check_finite("beta", beta));
    int64_t sx = 0, sy = 0;
    TESSERA_CHECK(detail::check_ld("ldx", ldx, impl_->in));
    TESSERA_CHECK(detail::check_ld("ldy", ldy, impl_->out));
    TESSERA_CHECK(detail::check_ptr("x", x, rows > 0));
    TESSERA_CHECK(detail::check_ptr("y", y, rows > 0));
    TESSERA_CHECK(detail::matrix_span("x", rows, impl_->in, ldx, sx));
    TESSERA_CHECK(detail::matrix_span("y", rows, impl_->out, ldy, sy));
    TESSERA_CHECK(
        detail::check_disjoint(detail::region("y", y, sy, 4), {detail::region("x", x, sx, 4)}));
    if (rows == 0) return Status::ok;
    if (std::strcmp(detail::active_table().name, impl_->table) != 0)
      return detail::fail(Status::invalid_argument,
                          "linear was packed for kernel table \"%s\" but \"%s\" is active: "
                          "create it again",
                          impl_->table, detail::active_table().name);
    TESSERA_CHECK(sgemm_packed(Transpose::no_trans, rows, impl_->out, impl_->in, 1.0f, x, ldx,
                               impl_->packed.data(), beta, y, ldy));
    if (impl_->bias)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < impl_->out; ++j) y[r * ldy + j] += impl_->bias[j];
    return Status::ok;
  });
}

}  // namespace tessera
