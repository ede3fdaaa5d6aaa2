// f32 GEMMs for prefill: C (M, N) = alpha A (M, K) op(B) + beta C, all
// row-major, A never transposed (the only case the session has):
//   tb 'T': B is (N, K), C[i][j] = alpha A_i . B_j + beta C[i][j]
//   tb 'N': B is (K, N), C_i = alpha sum_k A[i][k] B_k + beta C_i
// beta 0 ignores C's contents (NaN included), as BLAS does.
// With oneDNN (LATTE_WITH_ONEDNN) gemm_f32 runs dnnl_sgemm; without it, and
// always for gemm_f32_own, Latte's own loops over the dot_f32 kernels. Both
// split C's columns over `threads` slots of the calling thread's pool
// (platform/thread_pool.h; one thread inside a region), each element's
// arithmetic the same however they are split. Neither throws: the status
// says what went wrong (oneDNN can run out of memory). GemmStatus records
// that status for calls inside a region's slots, sgemm throws it as Error,
// and prepare_gemm_f32 has oneDNN build its kernels before any region.
// Internal to runtime/session.
//
// Rules (graph_rules.h): the same bits on any number of threads; a failure
// is a status inside a region and an Error after it.
#pragma once

#include <atomic>
#include <cstdint>

#include "kernels/isa.h"
#include "runtime/error.h"

namespace latte {

Status gemm_f32(int threads, char tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) noexcept;

// isa: whose dot_f32 kernels run (gemm_f32 passes active_isa()).
Status gemm_f32_own(Isa isa, int threads, char tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                    std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                    std::int64_t ldc) noexcept;

// The error for a failed gemm_f32's status (out_of_memory or internal).
Error gemm_f32_error(Status s);

// Whether gemm_f32 is oneDNN's (this build has LATTE_WITH_ONEDNN).
bool gemm_f32_is_onednn();

// gemm_f32 on one thread with a failure recorded rather than thrown, for
// calls inside a region's slots: throw_if_failed() after it. Also what
// sgemm() runs (over its threads).
class GemmStatus {
 public:
  // C = alpha A op(B) + beta C as gemm_f32 over `threads` slots; false on failure.
  bool gemm(int threads, char tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A, std::int64_t lda,
            const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) noexcept;
  bool failed() const noexcept {
    return status_.load(std::memory_order_relaxed) != static_cast<int>(Status::ok);
  }
  // Error(out_of_memory or internal) if a gemm failed.
  void throw_if_failed() const;

 private:
  std::atomic<int> status_{static_cast<int>(Status::ok)};
};

// gemm_f32 over `threads` slots of the calling thread's pool, a failure thrown.
void sgemm(int threads, char tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A, std::int64_t lda,
           const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc);

// With oneDNN, builds its GEMM kernels once per process on the calling
// thread, where a failed allocation is an Error(out_of_memory) rather than
// the end of the process. Nothing without oneDNN.
void prepare_gemm_f32();

}  // namespace latte
