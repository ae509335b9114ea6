// Prepacked B: op(B) packed once into the active table's panels (float32, or kept in f16/bf16),
// then multiplied by any number of A's (sgemm_packed).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "gemm/gemm_packed.hpp"

#include "gemm/gemm_check.hpp"
#include "gemm/gemm_plan.hpp"
#include "gemm/gemm_quant.hpp"
#include "runtime/check.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/scratch.hpp"
#include "runtime/threading.hpp"
#include "tessera/gemm.hpp"

namespace tessera {
namespace {

// The packed-B buffer starts with this header so that a buffer packed for another shape, another
// kernel table or another element type is rejected instead of silently misread.
struct PackedBHeader {
  char magic[8];
  char isa[16];
  int64_t k, n;
  int32_t nr, kc;  // the layout's panel width and k blocking (block types: the tile's run)
  int32_t type;    // the panels' elements: TESSERA_F32 (0, as before types), F16 or BF16
};
constexpr size_t kHeaderBytes = 64;
static_assert(sizeof(PackedBHeader) <= kHeaderBytes, "header must fit its slot");
constexpr char kMagic[8] = {'T', 'S', 'R', 'P', 'A', 'C', 'K', '2'};

Status check_packed_alignment(const void* packed) {
  if (reinterpret_cast<uintptr_t>(packed) % alignof(float) == 0) return Status::ok;
  return detail::fail(Status::invalid_argument, "packed must be aligned to %zu bytes",
                      alignof(float));
}

// The bytes op(B) packed in elements of `elem` bytes takes under table t, or 0 when that does
// not fit in size_t.
size_t packed_bytes(const arch::KernelTable& t, int64_t k, int64_t n, size_t elem) {
  const int64_t nr = detail::blocked_kernels(t.gemm, k, n).nr;
  int64_t count = 0;
  if (!detail::mul_ok(k, (n + nr - 1) / nr * nr, count) ||
      uint64_t(count) > (uint64_t(SIZE_MAX) - kHeaderBytes) / elem)
    return 0;
  return kHeaderBytes + elem * size_t(count);
}

// What every packer checks once its size is known: the size fits in size_t, the caller's buffer
// holds it (size_fn names the call that tells it), and it does not overlap B.
Status check_packed_room(const arch::KernelTable& t, int64_t k, int64_t n, size_t need,
                         size_t given, const char* size_fn, const void* packed,
                         const detail::Region& b) {
  if (need == 0)
    return detail::fail(Status::invalid_argument,
                        "k = %lld, n = %lld: the packed size overflows size_t", (long long)k,
                        (long long)n);
  if (given < need)
    return detail::fail(Status::invalid_argument,
                        "packed_bytes = %zu is below the %zu bytes kernel table \"%s\" needs (%s)",
                        given, need, t.name, size_fn);
  return detail::check_disjoint(detail::region("packed", packed, int64_t(need), 1), {b});
}

Status check_pack_dims(Transpose tb, int64_t k, int64_t n) {
  TESSERA_CHECK(detail::check_transpose("tb", tb));
  TESSERA_CHECK(detail::check_nonneg("k", k));
  return detail::check_nonneg("n", n);
}

size_t pack_size(Transpose tb, int64_t k, int64_t n, size_t elem) {
  if (check_pack_dims(tb, k, n) != Status::ok) return 0;
  const size_t bytes = packed_bytes(detail::active_table(), k, n, elem);
  if (bytes == 0)
    detail::fail(Status::invalid_argument, "k = %lld, n = %lld: the packed size overflows size_t",
                 (long long)k, (long long)n);
  return bytes;
}

// Columns of op(B) widened at a time by pack_b_widened: 16 panels of NR.
constexpr int64_t kWidenPanels = 16;

// op(B) stored in 16 bits, packed where gemm_pack_b_full puts the float32 B's panels (element
// (p, j) of a kc block at out[j / NR NR kc + p NR + j % NR], panels in column order): each kc
// block is widened kWidenPanels panels of columns at a time into buf (table conversions, exact)
// and packed from there, so the packed bytes are those of the widened B.
void pack_b_widened(const arch::KernelTable& t, bool tb, int64_t k, int64_t n, DType bt,
                    const uint16_t* b, int64_t ldb, float* buf, float* out) {
  const arch::GemmKernels& kt = detail::blocked_kernels(t.gemm, k, n);
  const int64_t nr = kt.nr, n_padded = (n + nr - 1) / nr * nr, cols = nr * kWidenPanels;
  const auto widen = bt == DType::f16 ? t.convert.f16_to_f32 : t.convert.bf16_to_f32;
  for (int64_t pc = 0; pc < k; pc += kt.kc) {
    const int64_t kc = std::min<int64_t>(kt.kc, k - pc);
    for (int64_t j0 = 0; j0 < n; j0 += cols) {
      const int64_t w = std::min(cols, n - j0);
      if (tb) {  // B stored n x k: op(B)'s columns are its rows
        for (int64_t r = 0; r < w; ++r) widen(kc, b + (j0 + r) * ldb + pc, buf + r * kc);
        kt.pack_b(true, kc, w, buf, kc, out + pc * n_padded + j0 * kc);
      } else {
        for (int64_t p = 0; p < kc; ++p) widen(w, b + (pc + p) * ldb + j0, buf + p * w);
        kt.pack_b(false, kc, w, buf, w, out + pc * n_padded + j0 * kc);
      }
    }
  }
}

// Packs op(B), stored as b_type, into panels of `packed_type` (float32, or b_type itself).
Status pack(Transpose tb, int64_t k, int64_t n, DType b_type, const void* b, int64_t ldb,
            DType packed_type, void* packed, size_t packed_bytes_given) {
  TESSERA_CHECK(detail::check_dtype("b_type", b_type));
  if (packed_type != DType::f32 && b_type == DType::f32)
    return detail::fail(Status::invalid_argument,
                        "b_type must be TESSERA_F16 or TESSERA_BF16 for 16-bit panels");
  TESSERA_CHECK(check_pack_dims(tb, k, n));
  TESSERA_CHECK(detail::check_ld("ldb", ldb, tb == Transpose::no_trans ? n : k));
  TESSERA_CHECK(detail::check_ptr("b", b, k > 0 && n > 0));
  TESSERA_CHECK(detail::check_ptr("packed", packed, true));
  TESSERA_CHECK(check_packed_alignment(packed));
  int64_t b_span;
  TESSERA_CHECK(detail::matrix_span("b", tb == Transpose::trans ? n : k,
                                    tb == Transpose::trans ? k : n, ldb, b_span));
  // One read of the active table: the size, the layout and the kernels all come from it, so a
  // tessera_set_isa on another thread cannot make the layout outgrow the size checked here.
  const arch::KernelTable& t = detail::active_table();
  const size_t need = packed_bytes(t, k, n, detail::dtype_bytes(packed_type));
  TESSERA_CHECK(check_packed_room(
      t, k, n, need, packed_bytes_given,
      packed_type == DType::f32 ? "tessera_sgemm_pack_b_size" : "tessera_sgemm_pack_b16_size",
      packed, detail::region("b", b, b_span, detail::dtype_bytes(b_type))));
  const arch::GemmKernels& blocked = detail::blocked_kernels(t.gemm, k, n);
  const bool widen = b_type != DType::f32 && packed_type == DType::f32;
  float* buf = nullptr;
  if (widen && k > 0 && n > 0) {  // reserved before anything is written
    buf = detail::thread_scratch(detail::ScratchSlot::gemm_b)
              .floats(size_t(std::min<int64_t>(blocked.kc, k)) * size_t(blocked.nr * kWidenPanels));
    if (!buf) return detail::fail(Status::out_of_memory, "cannot allocate the widened block");
  }
  PackedBHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  std::strncpy(h.isa, t.name, sizeof h.isa - 1);
  h.k = k;
  h.n = n;
  h.nr = blocked.nr;
  h.kc = blocked.kc;
  h.type = int32_t(packed_type);
  std::memcpy(packed, &h, sizeof h);
  // The panels follow the 64-byte header in the caller's float-aligned buffer.
  void* out = static_cast<char*>(packed) + kHeaderBytes;
  const bool tr = tb == Transpose::trans;
  if (b_type == DType::f32)
    detail::gemm_pack_b_full(t.gemm, tr, k, n, static_cast<const float*>(b), ldb,
                             static_cast<float*>(out));
  else if (widen)
    pack_b_widened(t, tr, k, n, b_type, static_cast<const uint16_t*>(b), ldb, buf,
                   static_cast<float*>(out));
  else
    detail::gemm_pack_b16_full(t.gemm, tr, k, n, static_cast<const uint16_t*>(b), ldb,
                               static_cast<uint16_t*>(out));
  return Status::ok;
}

// Block-type weights: B^T (n x k, blocks along k) packed for the table's integer tile, or kept
// as stored where it has none (PackedBHeader::nr 0).
Status check_pack_bq(Transpose tb, int64_t k, int64_t n, DType b_type) {
  TESSERA_CHECK(check_pack_dims(tb, k, n));
  if (!detail::is_block(b_type))
    return detail::fail(Status::invalid_argument, "b_type = %d is not TESSERA_Q8_0 or TESSERA_Q4_0",
                        int(b_type));
  TESSERA_CHECK(detail::check_block_kernels("b_type", b_type, detail::active_table()));
  if (tb != Transpose::trans)
    return detail::fail(Status::invalid_argument,
                        "tb must be TESSERA_TRANS with b_type = %s (B stored n x k, its blocks "
                        "along k)",
                        detail::dtype_name(b_type));
  return detail::check_blocks("k", k, b_type);
}

// 0 when the bytes do not fit in size_t: quant_packed_bytes' product (panels or rows, blocks, a
// block's bytes) checked factor by factor first.
size_t pack_bq_bytes(const arch::KernelTable& t, int64_t k, int64_t n, DType b_type, int nr) {
  const int64_t columns = nr == 0 ? n : (n + nr - 1) / nr;
  const int64_t block = nr == 0 ? detail::block_bytes(b_type)
                                : t.quant.gemm_block_bytes[b_type == DType::q8_0 ? 0 : 1];
  int64_t blocks = 0, bytes = 0;
  if (!detail::mul_ok(columns, k / detail::kBlockValues, blocks) ||
      !detail::mul_ok(blocks, block, bytes) || uint64_t(bytes) > SIZE_MAX - kHeaderBytes)
    return 0;
  return kHeaderBytes + size_t(detail::quant_packed_bytes(t, b_type, n, k, nr));
}

Status pack_bq(Transpose tb, int64_t k, int64_t n, DType b_type, const void* b, int64_t ldb,
               void* packed, size_t packed_bytes_given) {
  TESSERA_CHECK(check_pack_bq(tb, k, n, b_type));
  TESSERA_CHECK(detail::check_ld("ldb", ldb, k));
  TESSERA_CHECK(detail::check_blocks("ldb", ldb, b_type));
  TESSERA_CHECK(detail::check_ptr("b", b, k > 0 && n > 0));
  TESSERA_CHECK(detail::check_ptr("packed", packed, true));
  TESSERA_CHECK(check_packed_alignment(packed));
  int64_t b_span;
  TESSERA_CHECK(detail::matrix_span("b", n, k, ldb, b_span));
  const arch::KernelTable& t = detail::active_table();
  const int nr = detail::quant_panel_nr(t, b_type, ldb);
  const size_t need = pack_bq_bytes(t, k, n, b_type, nr);
  TESSERA_CHECK(
      check_packed_room(t, k, n, need, packed_bytes_given, "tessera_sgemm_pack_bq_size", packed,
                        detail::region("b", b, detail::storage_bytes(b_type, b_span), 1)));
  PackedBHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  std::strncpy(h.isa, t.name, sizeof h.isa - 1);
  h.k = k, h.n = n, h.nr = nr, h.type = int32_t(b_type);
  h.kc = nr != 0 ? t.quant.gemm_group : 0;  // (the tile's runs: sdot's and smmla's differ)
  std::memcpy(packed, &h, sizeof h);
  if (k > 0 && n > 0)
    detail::pack_quant_b(t, b_type, n, k, static_cast<const uint8_t*>(b), ldb, nr,
                         static_cast<uint8_t*>(packed) + kHeaderBytes);
  return Status::ok;
}

// Block-type panels in table t's integer tile layout (not rows as stored: nr 0).
bool in_tile_layout(const PackedBHeader& h, const arch::KernelTable& t) {
  return h.nr != 0 && h.nr == t.quant.gemm_nr && h.kc == t.quant.gemm_group && t.quant.gemm_mr > 0;
}

// sgemm_packed over block-type panels: the quantized executor on them (or on the rows as
// stored, the dot kernels' path).
Status packed_bq(const arch::KernelTable& t, const PackedBHeader& h, Transpose ta, int64_t m,
                 int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const void* packed,
                 float beta, float* c, int64_t ldc, const detail::GemmSpans& s) {
  const DType type = DType(h.type);
  TESSERA_CHECK(detail::check_block_kernels("packed type", type, t));
  if (h.nr != 0 && !in_tile_layout(h, t))
    return detail::fail(Status::invalid_argument, "packed was written with another blocking");
  const size_t bytes = pack_bq_bytes(t, k, n, type, h.nr);
  TESSERA_CHECK(detail::check_disjoint(
      detail::region("c", c, s.c, 4),
      {detail::region("a", a, s.a, 4), detail::region("packed", packed, int64_t(bytes), 1)}));
  const auto* panels = static_cast<const uint8_t*>(packed) + kHeaderBytes;
  detail::QuantGemm q{
      ta == Transpose::trans, m, n, k, alpha, beta, a, lda, type, panels, k, c, ldc};
  if (h.nr != 0) q.panels = panels;
  return detail::gemm_quant(t, q);
}

}  // namespace

size_t sgemm_pack_bq_size(Transpose tb, int64_t k, int64_t n, DType b_type) {
  if (check_pack_bq(tb, k, n, b_type) != Status::ok) return 0;
  const arch::KernelTable& t = detail::active_table();
  // The tile's layout where the weight rows are dense (ldb = k); a wider ldb may fall back to
  // rows as stored, which are never larger.
  const size_t bytes = pack_bq_bytes(t, k, n, b_type, detail::quant_panel_nr(t, b_type, k));
  if (bytes == 0)
    detail::fail(Status::invalid_argument, "k = %lld, n = %lld: the packed size overflows size_t",
                 (long long)k, (long long)n);
  return bytes;
}

Status sgemm_pack_bq(Transpose tb, int64_t k, int64_t n, DType b_type, const void* b, int64_t ldb,
                     void* packed, size_t packed_bytes_given) {
  return detail::in_arena(
      [&] { return pack_bq(tb, k, n, b_type, b, ldb, packed, packed_bytes_given); });
}

size_t sgemm_pack_b_size(Transpose tb, int64_t k, int64_t n) {
  return pack_size(tb, k, n, sizeof(float));
}

size_t sgemm_pack_b16_size(Transpose tb, int64_t k, int64_t n) {
  return pack_size(tb, k, n, sizeof(uint16_t));
}

Status sgemm_pack_b_ex(Transpose tb, int64_t k, int64_t n, DType b_type, const void* b, int64_t ldb,
                       void* packed, size_t packed_bytes_given) {
  return detail::in_arena(
      [&] { return pack(tb, k, n, b_type, b, ldb, DType::f32, packed, packed_bytes_given); });
}

Status sgemm_pack_b(Transpose tb, int64_t k, int64_t n, const float* b, int64_t ldb, void* packed,
                    size_t packed_bytes_given) {
  return sgemm_pack_b_ex(tb, k, n, DType::f32, b, ldb, packed, packed_bytes_given);
}

Status sgemm_pack_b16(Transpose tb, int64_t k, int64_t n, DType b_type, const void* b, int64_t ldb,
                      void* packed, size_t packed_bytes_given) {
  return detail::in_arena([&] {
    return pack(tb, k, n, b_type, b, ldb, b_type == DType::bf16 ? DType::bf16 : DType::f16, packed,
                packed_bytes_given);
  });
}

Status sgemm_packed(Transpose ta, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const void* packed, float beta, float* c, int64_t ldc) {
  return detail::in_arena([&] {
    TESSERA_CHECK(detail::check_gemm_sizes(m, n, k));
    TESSERA_CHECK(detail::check_gemm_a(ta, m, k, a, lda));
    TESSERA_CHECK(detail::check_ptr("packed", packed, true));
    TESSERA_CHECK(detail::check_gemm_c(m, n, c, ldc));
    TESSERA_CHECK(check_packed_alignment(packed));
    detail::GemmSpans s;
    TESSERA_CHECK(detail::gemm_spans(ta, Transpose::no_trans, m, n, k, lda, n > 0 ? n : 1, ldc, s));
    PackedBHeader h;
    std::memcpy(&h, packed, sizeof h);
    if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 ||
        detail::check_storage_type("packed type", DType(h.type)) != Status::ok)
      return detail::fail(Status::invalid_argument,
                          "packed was not written by tessera_sgemm_pack_b, _pack_b16 or _pack_bq");
    if (h.k != k || h.n != n)
      return detail::fail(Status::invalid_argument,
                          "packed holds a %lld x %lld B but k = %lld, n = %lld", (long long)h.k,
                          (long long)h.n, (long long)k, (long long)n);
    const arch::KernelTable& t = detail::active_table();  // read once per call
    h.isa[sizeof h.isa - 1] = '\0';
    if (std::strcmp(h.isa, t.name) != 0)
      return detail::fail(Status::invalid_argument,
                          "packed was packed for kernel table \"%s\" but \"%s\" is active", h.isa,
                          t.name);
    if (detail::is_block(DType(h.type)))
      return packed_bq(t, h, ta, m, n, k, alpha, a, lda, packed, beta, c, ldc, s);
    const arch::GemmKernels& blocked = detail::blocked_kernels(t.gemm, k, n);
    if (h.nr != blocked.nr || h.kc != blocked.kc)
      return detail::fail(Status::invalid_argument, "packed was written with another blocking");
    const DType type = DType(h.type);
    TESSERA_CHECK(detail::check_disjoint(
        detail::region("c", c, s.c, 4),
        {detail::region("a", a, s.a, 4),
         detail::region("packed", packed, int64_t(packed_bytes(t, k, n, detail::dtype_bytes(type))),
                        1)}));
    detail::GemmProblem p;
    p.ta = ta == Transpose::trans;
    p.m = m, p.n = n, p.k = k;
    p.alpha = alpha, p.beta = beta;
    p.a = a, p.lda = lda, p.ldb = 1, p.c = c, p.ldc = ldc;
    const void* panels = static_cast<const char*>(packed) + kHeaderBytes;
    if (type == DType::f32) {
      p.b_packed = static_cast<const float*>(panels);
    } else {
      p.b_packed16 = static_cast<const uint16_t*>(panels);
      p.b16 = type == DType::bf16 ? 1 : 0;
      p.b16_widen = type == DType::bf16 ? t.convert.bf16_to_f32 : t.convert.f16_to_f32;
    }
    return detail::gemm_run_product("sgemm_packed", t, p);
  });
}

