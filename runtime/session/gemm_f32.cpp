// gemm_f32 (gemm_f32.h): oneDNN's sgemm where the build has it, else
// gemm_f32_own; either split over the thread pool's slots; GemmStatus,
// sgemm and prepare_gemm_f32 over it. The only file of the runtime that
// includes oneDNN, or OpenMP (which oneDNN's build uses).
#include "runtime/session/gemm_f32.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <new>
#include <string>
#include <vector>

#include "kernels/dot_f32/dot_f32.h"
#include "platform/memory.h"
#include "platform/process.h"
#include "platform/thread_pool.h"

#if LATTE_WITH_ONEDNN
#include <omp.h>
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

// Row i of C, columns [j0, j1).
void gemm_n_row(std::int64_t i, std::int64_t j0, std::int64_t j1, std::int64_t K, float alpha, const float* A,
                std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  float* c = C + i * ldc;
  if (beta == 0.f) std::fill(c + j0, c + j1, 0.f);
  else if (beta != 1.f)
    for (std::int64_t j = j0; j < j1; ++j) c[j] *= beta;
  for (std::int64_t k = 0; k < K; ++k) {
    const float a = alpha * A[i * lda + k];
    const float* b = B + k * ldb;
    for (std::int64_t j = j0; j < j1; ++j) c[j] += a * b[j];
  }
}

// Columns of C (B's rows for tb 'T') the slots' runs start at multiples of;
// each run but the last is whole units, the last takes the rest, so a run
// is never narrower than a unit. oneDNN's kernels then compute every
// element as in one call over all columns (a run of one column would be
// its matrix-vector path, which sums in another order).
constexpr std::int64_t kSlotColumns = 16;

// f(j0, j1) for C's columns [j0, j1), split over `threads` slots of the
// current pool; the statuses' first failure (Status::ok if none).
template <class F>
Status split_columns(int threads, std::int64_t N, F&& f) noexcept {
  const std::int64_t units = N / kSlotColumns;
  const int slots = static_cast<int>(std::min<std::int64_t>(threads > 1 ? threads : 1, std::max<std::int64_t>(units, 1)));
  if (slots <= 1) return f(std::int64_t{0}, N);
  std::atomic<int> status{static_cast<int>(Status::ok)};
  try {
    parallel_slots(slots, [&](int s, int ns) {
      const std::int64_t j0 = units * s / ns * kSlotColumns;
      const std::int64_t j1 = s + 1 == ns ? N : units * (s + 1) / ns * kSlotColumns;
      const Status st = f(j0, j1);
      if (st != Status::ok) status.store(static_cast<int>(st));
    });
  } catch (const std::bad_alloc&) {
    return Status::out_of_memory;
  } catch (...) {
    return Status::internal;
  }
  return static_cast<Status>(status.load());
}

#if LATTE_WITH_ONEDNN
// oneDNN runs a GEMM on an OpenMP team of the calling thread's team size;
// here every GEMM runs on one thread, split over the pool by Latte, so
// libgomp never starts threads of its own.
Status onednn_sgemm(char tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                    std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const dnnl_status_t st = dnnl_sgemm('N', tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  omp_set_num_threads(saved);
  switch (st) {
    case dnnl_success: return Status::ok;
    case dnnl_out_of_memory: return Status::out_of_memory;
    case dnnl_invalid_arguments: return Status::invalid_argument;
    default: return Status::internal;
  }
}
#endif

}  // namespace

Status gemm_f32_own(Isa isa, int threads, char tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                    std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                    std::int64_t ldc) noexcept {
  if (M <= 0 || N <= 0) return Status::ok;
  if (tb == 'T') {
    const kernels::DotF32Kernels& dk = kernels::dot_f32_kernels(isa);
    // Each slot a run of C's columns; blocks of B's rows outermost so a
    // slot's consecutive items share the block.
    return split_columns(threads, N, [&](std::int64_t j0, std::int64_t j1) {
      for (std::int64_t b0 = j0; b0 < j1; b0 += kBlockRows)
        for (std::int64_t i = 0; i < M; ++i)
          gemm_t_block(dk, i, b0, std::min(j1, b0 + kBlockRows), K, alpha, A, lda, B, ldb, beta, C, ldc);
      return Status::ok;
    });
  }
  if (tb != 'N') return Status::invalid_argument;
  return split_columns(threads, N, [&](std::int64_t j0, std::int64_t j1) {
    for (std::int64_t i = 0; i < M; ++i) gemm_n_row(i, j0, j1, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return Status::ok;
  });
}

Status gemm_f32(int threads, char tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) noexcept {
#if LATTE_WITH_ONEDNN
  if (M <= 0 || N <= 0) return Status::ok;
  if (tb != 'T' && tb != 'N') return Status::invalid_argument;
  return split_columns(threads, N, [&](std::int64_t j0, std::int64_t j1) {
    try {
      return onednn_sgemm(tb, M, j1 - j0, K, alpha, A, lda, tb == 'T' ? B + j0 * ldb : B + j0, ldb, beta, C + j0,
                          ldc);
    } catch (const std::bad_alloc&) {
      return Status::out_of_memory;
    }
  });
#else
  return gemm_f32_own(active_isa(), threads, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

Error gemm_f32_error(Status s) {
  const char* who = gemm_f32_is_onednn() ? "oneDNN sgemm" : "f32 GEMM";
  if (s == Status::out_of_memory) return Error(Status::out_of_memory, std::string(who) + ": out of memory");
  return Error(Status::internal, std::string(who) + " failed (" + status_name(s) + ")");
}

bool gemm_f32_is_onednn() { return LATTE_WITH_ONEDNN != 0; }

bool GemmStatus::gemm(int threads, char tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                      const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                      std::int64_t ldc) noexcept {
  const Status st = gemm_f32(threads, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (st != Status::ok) status_.store(static_cast<int>(st));
  return st == Status::ok;
}

void GemmStatus::throw_if_failed() const {
  if (const int st = status_.load(); st != static_cast<int>(Status::ok)) throw gemm_f32_error(static_cast<Status>(st));
}

void sgemm(int threads, char tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
           std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  GemmStatus status;
  status.gemm(threads, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  status.throw_if_failed();
}

void prepare_gemm_f32() {
  // oneDNN builds its GEMM kernels on its first call; built here once, on
  // the calling thread, where a failed allocation is an error like any
  // other rather than inside a region.
  preload_unwinder();
  static std::atomic<bool> gemm_built{false};
  if (gemm_f32_is_onednn() && !gemm_built.load()) {
    constexpr std::size_t kGemmBuildBytes = std::size_t{32} << 20;
    // oneDNN's kernel generator crashes (SIGSEGV) where it cannot map the
    // memory it needs: refused first where a generous share is not there.
    if (!address_space_available(kGemmBuildBytes))
      throw Error(Status::out_of_memory, "oneDNN sgemm: cannot reserve " + std::to_string(kGemmBuildBytes >> 20) +
                                             " MiB to build its kernels in");
    std::vector<float> m(3 * 32 * 32, 0.f);
    try {
      sgemm(1, 'T', 32, 32, 32, 1.f, m.data(), 32, m.data() + 1024, 32, 0.f, m.data() + 2048, 32);
    } catch (const std::bad_alloc&) {
      throw Error(Status::out_of_memory, "oneDNN sgemm: out of memory building its kernels");
    }
    gemm_built = true;
  }
}

}  // namespace latte
