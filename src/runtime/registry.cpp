#include "runtime/registry.hpp"

#include <cstdio>
#include <string>

#include "runtime/dispatch.hpp"
#include "runtime/hardware.hpp"

namespace tessera::detail {
namespace {

constexpr const char* kFamilyNames[] = {"gemm_packed",
                                        "gemm_packed_narrow",
                                        "gemm_rows_bk",
                                        "gemm_strided",
                                        "gemm_row_panels",
                                        "gemm_row_panels_b_f16",
                                        "gemm_row_panels_b_bf16",
                                        "gemm_strided_narrow",
                                        "gemm_wide",
                                        "gemm_wide_prefetching",
                                        "gemm_dot",
                                        "gemm_dot_stream",
                                        "gemm_dot_b_f16",
                                        "gemm_dot_b_bf16",
                                        "gemm_wide_b_f16",
                                        "gemm_wide_b_bf16",
                                        "gemm_rows_stream",
                                        "gemm_rows_stream_b_f16",
                                        "gemm_rows_stream_b_bf16",
                                        "hgemm_packed",
                                        "gemm_bf16_dot_packed",
                                        "gemm_bf16_dot_nt",
                                        "convert_f32_f16",
                                        "convert_f16_f32",
                                        "convert_f32_bf16",
                                        "convert_bf16_f32",
                                        "quant_dot_q8_0",
                                        "quant_dot_q4_0",
                                        "quant_pv_q8_0",
                                        "quant_pv_q4_0",
                                        "quantize_q8_0",
                                        "quantize_q4_0",
                                        "dequantize_q8_0",
                                        "dequantize_q4_0",
                                        "quantize_rows_q8_0",
                                        "quant_gemm_q8_0",
                                        "quant_gemm_q4_0",
                                        "quant_gemm_pack_q8_0",
                                        "quant_gemm_pack_q4_0",
                                        "rope_angles_neox",
                                        "rope_angles_gptj",
                                        "rope_rotate_neox",
                                        "rope_rotate_gptj",
                                        "norm_rms",
                                        "norm_layer",
                                        "act_silu",
                                        "act_gelu_tanh"};
static_assert(sizeof(kFamilyNames) / sizeof(*kFamilyNames) == size_t(KernelFamily::count));

struct Adder {
  const arch::KernelTable& t;
  std::vector<KernelRow>& out;

  // name: <type>_<what>_<rows>x<cols>[_mr<mr>]_<table>, type the elements the FMAs take
  // feature: what the kernel needs beyond its table's features, if anything.
  void add(KernelFamily f, const char* what, int rows, int cols, int mr, int ldb, const void* fn,
           const char* type = "f32", const char* feature = "") {
    if (fn == nullptr) return;
    for (const KernelRow& r : out)
      if (r.fn == fn && r.family == f) return;  // one entry point registered once
    char name[96];
    if (mr > 0)
      std::snprintf(name, sizeof name, "%s_%s_%dx%d_mr%d_%s", type, what, rows, cols, mr, t.name);
    else
      std::snprintf(name, sizeof name, "%s_%s_%dx%d_%s", type, what, rows, cols, t.name);
    KernelRow row;
    row.name = name, row.table = t.name, row.features = table_features(t.name);
    if (*feature) row.features = row.features + " " + feature;
    row.family = f, row.rows = rows, row.cols = cols, row.mr = mr, row.ldb = ldb, row.fn = fn;
    out.push_back(row);
  }

  // A conversion kernel: f16_from_f32_avx2, ...
  void conversion(KernelFamily f, const char* what, const void* fn, const char* feature = "") {
    if (fn == nullptr) return;  // (a build without the block types' kernels)
    KernelRow row;
    row.name = std::string(what) + "_" + t.name;
    row.table = t.name, row.features = table_features(t.name);
    if (*feature) row.features = row.features + " " + feature;
    row.family = f, row.rows = 1, row.fn = fn;
    out.push_back(row);
  }

