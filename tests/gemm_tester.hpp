// GemmTester (after XNNPACK's GemmMicrokernelTester): one configurable SGEMM problem, run through
// the public API and compared element by element with the double-accumulating reference.
//
// Error bound, per element: |c - ref| <= 2 sqrt(k) eps (|alpha| sum_p |a_ip b_pj| + |beta c0_ij|),
// the probabilistic bound of a length-k float dot product (Higham and Mary 2019: rounding errors
// of random sign add up like sqrt(k), not k); the factor 2 covers the final alpha/beta rounding.
// On the tests' data (uniform in [-1, 1]) the errors measured stay two orders of magnitude below
// it. The worst-case k eps bound it replaces was ~1 at k = 4096, so a kernel that dropped a
// whole k-row of B passed in 99.9% of rows; here a missing term (|a b| ~ 0.25) fails all but a
// few percent of elements (GemmMutation shows it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <tbb/task_arena.h>

#include "src/gemm/gemm_plan.hpp"
#include "tessera/gemm.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"

class GemmTester {
 public:
  GemmTester& m(int64_t v) {
    m_ = v;
    return *this;
  }
  GemmTester& n(int64_t v) {
    n_ = v;
    return *this;
  }
  GemmTester& k(int64_t v) {
    k_ = v;
    return *this;
  }
  GemmTester& ta(tessera::Transpose v) {
    ta_ = v;
    return *this;
  }
  GemmTester& tb(tessera::Transpose v) {
    tb_ = v;
    return *this;
  }
  GemmTester& alpha(float v) {
    alpha_ = v;
    return *this;
  }
  GemmTester& beta(float v) {
    beta_ = v;
    return *this;
  }
  // Extra elements beyond each row: leading dimensions wider than the row.
  GemmTester& pad(int64_t v) {
    pad_ = v;
    return *this;
  }
  GemmTester& batch(int64_t v) {
    batch_ = v;
    return *this;
  }
  GemmTester& packed(bool v) {
    packed_ = v;
    return *this;
  }
  // A and B stored as these types (tessera::gemm_ex); the reference multiplies the same
  // rounded values in float32.
  GemmTester& types(tessera::DType a, tessera::DType b) {
    a_type_ = a;
    b_type_ = b;
    return *this;
  }
  // B starts on a 64-byte line (whole rows of B are then read in place where the driver can).
  GemmTester& aligned_b(bool v) {
    aligned_b_ = v;
    return *this;
  }

  // The scalars and layout of case `combo` of a sweep, cycling independently: alpha -0.5 every
  // third case (1 otherwise), beta 0.3 every other (0, over a poisoned C, otherwise), B on a
  // 64-byte line every fourth, rows padded by 3 every fifth.
  GemmTester& cycle(int combo) {
    return alpha(combo % 3 == 2 ? -0.5f : 1.0f)
        .beta(combo % 2 ? 0.3f : 0.0f)
        .aligned_b(combo % 4 == 1)
        .pad(combo % 5 == 0 ? 3 : 0);
  }

  // Then again in an arena of this many threads, C compared bit for bit with the checked one
  // (results do not depend on the thread count): a second thread count without a second
  // reference. Plain products through run() only.
  GemmTester& also_threads(int v) {
    also_threads_ = v;
    return *this;
  }

  // Runs the product through the driver with these kernels (a copy of a table with one of its
  // choices changed) instead of through tessera::sgemm; plain products only.
  GemmTester& kernels(const tessera::arch::GemmKernels* v) {
    kernels_ = v;
    return *this;
  }
  // ... and under this tuning row (a copy of one with a choice changed; else the active row).
  GemmTester& tuning(const tessera::detail::Tuning* v) {
    tuning_ = v;
    return *this;
  }

