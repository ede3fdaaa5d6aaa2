// gemm_f32 (gemm_f32.h): oneDNN's sgemm where the build has it, else
// gemm_f32_own. The only file of the runtime that includes oneDNN.
#include "runtime/session/gemm_f32.h"

#include <omp.h>

#include <algorithm>
#include <string>

#include "kernels/dot_f32/dot_f32.h"

#if LATTE_WITH_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace latte {

namespace {

// Rows of B (tb 'T') a block: 64 rows of K = 512 floats (128 KiB) stay in
// L2 while every row of A is dotted with them.
constexpr std::int64_t kBlockRows = 64;

void gemm_t_block(const kernels::DotF32Kernels& dk, std::int64_t i, std::int64_t j0, std::int64_t j1,
                  std::int64_t K, float alpha, const float* A, std::int64_t lda, const float* B, std::int64_t ldb,
                  float beta, float* C, std::int64_t ldc) {
  const float* a = A + i * lda;
  float* c = C + i * ldc;
  for (std::int64_t j = j0; j < j1; ++j) {
    const float v = alpha * dk.dot(a, B + j * ldb, static_cast<std::size_t>(K));
    c[j] = beta == 0.f ? v : v + beta * c[j];
  }
}

void gemm_n_row(std::int64_t i, std::int64_t N, std::int64_t K, float alpha, const float* A, std::int64_t lda,
                const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  float* c = C + i * ldc;
  if (beta == 0.f) std::fill(c, c + N, 0.f);
  else if (beta != 1.f)
    for (std::int64_t j = 0; j < N; ++j) c[j] *= beta;
  for (std::int64_t k = 0; k < K; ++k) {
    const float a = alpha * A[i * lda + k];
    const float* b = B + k * ldb;
    for (std::int64_t j = 0; j < N; ++j) c[j] += a * b[j];
  }
}

}  // namespace

Status gemm_f32_own(Isa isa, char tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                    std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                    std::int64_t ldc) noexcept {
  if (M <= 0 || N <= 0) return Status::ok;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (tb == 'T') {
    const kernels::DotF32Kernels& dk = kernels::dot_f32_kernels(isa);
    const std::int64_t blocks = (N + kBlockRows - 1) / kBlockRows;
    // Work items (block of B's rows, row of A), blocks outermost so a
    // thread's consecutive items share the block.
    const std::int64_t items = blocks * M;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && items >= 8)
    for (std::int64_t w = 0; w < items; ++w) {
      const std::int64_t b = w / M, i = w % M;
      gemm_t_block(dk, i, b * kBlockRows, std::min(N, (b + 1) * kBlockRows), K, alpha, A, lda, B, ldb, beta, C, ldc);
    }
    return Status::ok;
  }
  if (tb != 'N') return Status::invalid_argument;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && M >= 2)
  for (std::int64_t i = 0; i < M; ++i) gemm_n_row(i, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  return Status::ok;
}

Status gemm_f32(char tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) noexcept {
#if LATTE_WITH_ONEDNN
  switch (dnnl_sgemm('N', tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) {
    case dnnl_success: return Status::ok;
    case dnnl_out_of_memory: return Status::out_of_memory;
    case dnnl_invalid_arguments: return Status::invalid_argument;
    default: return Status::internal;
  }
#else
  return gemm_f32_own(active_isa(), tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

Error gemm_f32_error(Status s) {
  const char* who = gemm_f32_is_onednn() ? "oneDNN sgemm" : "f32 GEMM";
  if (s == Status::out_of_memory) return Error(Status::out_of_memory, std::string(who) + ": out of memory");
  return Error(Status::internal, std::string(who) + " failed (" + status_name(s) + ")");
}

bool gemm_f32_is_onednn() { return LATTE_WITH_ONEDNN != 0; }

}  // namespace latte