  // The block types' kernels: q8_0_dot_vpdpbusd_4x2_avx512 (rows x keys a step), q8_0_pv_4x32
  // (rows x a block's columns), q8_0_from_f32, f32_from_q8_0, q8_0_rows_from_f32.
  void quant() {
    const arch::QuantKernels& q = t.quant;
    const char* types[2] = {"q8_0", "q4_0"};
    const KernelFamily dots[2] = {KernelFamily::quant_dot_q8_0, KernelFamily::quant_dot_q4_0};
    const KernelFamily pvs[2] = {KernelFamily::quant_pv_q8_0, KernelFamily::quant_pv_q4_0};
    const KernelFamily to[2] = {KernelFamily::quantize_q8_0, KernelFamily::quantize_q4_0};
    const KernelFamily from[2] = {KernelFamily::dequantize_q8_0, KernelFamily::dequantize_q4_0};
    const std::string dot = std::string("dot_") + (q.dot_name ? q.dot_name : "");
    for (int i = 0; i < 2; ++i) {
      for (int r = 1; r <= q.dot_rows; ++r) {
        add(dots[i], dot.c_str(), r, q.dot_keys[i][r], 0, 0,
            reinterpret_cast<const void*>(q.dot[i][r]), types[i], q.feature);
        add(pvs[i], "pv", r, arch::kQBlock, 0, 0, reinterpret_cast<const void*>(q.pv[i][r]),
            types[i]);
      }
      // q8_0_gemv_vpdpbusd_1x1_avx512: weight rows a key at a time
      const std::string gemv = std::string("gemv_") + q.gemv_name;
      for (int r = 1; r <= q.gemv_rows[i]; ++r)
        add(dots[i], gemv.c_str(), r, 1, 0, 0, reinterpret_cast<const void*>(q.gemv[i][r]),
            types[i], q.feature);
      conversion(to[i], (std::string(types[i]) + "_from_f32").c_str(),
                 reinterpret_cast<const void*>(q.quantize[i]));
      conversion(from[i], (std::string("f32_from_") + types[i]).c_str(),
                 reinterpret_cast<const void*>(q.dequantize[i]));
    }
    conversion(KernelFamily::quantize_rows_q8_0, "q8_0_rows_from_f32",
               reinterpret_cast<const void*>(q.quantize_rows));
    // The packed GEMM tile: q8_0_gemm_vpdpbusd_6x16_avx512, q8_0_gemm_pack_16_avx512; the tile over
    // two panels q8_0_gemm_vpdpbusd_6x32_avx512 (its cols the columns it covers).
    const KernelFamily gemms[2] = {KernelFamily::quant_gemm_q8_0, KernelFamily::quant_gemm_q4_0};
    const KernelFamily packs[2] = {KernelFamily::quant_gemm_pack_q8_0,
                                   KernelFamily::quant_gemm_pack_q4_0};
    const std::string gemm = std::string("gemm_") + q.gemm_name;
    for (int i = 0; i < 2 && q.gemm_mr > 0; ++i) {
      for (int r = 1; r <= q.gemm_mr; ++r)
        add(gemms[i], gemm.c_str(), r, q.gemm_nr, 0, 0, reinterpret_cast<const void*>(q.gemm[i][r]),
            types[i], q.feature);
      for (int r = 1; r <= q.gemm_mr && q.gemm_wide[i][1] != nullptr; ++r)
        add(gemms[i], gemm.c_str(), r, 2 * q.gemm_nr, 0, 0,
            reinterpret_cast<const void*>(q.gemm_wide[i][r]), types[i], q.feature);
      const std::string pack = std::string(types[i]) + "_gemm_pack_" + std::to_string(q.gemm_nr);
      conversion(packs[i], pack.c_str(), reinterpret_cast<const void*>(q.gemm_pack[i]), q.feature);
      out.back().cols = q.gemm_nr;  // the panel's width
    }
  }