  void test(uint32_t seed = 1) const {
    using tessera::Transpose;
    const int64_t a_rows = ta_ == Transpose::no_trans ? m_ : k_;
    const int64_t a_cols = ta_ == Transpose::no_trans ? k_ : m_;
    const int64_t b_rows = tb_ == Transpose::no_trans ? k_ : n_;
    const int64_t b_cols = tb_ == Transpose::no_trans ? n_ : k_;
    // BLAS leading dimensions: at least max(1, columns).
    const int64_t lda = std::max<int64_t>(a_cols, 1) + pad_;
    const int64_t ldb = std::max<int64_t>(b_cols, 1) + pad_, ldc = std::max<int64_t>(n_, 1) + pad_;
    const int64_t sa = a_rows * lda + 3, sb = b_rows * ldb + 5, sc = m_ * ldc + 7;
    auto a = tt::random_vec(size_t(sa * batch_), seed);
    auto b_store = tt::random_vec(size_t(sb * batch_ + 16), seed + 1);
    const uintptr_t misalign = reinterpret_cast<uintptr_t>(b_store.data()) % 64;
    const int64_t b_offset = aligned_b_ && misalign ? int64_t(64 - misalign) / 4 : 0;
    const float* b = b_store.data() + b_offset;
    a16_ = round_to(a_type_, a);
    b16_ = round_to(b_type_, b_store);
    // C starts random where beta reads it and NaN where it must not (beta = 0), and every
    // element outside the m x n blocks holds a sentinel that must survive.
    auto c = tt::random_vec(size_t(sc * batch_), seed + 2);
    constexpr float kGuard = 12345.0f;
    for (int64_t t = 0; t < batch_; ++t)
      for (int64_t i = 0; i < sc; ++i) {
        const int64_t r = i / ldc, col = i % ldc;
        float& x = c[size_t(t * sc + i)];
        if (r >= m_ || col >= n_)
          x = kGuard;
        else if (beta_ == 0.0f)
          x = tt::kNaN;
      }
    auto ref = c;
    tessera::reference::sgemm_strided_batched(ta_, tb_, m_, n_, k_, alpha_, a.data(), lda, sa, b,
                                              ldb, sb, beta_, ref.data(), ldc, sc, batch_);
    auto out = c;
    if (a_type_ != tessera::DType::f32 || b_type_ != tessera::DType::f32) {
      const void* a_in =
          a_type_ == tessera::DType::f32 ? static_cast<const void*>(a.data()) : a16_.data();
      const void* b_in =
          b_type_ == tessera::DType::f32 ? static_cast<const void*>(b) : b16_.data() + b_offset;
      ASSERT_EQ(batch_, 1);
      ASSERT_EQ(tessera::gemm_ex(ta_, tb_, m_, n_, k_, alpha_, a_type_, a_in, lda, b_type_, b_in,
                                 ldb, beta_, out.data(), ldc),
                tessera::Status::ok)
          << tessera::last_error();
    } else {
      run(a.data(), lda, sa, b, ldb, sb, out.data(), ldc, sc);
    }

    const float eps = std::numeric_limits<float>::epsilon();
    // |A| and |B|^T as rows of doubles, so that each element's sum |A B| is a contiguous dot
    // (the products are exact in double either way; the transposes' strides in the inner loop
    // made this loop the tester's time under qemu).
    std::vector<double> abs_a(size_t(m_ * k_)), abs_bt(size_t(n_ * k_));
    for (int64_t t = 0; t < batch_; ++t) {
      for (int64_t i = 0; i < m_; ++i)
        for (int64_t p = 0; p < k_; ++p)
          abs_a[size_t(i * k_ + p)] = std::fabs(
              ta_ == Transpose::no_trans ? a[t * sa + i * lda + p] : a[t * sa + p * lda + i]);
      for (int64_t j = 0; j < n_; ++j)
        for (int64_t p = 0; p < k_; ++p)
          abs_bt[size_t(j * k_ + p)] = std::fabs(
              tb_ == Transpose::no_trans ? b[t * sb + p * ldb + j] : b[t * sb + j * ldb + p]);
      for (int64_t i = 0; i < m_; ++i) {
        for (int64_t j = 0; j < n_; ++j) {
          double abs_sum = 0.0;
          const double* ai = abs_a.data() + i * k_;
          const double* bj = abs_bt.data() + j * k_;
          for (int64_t p = 0; p < k_; ++p) abs_sum += ai[p] * bj[p];
          const double c0 = beta_ == 0.0f ? 0.0 : std::fabs(c[t * sc + i * ldc + j]);
          const double tol = 2.0 * std::sqrt(double(std::max<int64_t>(k_, 1))) * eps *
                                 (std::fabs(alpha_) * abs_sum + std::fabs(beta_) * c0) +
                             1e-30;
          const float got = out[t * sc + i * ldc + j], want = ref[t * sc + i * ldc + j];
          ASSERT_FALSE(std::isnan(got)) << where(t, i, j);
          ASSERT_LE(std::fabs(double(got) - want), tol)
              << where(t, i, j) << " got " << got << " want " << want;
        }
        for (int64_t j = n_; j < ldc && i * ldc + j < sc; ++j)
          ASSERT_EQ(out[t * sc + i * ldc + j], kGuard) << "wrote past n at " << where(t, i, j);
      }
    }
    for (int64_t t = 0; t < batch_; ++t)
      for (int64_t i = m_ * ldc; i < sc; ++i)
        ASSERT_EQ(out[t * sc + i], kGuard) << "wrote past the last row of batch " << t;
    if (also_threads_ > 0) {
      ASSERT_EQ(a_type_, tessera::DType::f32);
      ASSERT_EQ(b_type_, tessera::DType::f32);
      auto again = c;
      tbb::task_arena(also_threads_).execute([&] {
        run(a.data(), lda, sa, b, ldb, sb, again.data(), ldc, sc);
      });
      ASSERT_EQ(std::memcmp(again.data(), out.data(), out.size() * sizeof(float)), 0)
          << also_threads_ << " threads changed C";
    }
  }

