// The testers of the kernel families, callable on their own so that tests/mutant_test.cpp can
// run each against a mutant and see it fail. Each is defined beside the tests that use it.
#pragma once

#include <gtest/gtest.h>

#include "arch/kernels.hpp"
#include "src/runtime/registry.hpp"

namespace testers {

// While a mutant runs (tests/mutant_test.cpp) its intercepted failures: the API testers return at
// their next step once there is one, since one is all a mutant needs. Null otherwise.
inline const ::testing::TestPartResultArray* g_mutant_failures = nullptr;
inline bool mutant_rejected() { return g_mutant_failures && g_mutant_failures->size() > 0; }

// A registered kernel called directly on its family's edge lattice (ukernel_test.cpp; the
// conversions through convert_kernel, convert_test.cpp).
void registered_kernel(const tessera::detail::KernelRow& row);
void convert_kernel(const tessera::detail::KernelRow& row);
// The block types' kernels (quant_kernels_test.cpp; the GEMM tiles go on to quant_gemm_kernel).
void quant_kernel(const tessera::detail::KernelRow& row);
// The packed GEMM tile of block-type weights and its packers (quant_gemm_kernels_test.cpp).
void quant_gemm_kernel(const tessera::detail::KernelRow& row);
// The rotary embedding's kernels (rope_test.cpp).
void rope_kernel(const tessera::detail::KernelRow& row);
// The norms and activations of a decoder block (norm_test.cpp).
void norm_act_kernel(const tessera::detail::KernelRow& row);

// A table's exp, exp_nonpositive, exp_shifted and tanh at every length to past four vectors and
// every offset, each element within its ULP bound (transcendental_test.cpp).
void transcendental_kernels(const tessera::arch::KernelTable& t);

// Through the public API on the active table, against the reference:
void softmax_ops();    // softmax, log-softmax, logsumexp: short, grouped and chunked rows
void attention_ops();  // fused attention: every option, decode and prefill, 16-bit K/V, +inf
void additive_ops();   // Bahdanau: one-shot, keys then step, batched with valid lengths
// Attention over q8_0 / q4_0 K/V within tessera.h's relative RMS of the unquantized result
// (quant_test.cpp).
void quant_accuracy(bool until_first_failure);

}  // namespace testers