  // The MR x NR tile's kernels (the table's own, or its deep tile's).
  void tile(const arch::GemmKernels& g) {
    for (int r = 1; r <= g.mr; ++r) {
      add(KernelFamily::gemm_packed, "gemm_packed", r, g.nr, g.mr, g.nr,
          reinterpret_cast<const void*>(g.packed[r]));
      add(KernelFamily::gemm_strided, "gemm_strided", r, g.nr, 0, 0,
          reinterpret_cast<const void*>(g.strided[r]));
    }
    // cols: the panels read at once; ldb: one panel's width, in the name (the deep tile's
    // 2 panels of 64 and the table's 4 of 32 both make 128 columns).
    for (int r = 1; r <= g.row_panels_rows; ++r) {
      const int cols = arch::row_panels_group(g, r) * g.nr;
      const std::string nr = "_nr" + std::to_string(g.nr);
      add(KernelFamily::gemm_row_panels, ("gemm_row_panels" + nr).c_str(), r, cols, 0, g.nr,
          reinterpret_cast<const void*>(g.row_panels[r]));
      add(KernelFamily::gemm_row_panels_b_f16, ("gemm_row_panels_b_f16" + nr).c_str(), r, cols, 0,
          g.nr, reinterpret_cast<const void*>(g.row_panels16[0][r]));
      add(KernelFamily::gemm_row_panels_b_bf16, ("gemm_row_panels_b_bf16" + nr).c_str(), r, cols, 0,
          g.nr, reinterpret_cast<const void*>(g.row_panels16[1][r]));
    }
  }

