// gemm_f32 and Latte's own gemm_f32_own against a double-precision triple
// loop, on odd shapes and the naive MLA form's real ones (both B layouts,
// alpha, beta 0 over NaN, beta 1 accumulating, leading dimensions wider
// than the rows), on one thread and split over a pool (the same bits on any
// number of threads), for every supported ISA's dot kernel.
#include "runtime/session/gemm_f32.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <random>
#include <vector>

#include "kernels/isa.h"
#include "platform/thread_pool.h"

namespace latte {
namespace {

struct Shape {
  std::int64_t M, N, K;
};

std::vector<float> random_vec(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// exact_split: the same bits for any split of C's columns (Latte's own
// loops everywhere; oneDNN's on x86-64, where its kernels accumulate each
// element alike for any width: Debian's aarch64 build does not, there the
// check is the error bound alone).
template <class Gemm>
void check(Gemm gemm, char tb, Shape s, float alpha, float beta, int threads, bool exact_split = true) {
  SCOPED_TRACE(::testing::Message() << "tb " << tb << " M " << s.M << " N " << s.N << " K " << s.K << " alpha "
                                    << alpha << " beta " << beta << " threads " << threads);
  std::mt19937 rng(static_cast<unsigned>(s.M * 131 + s.N * 7 + s.K));
  const std::int64_t lda = s.K + 3, ldb = (tb == 'T' ? s.K : s.N) + 5, ldc = s.N + 2;
  const auto A = random_vec(static_cast<std::size_t>(s.M * lda), rng);
  const auto B = random_vec(static_cast<std::size_t>((tb == 'T' ? s.N : s.K) * ldb), rng);
  auto C = random_vec(static_cast<std::size_t>(s.M * ldc), rng);
  if (beta == 0.f) C.assign(C.size(), std::numeric_limits<float>::quiet_NaN());  // must be ignored
  std::vector<double> want(C.size());
  for (std::int64_t i = 0; i < s.M; ++i)
    for (std::int64_t j = 0; j < s.N; ++j) {
      double acc = 0;
      for (std::int64_t k = 0; k < s.K; ++k)
        acc += double(A[i * lda + k]) * (tb == 'T' ? B[j * ldb + k] : B[k * ldb + j]);
      want[i * ldc + j] = alpha * acc + (beta == 0.f ? 0.0 : beta * double(C[i * ldc + j]));
    }
  const auto C0 = C;
  const Status st = gemm(threads, tb, s.M, s.N, s.K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
  ASSERT_EQ(st, Status::ok);
  // The same bits on any number of slots: each element's arithmetic does not
  // depend on the split (the graph's first rule).
  for (int other : {1, 3, 5, 7}) {
    if (!exact_split) break;
    auto D = C0;
    ASSERT_EQ(gemm(other, tb, s.M, s.N, s.K, alpha, A.data(), lda, B.data(), ldb, beta, D.data(), ldc), Status::ok);
    for (std::int64_t i = 0; i < s.M; ++i)
      for (std::int64_t j = 0; j < s.N; ++j)
        ASSERT_EQ(D[i * ldc + j], C[i * ldc + j]) << "threads " << other << " against " << threads << " at " << i << ", "
                                                  << j;
  }
  double worst = 0;
  for (std::int64_t i = 0; i < s.M; ++i)
    for (std::int64_t j = 0; j < s.N; ++j) worst = std::max(worst, std::abs(C[i * ldc + j] - want[i * ldc + j]));
  EXPECT_LT(worst, 1e-5 * std::sqrt(double(s.K) + 1) * 4) << "max abs error";
  // Padding between rows untouched.
  if (beta == 0.f) {
    for (std::int64_t i = 0; i < s.M; ++i)
      for (std::int64_t j = s.N; j < ldc; ++j) EXPECT_TRUE(std::isnan(C[i * ldc + j]));
  }
}

const Shape kShapes[] = {{1, 1, 1},   {3, 5, 7},    {17, 130, 33}, {1, 257, 64}, {37, 65, 128},
                         {5, 17, 40}, {9, 31, 64},  {4, 33, 19},   {7, 47, 96},  {2, 49, 200},
                         {3, 97, 50}, {6, 113, 70}, {1, 200, 33}};
// The naive form's on V2-Lite: (nb, n_h*d_nope, d_c), scores (nq, nb, d_nope), P V (nq, d_v, nb).
const Shape kRealShapes[] = {{256, 2048, 512}, {64, 256, 128}, {64, 128, 256}};

TEST(GemmF32, OwnMatchesTripleLoopOnEveryIsa) {
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    const auto own = [isa](int threads, char tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                           std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
      return gemm_f32_own(isa, threads, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    };
    for (const Shape& s : kShapes)
      for (char tb : {'T', 'N'}) {
        check(own, tb, s, 1.f, 0.f, 1);
        check(own, tb, s, 0.125f, 1.f, 2);
      }
  }
}

TEST(GemmF32, BuildsGemmMatchesTripleLoop) {
#if defined(__x86_64__)
  const bool exact = true;
#else
  const bool exact = !gemm_f32_is_onednn();
#endif
  for (const Shape& s : kShapes)
    for (char tb : {'T', 'N'}) {
      check(gemm_f32, tb, s, 1.f, 0.f, 2, exact);
      check(gemm_f32, tb, s, 0.5f, 1.f, 1, exact);
    }
  for (const Shape& s : kRealShapes)
    for (char tb : {'T', 'N'}) check(gemm_f32, tb, s, 0.5f, 1.f, 2, exact);
}

TEST(GemmF32, InsideAParallelRegionRunsOnItsThread) {
  ThreadPool pool(2);
  const PoolScope scope(pool);
  std::vector<int> ok(4, 0);
  parallel_slots(4, [&](int s, int ns) {
    for (int r = 4 * s / ns; r < 4 * (s + 1) / ns; ++r) {
      std::vector<float> A(6, 1.f), B(6, 2.f), C(4, 0.f);
      const Status st = gemm_f32_own(active_isa(), 2, 'T', 2, 2, 3, 1.f, A.data(), 3, B.data(), 3, 0.f, C.data(), 2);
      const Status st2 = gemm_f32(2, 'T', 2, 2, 3, 1.f, A.data(), 3, B.data(), 3, 1.f, C.data(), 2);
      ok[r] = st == Status::ok && st2 == Status::ok && C[0] == 12.f && C[3] == 12.f;
    }
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(ok[r], 1) << r;
}

#if defined(__linux__)
int process_threads() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// gemm_f32 runs on the pool's threads alone: oneDNN (whose build uses
// OpenMP) must not start threads of its own, which would spin beside the
// pool's and end the process where they cannot be created.
TEST(GemmF32, StartsNoThreadsOfItsOwn) {
  ThreadPool pool(3);
  const PoolScope scope(pool);
  const Shape s = kRealShapes[0];
  std::vector<float> A(static_cast<std::size_t>(s.M * s.K), 0.5f), B(static_cast<std::size_t>(s.N * s.K), 0.25f),
      C(static_cast<std::size_t>(s.M * s.N));
  const int before = process_threads();
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(gemm_f32(3, 'T', s.M, s.N, s.K, 1.f, A.data(), s.K, B.data(), s.K, 0.f, C.data(), s.N), Status::ok);
  EXPECT_EQ(process_threads(), before);
  EXPECT_EQ(C[0], 0.125f * s.K);
}
#endif

TEST(GemmF32, RefusesATransposeItDoesNotHave) {
  float x = 0;
  EXPECT_EQ(gemm_f32_own(Isa::ref, 1, 'X', 1, 1, 1, 1.f, &x, 1, &x, 1, 0.f, &x, 1), Status::invalid_argument);
}

}  // namespace
}  // namespace latte
