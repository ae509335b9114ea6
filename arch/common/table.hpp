// Builds an ISA's kernel table from the templates, instantiated for that xsimd arch. Included
// once per ISA translation unit, each compiled with its own flags. (Only templates over Arch are
// instantiated here, so no inline function compiled with one ISA's flags can be chosen by the
// linker for another table.)
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <utility>

#include "../kernels.hpp"
#include "blocking.hpp"
#include "convert.hpp"
#include "gemm_dot.hpp"
#include "gemm_dot_b16.hpp"
#include "gemm_pack.hpp"
#include "gemm_row_panels.hpp"
#include "gemm_rows_stream.hpp"
#include "gemm_ukernel.hpp"
#include "norm.hpp"
#include "peak.hpp"
#include "quant.hpp"
#include "rope.hpp"
#include "softmax.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

// The default packed micro-kernel and the runs of whole tiles; an ISA may pass its own
// (NEON64's lane-indexed FMA; on ARM, runs that call the tile kernel per tile).
template <class Arch, int MR, int NV>
struct DefaultPackedKernel {
  template <int R>
  static constexpr GemmPackedFn get() {
    return &gemm_ukernel_packed<Arch, MR, R, NV>;
  }
  static constexpr GemmPackedRunFn run() { return &gemm_ukernel_packed_run<Arch, MR, NV>; }
  static constexpr GemmStridedRunFn strided_run() { return &gemm_ukernel_run<Arch, MR, NV>; }
};

template <class Arch, const GemmBlocking& G, class Packed, int... R>
void fill_ukernels(GemmKernels& k, std::integer_sequence<int, R...>) {
  ((k.packed[R + 1] = Packed::template get<R + 1>()), ...);
  ((k.strided[R + 1] = &gemm_ukernel<Arch, R + 1, G.nv>), ...);
  k.packed_run = Packed::run();
  k.strided_run = Packed::strided_run();
}

// Fused attention's forms of the MR x NR tile (narrow column counts, P read in place).
template <class Arch, const GemmBlocking& G, int... R>
void fill_attention_ukernels(GemmKernels& k, std::integer_sequence<int, R...>) {
  ((k.strided_narrow[R + 1] = &gemm_ukernel<Arch, R + 1, 1>), ...);
  ((k.packed_narrow[R + 1] = &gemm_ukernel_packed<Arch, G.mr, R + 1, 1, G.nv>), ...);
  ((k.rows_bk[R + 1] = &gemm_ukernel_rows_lda<Arch, kAttentionBK, R + 1, G.nv>), ...);
}

// The blocking and the MR x NR tile's kernels and packers: what the blocked and in-place
// drivers need (a deep-product tile is only this). F16Widen, Bf16Widen: the ISA's 16-bit loads
// (gemm_dot_b16.hpp), for the row-panel kernels of B packed in 16 bits.
template <class Arch, const GemmBlocking& G, class F16Widen, class Bf16Widen,
          class Packed = DefaultPackedKernel<Arch, G.mr, G.nv>>
GemmKernels make_tile_kernels() {
  static_assert(G.mr <= kMaxMR, "tile exceeds the table");
  constexpr int W = static_cast<int>(xsimd::batch<float, Arch>::size);
  GemmKernels g{};
  g.mr = G.mr;
  g.nr = G.nv * W;
  g.simd_floats = W;
  g.kc = G.kc;
  g.mc = G.mc;
  g.nc = G.nc;
  fill_ukernels<Arch, G, Packed>(g, std::make_integer_sequence<int, G.mr>());
  fill_row_panels<Arch, G.nv, F16Widen, Bf16Widen>(
      g, std::make_integer_sequence<int, kMaxRowPanelRows>());
  g.pack_a = &gemm_pack_a<Arch, G.mr>;
  g.pack_b = &gemm_pack_b<Arch, G.nv * W>;
  return g;
}

// kPrefetching: the form of wide_prefetching (one or two rows prefetch B kWideBAheadRows ahead).
template <class Arch, const GemmBlocking& G, int R, int J, bool kPrefetching>
constexpr GemmStridedFn wide_kernel() {
  if constexpr (J == 0 || ((R << J) <= G.wide_acc && (1 << J) <= G.wide_nv)) {
    if constexpr (kPrefetching && R <= 2)
      return &gemm_ukernel<Arch, R, (1 << J), kWideBAheadRows>;
    else
      return &gemm_ukernel<Arch, R, (1 << J)>;
  } else {
    return nullptr;
  }
}

template <class Arch, const GemmBlocking& G, int R, int... J>
void fill_wide_row(GemmKernels& k, std::integer_sequence<int, J...>) {
  ((k.wide[R][J] = wide_kernel<Arch, G, R, J, false>()), ...);
  ((k.wide_prefetching[R][J] = wide_kernel<Arch, G, R, J, true>()), ...);
}

template <class Arch, const GemmBlocking& G, int... R>
void fill_wide(GemmKernels& k, std::integer_sequence<int, R...>) {
  (fill_wide_row<Arch, G, R + 1>(k, std::make_integer_sequence<int, kWideWidths>()), ...);
}