 private:
  void run(const float* a, int64_t lda, int64_t sa, const float* b, int64_t ldb, int64_t sb,
           float* c, int64_t ldc, int64_t sc) const {
    using tessera::Status;
    if (kernels_ != nullptr) {
      tessera::detail::GemmProblem p;
      p.ta = ta_ == tessera::Transpose::trans;
      p.tb = tb_ == tessera::Transpose::trans;
      p.m = m_, p.n = n_, p.k = k_, p.alpha = alpha_, p.beta = beta_;
      p.a = a, p.lda = lda, p.b = b, p.ldb = ldb, p.c = c, p.ldc = ldc;
      const auto& tn = tuning_ ? *tuning_ : tessera::detail::active_tuning();
      ASSERT_EQ(tessera::detail::gemm_run(*kernels_, tn, p), Status::ok) << tessera::last_error();
    } else if (packed_) {
      const size_t bytes = tessera::sgemm_pack_b_size(tb_, k_, n_);
      std::vector<float> buf((bytes + 3) / 4);
      ASSERT_EQ(tessera::sgemm_pack_b(tb_, k_, n_, b, ldb, buf.data(), bytes), Status::ok)
          << tessera::last_error();
      ASSERT_EQ(tessera::sgemm_packed(ta_, m_, n_, k_, alpha_, a, lda, buf.data(), beta_, c, ldc),
                Status::ok)
          << tessera::last_error();
    } else if (batch_ == 1) {
      ASSERT_EQ(tessera::sgemm(ta_, tb_, m_, n_, k_, alpha_, a, lda, b, ldb, beta_, c, ldc),
                Status::ok)
          << tessera::last_error();
    } else {
      ASSERT_EQ(tessera::sgemm_strided_batched(ta_, tb_, m_, n_, k_, alpha_, a, lda, sa, b, ldb, sb,
                                               beta_, c, ldc, sc, batch_),
                Status::ok)
          << tessera::last_error();
    }
  }

  // x rounded to type t in place; returns the 16-bit elements (empty for f32).
  static std::vector<uint16_t> round_to(tessera::DType t, std::vector<float>& x) {
    std::vector<uint16_t> h;
    if (t == tessera::DType::f32) return h;
    for (float& f : x) {
      if (t == tessera::DType::f16) {
        h.push_back(tessera::reference::f32_to_f16(f));
        f = tessera::reference::f16_to_f32(h.back());
      } else {
        h.push_back(tessera::reference::f32_to_bf16(f));
        f = tessera::reference::bf16_to_f32(h.back());
      }
    }
    return h;
  }

  std::string where(int64_t t, int64_t i, int64_t j) const {
    return "batch " + std::to_string(t) + " C(" + std::to_string(i) + "," + std::to_string(j) +
           ") of m=" + std::to_string(m_) + " n=" + std::to_string(n_) +
           " k=" + std::to_string(k_) + " ta=" + std::to_string(int(ta_)) +
           " tb=" + std::to_string(int(tb_)) + " alpha=" + std::to_string(alpha_) +
           " beta=" + std::to_string(beta_) + " pad=" + std::to_string(pad_);
  }

  int64_t m_ = 1, n_ = 1, k_ = 1, pad_ = 0, batch_ = 1;
  tessera::Transpose ta_ = tessera::Transpose::no_trans, tb_ = tessera::Transpose::no_trans;
  float alpha_ = 1.0f, beta_ = 0.0f;
  bool packed_ = false, aligned_b_ = false;
  tessera::DType a_type_ = tessera::DType::f32, b_type_ = tessera::DType::f32;
  mutable std::vector<uint16_t> a16_, b16_;
  const tessera::arch::GemmKernels* kernels_ = nullptr;
  const tessera::detail::Tuning* tuning_ = nullptr;
  int also_threads_ = 0;
};
