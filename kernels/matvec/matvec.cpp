// matvec's argument checks, scratch sizes, scalar references and dispatch to
// the per-ISA tables. Baseline flags: no SIMD body here (matvec__<isa>.cpp).
#include "kernels/matvec/matvec.h"

#include "platform/thread_pool.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "quant/fp16.h"
#include "quant/ggml_blocks.h"

namespace latte::kernels {

bool matvec_supports(GgmlType type) {
  return ggml_type_info(static_cast<std::uint32_t>(type)).has_value();
}

void matvec_check_args(GgmlType type, std::size_t cols) {
  auto info = ggml_type_info(static_cast<std::uint32_t>(type));
  if (!info)
    throw std::invalid_argument("matvec: ggml type id " + std::to_string(static_cast<unsigned>(type)) +
                                " is not supported");
  if (cols % info->block_elems != 0)
    throw std::invalid_argument(std::string("matvec: ") + std::to_string(cols) + " columns of " + info->name +
                                " is not a multiple of its block size " + std::to_string(info->block_elems));
}

bool matvec_has_packed_gemm(GgmlType type) { return packed_gemm_type(type); }

std::size_t matvec_scratch_bytes(GgmlType type, std::size_t cols, std::size_t n_tokens) {
  matvec_check_args(type, cols);
  if (type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16) return 0;
  const std::size_t nb = cols / 32;
  std::size_t bytes;
  if (ggml_has_super_blocks(type)) bytes = n_tokens * (cols / 256) * sizeof(ActQ8K);
  else if (type == GgmlType::Q8_0) bytes = n_tokens * nb * sizeof(ActQ8);
  // + one token's ActPairs (matvec_impl.h's build_act_pairs: the AVX-512
  // decode rows of the other block-32 types), whatever n_tokens: a scratch
  // sized for a prefill chunk also serves decode.
  else bytes = n_tokens * nb * sizeof(ActQ8) + nb / 2 * 64 + 2 * sizeof(float) * ((nb + 15) / 16 * 16);
  // Where the packed GEMM may take them (kPackedGemmMinTokens), its types
  // quantize to ActQ8 plus integer sums per 16.
  if (matvec_has_packed_gemm(type) && n_tokens >= kPackedGemmMinTokens)
    bytes = std::max(bytes, n_tokens * nb * (sizeof(ActQ8) + 2 * sizeof(std::int32_t)));
  return bytes;
}

void matmul_ref(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                std::size_t ldx, std::size_t n_tokens, float* y, std::size_t ldy, void* /*scratch*/,
                int threads) {
  matvec_check_args(type, cols);
  const std::size_t rb = ggml_row_bytes(type, cols);
  const auto* wb = static_cast<const std::uint8_t*>(w);
  const int team = threads > 1 ? static_cast<int>(std::min<std::size_t>(threads, rows)) : 1;
  // Allocated here: the region's slots call nothing that throws.
  std::vector<float> rows_buf(static_cast<std::size_t>(team) * cols);  // (team, cols) dequantized rows
  parallel_slots(team, [&](int t, int nt) {
    float* row = rows_buf.data() + static_cast<std::size_t>(t) * cols;  // [cols]
    for (std::size_t r = rows * t / nt; r < rows * (t + 1) / nt; ++r) {
      dequantize_row_ref(type, wb + r * rb, row, cols);
      for (std::size_t tk = 0; tk < n_tokens; ++tk) {
        double acc = 0;
        for (std::size_t c = 0; c < cols; ++c) acc += static_cast<double>(row[c]) * x[tk * ldx + c];
        y[tk * ldy + r] = static_cast<float>(acc);
      }
    }
  });
}

void matvec_ref(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                float* y, void* scratch, int threads) {
  matmul_ref(type, w, rows, cols, x, cols, 1, y, rows, scratch, threads);
}

void dequantize_ref(GgmlType type, const void* src, float* dst, std::size_t n) {
  matvec_check_args(type, n);
  dequantize_row_ref(type, src, dst, n);
}

void dequantize_bf16_ref(GgmlType type, const void* src, std::uint16_t* dst, std::size_t n) {
  matvec_check_args(type, n);
  std::vector<float> tmp(n);  // [n]
  dequantize_row_ref(type, src, tmp.data(), n);
  for (std::size_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(tmp[i]);
}

namespace {
bool x16_fast_ref(GgmlType) { return false; }
const MatvecKernels kRef{&matvec_ref,         &matmul_ref,     &dequantize_ref, &dequantize_bf16_ref,
                         &matmul_x16_ref, &x16_fast_ref};
}

LATTE_DEFINE_KERNEL_DISPATCH(matvec, MatvecKernels, kRef)

}  // namespace latte::kernels