template <class Arch, const GemmBlocking& G, int... R>
void fill_rows_stream(GemmKernels& k, std::integer_sequence<int, R...>) {
  static_assert(G.stream_bcast > 0, "blocking.hpp: stream_bcast");
  ((k.rows_stream[R + 1] = &gemm_rows_stream<Arch, R + 1, G.stream_bcast>), ...);
}

template <class Arch, const GemmBlocking& G, int... R>
void fill_dot(GemmKernels& k, std::integer_sequence<int, R...>) {
  ((k.dot[R + 1] = &gemm_dot_nt<Arch, R + 1, G.dot_cols>), ...);
  ((k.dot_cols[R + 1] = G.dot_cols), ...);
  ((k.dot1[R + 1] = &gemm_dot_nt<Arch, R + 1, 1>), ...);
  k.dot[1] = &gemm_dot_nt_row<Arch>;  // one row: its own 1 x W kernel
  k.dot_stream = &gemm_dot_nt_row<Arch, true>;
  k.dot_row_run = &gemm_dot_nt_row_run<Arch>;
  k.dot_cols[1] = static_cast<int>(xsimd::batch<float, Arch>::size);
}

// The table's tile, attention and dot kernels (make_table's first half).
template <class Arch, const GemmBlocking& G, class F16Widen, class Bf16Widen,
          class Packed = DefaultPackedKernel<Arch, G.mr, G.nv>>
KernelTable make_table_tiles(const char* name) {
  static_assert(G.dot_rows <= kMaxDotRows, "dot tile exceeds the table");
  constexpr int W = static_cast<int>(xsimd::batch<float, Arch>::size);
  KernelTable t{};
  t.name = name;
  t.simd_floats = W;
  t.peak_fma = &peak_fma_loop<Arch>;
  t.peak_flops_per_iter = 2 * kPeakAccumulators * W;

  GemmKernels& g = t.gemm;
  g = make_tile_kernels<Arch, G, F16Widen, Bf16Widen, Packed>();
  g.dot_rows = G.dot_rows;
  if constexpr (G.small_rows > 0) {
    g.small_rows = G.small_rows;
    g.small_cols = G.small_nv * W;
    g.small_run = &gemm_small_run<Arch, G.small_rows, G.small_nv>;
    g.pack_b_small = &gemm_pack_b<Arch, G.small_nv * W>;
    // The rows past the last small tile take the wide kernel of the same width.
    static_assert(G.small_rows <= kMaxWideRows + 1 && (G.small_nv & (G.small_nv - 1)) == 0 &&
                      G.small_nv <= G.wide_nv && (G.small_rows - 1) * G.small_nv <= G.wide_acc,
                  "small tiles need wide kernels of their width for the rows past them");
  }
  fill_attention_ukernels<Arch, G>(g, std::make_integer_sequence<int, G.mr>());
  fill_dot<Arch, G>(g, std::make_integer_sequence<int, G.dot_rows>());
  return t;
}

// The rest (make_table's second half): the few-row kernels, softmax, rotary and conversion
// kernels. A large table instantiates the halves in two files, compiled in parallel.
template <class Arch, const GemmBlocking& G, class F16Widen, class Bf16Widen>
void fill_table_rest(KernelTable& t) {
  GemmKernels& g = t.gemm;
  fill_wide<Arch, G>(g, std::make_integer_sequence<int, kMaxWideRows>());
  fill_rows_stream<Arch, G>(g, std::make_integer_sequence<int, kMaxWideRows>());
  fill_dot16<Arch, G, F16Widen, Bf16Widen>(g);

  SoftmaxKernels& sm = t.softmax;
  sm.exp = &exp_array<Arch>;
  sm.exp_nonpositive = &exp_nonpositive_array<Arch>;
  sm.exp_shifted = &exp_shifted_array<Arch>;
  sm.tanh = &tanh_array<Arch>;
  sm.stats_stream = &softmax_stats_stream<Arch>;
  sm.stats_rows = &softmax_stats_rows<Arch>;
  sm.softmax_rows_cached = &softmax_rows_cached<Arch>;
  sm.attention_rows = &attention_tile_rows<Arch>;
  sm.max = &row_max<Arch>;
  sm.exp_sum = &exp_sum<Arch>;
  sm.affine = &affine<Arch>;
  t.convert = make_convert_kernels();  // an ISA with f16 lanes passes them (its own file)
  t.rope = make_rope_kernels<Arch>();
  t.norm_act = make_norm_act_kernels<Arch>();
}

template <class Arch, const GemmBlocking& G, class F16Widen, class Bf16Widen,
          class Packed = DefaultPackedKernel<Arch, G.mr, G.nv>>
KernelTable make_table(const char* name) {
  KernelTable t = make_table_tiles<Arch, G, F16Widen, Bf16Widen, Packed>(name);
  fill_table_rest<Arch, G, F16Widen, Bf16Widen>(t);
  return t;
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