namespace detail {

Status sgemm_packed_shared_a(int64_t m, int64_t k, const float* a, int64_t lda,
                             const PackedProduct* p, int count) {
  const arch::KernelTable& t = active_table();
  QuantGemm qs[kMaxSharedProducts];
  bool shared = count >= 1 && count <= kMaxSharedProducts;
  for (int i = 0; i < count && shared; ++i) {
    PackedBHeader h;
    std::memcpy(&h, p[i].packed, sizeof h);
    h.isa[sizeof h.isa - 1] = '\0';
    shared = std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 && is_block(DType(h.type)) &&
             std::strcmp(h.isa, t.name) == 0 && h.k == k && h.n == p[i].n && in_tile_layout(h, t);
    // (products of two block types run one by one there)
    qs[i] = QuantGemm{false,         m,       p[i].n, k,      1.0f,    p[i].beta, a, lda,
                      DType(h.type), nullptr, k,      p[i].c, p[i].ldc};
    qs[i].panels = static_cast<const uint8_t*>(p[i].packed) + kHeaderBytes;
  }
  if (shared) return gemm_quant_shared_a(t, qs, count);
  for (int i = 0; i < count; ++i)
    TESSERA_CHECK(sgemm_packed(Transpose::no_trans, m, p[i].n, k, 1.0f, a, lda, p[i].packed,
                               p[i].beta, p[i].c, p[i].ldc));
  return Status::ok;
}

}  // namespace detail
}  // namespace tessera
