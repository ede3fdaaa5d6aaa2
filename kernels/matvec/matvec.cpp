// matvec's argument checks, scratch sizes, scalar references and dispatch to
// the per-ISA tables. Baseline flags: no SIMD body here (matvec__<isa>.cpp).
#include "kernels/matvec/matvec.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "quant/fp16.h"
#include "quant/ggml_blocks.h"
#include "quant/x16_layout.h"

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

MatmulPlan matmul_plan_args(GgmlType type, std::size_t cols, std::size_t n_tokens, bool x16) {
  if (x16) matvec_x16_check_args(type, 16, cols);
  else matvec_check_args(type, cols);
  MatmulPlan p;
  p.type = type;
  p.x16 = x16;
  p.cols = cols;
  p.n_tokens = n_tokens;
  return p;
}

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
                std::size_t ldx, std::size_t n_tokens, float* y, std::size_t ldy, void* /*scratch*/) {
  matvec_check_args(type, cols);
  const std::size_t rb = ggml_row_bytes(type, cols);
  const auto* wb = static_cast<const std::uint8_t*>(w);
  std::vector<float> row(cols);  // [cols] one row dequantized
  for (std::size_t r = 0; r < rows; ++r) {
    dequantize_row_ref(type, wb + r * rb, row.data(), cols);
    for (std::size_t tk = 0; tk < n_tokens; ++tk) {
      double acc = 0;
      for (std::size_t c = 0; c < cols; ++c) acc += static_cast<double>(row[c]) * x[tk * ldx + c];
      y[tk * ldy + r] = static_cast<float>(acc);
    }
  }
}

void matvec_ref(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                float* y, void* scratch) {
  matmul_ref(type, w, rows, cols, x, cols, 1, y, rows, scratch);
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
// The reference's phases: nothing to quantize; x16 rows go back to the
// original layout a tile at a time in the work memory.
MatmulPlan matmul_plan_ref(GgmlType type, std::size_t cols, std::size_t n_tokens, bool x16) {
  MatmulPlan p = matmul_plan_args(type, cols, n_tokens, x16);
  p.row_unit = x16 ? 16 : 1;
  p.work_bytes = x16 ? 16 * ggml_row_bytes(type, cols) : 0;
  return p;
}
void matmul_quantize_ref(const MatmulPlan&, const float*, std::size_t, std::size_t, std::size_t, void*) {}
void matmul_rows_ref(const MatmulPlan& p, const void* w, std::size_t rows, const float* x, std::size_t ldx, float* y,
                     std::size_t ldy, const void* /*scratch*/, void* work) {
  const std::size_t rb = ggml_row_bytes(p.type, p.cols);
  if (!p.x16) {
    matmul_ref(p.type, w, rows, p.cols, x, ldx, p.n_tokens, y, ldy, nullptr);
    return;
  }
  auto* plain = static_cast<std::uint8_t*>(work);  // (16, rb) one tile in the original layout
  const std::size_t nb = p.cols / ggml_block_elems(p.type);
  for (std::size_t i = 0; i < rows / 16; ++i) {
    x16_deinterleave(p.type, static_cast<const std::uint8_t*>(w) + i * 16 * rb, 0, nb, plain, rb);
    matmul_ref(p.type, plain, 16, p.cols, x, ldx, p.n_tokens, y + 16 * i, ldy, nullptr);
  }
}
const MatvecKernels kRef{&matvec_ref,     &matmul_ref,     &dequantize_ref,      &dequantize_bf16_ref,
                         &matmul_x16_ref, &x16_fast_ref,   &matmul_plan_ref,     &matmul_quantize_ref,
                         &matmul_rows_ref};
}  // namespace

LATTE_DEFINE_KERNEL_DISPATCH(matvec, MatvecKernels, kRef)

}  // namespace latte::kernels