  void table() {
    const arch::GemmKernels& g = t.gemm;
    const int W = g.simd_floats;
    tile(g);
    if (g.deep) tile(*g.deep);
    for (int r = 1; r <= g.mr; ++r) {
      add(KernelFamily::gemm_packed_narrow, "gemm_packed_narrow", r, W, g.mr, g.nr,
          reinterpret_cast<const void*>(g.packed_narrow[r]));
      add(KernelFamily::gemm_strided_narrow, "gemm_strided_narrow", r, W, 0, 0,
          reinterpret_cast<const void*>(g.strided_narrow[r]));
      add(KernelFamily::gemm_rows_bk, "gemm_rows_bk256", r, g.nr, 0, g.nr,
          reinterpret_cast<const void*>(g.rows_bk[r]));
    }
    for (int r = 1; r <= arch::kMaxWideRows; ++r)
      for (int j = 0; j < arch::kWideWidths; ++j) {
        add(KernelFamily::gemm_wide, "gemm_wide", r, W << j, 0, 0,
            reinterpret_cast<const void*>(g.wide[r][j]));
        if (g.wide_prefetching[r][j] != g.wide[r][j])
          add(KernelFamily::gemm_wide_prefetching, "gemm_wide_prefetch_b", r, W << j, 0, 0,
              reinterpret_cast<const void*>(g.wide_prefetching[r][j]));
      }
    for (int r = 1; r <= arch::kMaxWideRows; ++r)
      add(KernelFamily::gemm_rows_stream, "gemm_rows_stream", r, W, 0, 0,
          reinterpret_cast<const void*>(g.rows_stream[r]));
    for (int r = 1; r <= g.dot_rows; ++r) {
      add(KernelFamily::gemm_dot, "gemm_dot", r, g.dot_cols[r], 0, 0,
          reinterpret_cast<const void*>(g.dot[r]));
      add(KernelFamily::gemm_dot, "gemm_dot", r, 1, 0, 0, reinterpret_cast<const void*>(g.dot1[r]));
    }
    for (int t16 = 0; t16 < 2; ++t16) {
      const KernelFamily f = t16 ? KernelFamily::gemm_dot_b_bf16 : KernelFamily::gemm_dot_b_f16;
      const char* what = t16 ? "gemm_dot_b_bf16" : "gemm_dot_b_f16";
      for (int r = 1; r <= g.dot16_rows; ++r) {
        add(f, what, r, g.dot16_cols[r], 0, 0, reinterpret_cast<const void*>(g.dot16[t16][r]));
        add(f, what, r, 1, 0, 0, reinterpret_cast<const void*>(g.dot16_1[t16][r]));
      }
      for (int r = 1; r <= arch::kMaxWideRows; ++r)
        add(t16 ? KernelFamily::gemm_wide_b_bf16 : KernelFamily::gemm_wide_b_f16,
            t16 ? "gemm_wide_b_bf16" : "gemm_wide_b_f16", r, g.wide16_cols, 0, 0,
            reinterpret_cast<const void*>(g.wide16[t16][r]));
      for (int r = 1; r <= arch::kMaxWideRows; ++r)
        add(t16 ? KernelFamily::gemm_rows_stream_b_bf16 : KernelFamily::gemm_rows_stream_b_f16,
            t16 ? "gemm_rows_stream_b_bf16" : "gemm_rows_stream_b_f16", r, W, 0, 0,
            reinterpret_cast<const void*>(g.rows_stream16[t16][r]));
    }
    add(KernelFamily::gemm_dot_stream, "gemm_dot_stream", 1, g.dot_cols[1], 0, 0,
        reinterpret_cast<const void*>(g.dot_stream));
    const arch::HalfGemmKernels& h = t.hgemm;
    for (int r = 1; r <= h.mr; ++r)
      add(KernelFamily::hgemm_packed, "hgemm_packed", r, h.nr, h.mr, h.nr,
          reinterpret_cast<const void*>(h.packed[r]), "f16");
    const arch::Bf16DotKernels& d = t.bf16dot;
    for (int r = 1; r <= d.mr; ++r)
      add(KernelFamily::gemm_bf16_dot_packed, "gemm_dot2_packed", r, d.nr, d.mr, d.nr,
          reinterpret_cast<const void*>(d.packed[r]), "bf16", d.feature);
    for (int r = 1; r <= d.dot_rows; ++r) {
      add(KernelFamily::gemm_bf16_dot_nt, "gemm_dot2_nt", r, d.dot_cols[r], 0, 0,
          reinterpret_cast<const void*>(d.dot[r]), "bf16", d.feature);
      add(KernelFamily::gemm_bf16_dot_nt, "gemm_dot2_nt", r, 1, 0, 0,
          reinterpret_cast<const void*>(d.dot1[r]), "bf16", d.feature);
    }
    const arch::ConvertKernels& c = t.convert;
    conversion(KernelFamily::convert_f32_f16, "f16_from_f32",
               reinterpret_cast<const void*>(c.f32_to_f16));
    conversion(KernelFamily::convert_f16_f32, "f32_from_f16",
               reinterpret_cast<const void*>(c.f16_to_f32));
    conversion(KernelFamily::convert_f32_bf16, "bf16_from_f32",
               reinterpret_cast<const void*>(c.f32_to_bf16));
    conversion(KernelFamily::convert_bf16_f32, "f32_from_bf16",
               reinterpret_cast<const void*>(c.bf16_to_f32));
    quant();
    const arch::RopeKernels& r = t.rope;
    conversion(KernelFamily::rope_angles_neox, "rope_angles_neox",
               reinterpret_cast<const void*>(r.angles[0]));
    conversion(KernelFamily::rope_angles_gptj, "rope_angles_gptj",
               reinterpret_cast<const void*>(r.angles[1]));
    conversion(KernelFamily::rope_rotate_neox, "rope_rotate_neox",
               reinterpret_cast<const void*>(r.rotate[0]));
    conversion(KernelFamily::rope_rotate_gptj, "rope_rotate_gptj",
               reinterpret_cast<const void*>(r.rotate[1]));
    const arch::NormActKernels& na = t.norm_act;
    conversion(KernelFamily::norm_rms, "norm_rms", reinterpret_cast<const void*>(na.rms));
    conversion(KernelFamily::norm_layer, "norm_layer", reinterpret_cast<const void*>(na.layer));
    conversion(KernelFamily::act_silu, "act_silu", reinterpret_cast<const void*>(na.act[0]));
    conversion(KernelFamily::act_gelu_tanh, "act_gelu_tanh",
               reinterpret_cast<const void*>(na.act[1]));
  }
};

}  // namespace

const char* family_name(KernelFamily f) { return kFamilyNames[static_cast<size_t>(f)]; }

std::vector<KernelRow> kernel_registry() {
  std::vector<KernelRow> out;
  const char* names[8];
  const int n = tables_for(hardware(), names, 8);
  for (int i = 0; i < n; ++i)
    if (const arch::KernelTable* t = find_table(names[i])) Adder{*t, out}.table();
  return out;
}

}  // namespace tessera::detail
