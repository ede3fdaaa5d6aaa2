// matvec's row-interleaved weights (x16; the layout: quant/x16_layout.h):
// the interleave of a matrix at load, the argument checks, the scratch sizes
// and the reference.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/matvec/matvec.h"
#include "quant/ggml_blocks.h"
#include "quant/x16_layout.h"

namespace latte::kernels {

void matvec_x16_check_args(GgmlType type, std::size_t rows, std::size_t cols) {
  matvec_check_args(type, cols);
  if (!x16_type(type))
    throw std::invalid_argument(std::string("matvec x16: ") + ggml_type_name(type) + " has no row-interleaved layout");
  if (rows % 16 != 0)
    throw std::invalid_argument("matvec x16: " + std::to_string(rows) + " rows is not a multiple of 16");
}

void matvec_x16_interleave(GgmlType type, void* w, std::size_t rows, std::size_t cols, void* tmp) {
  matvec_x16_check_args(type, rows, cols);
  const std::size_t rb = ggml_row_bytes(type, cols), nb = cols / ggml_block_elems(type);
  auto* base = static_cast<std::uint8_t*>(w);
  auto* rows16 = static_cast<std::uint8_t*>(tmp);  // (16, rb)
  for (std::size_t i = 0; i < rows / 16; ++i) {
    std::uint8_t* tile = base + i * 16 * rb;
    std::memcpy(rows16, tile, 16 * rb);
    x16_interleave_tile(type, tile, rows16, rb, nb);
  }
}

std::size_t matvec_x16_rows_offset(GgmlType type, std::size_t cols, std::size_t n_tokens) {
  return (matvec_scratch_bytes(type, cols, n_tokens) + 63) / 64 * 64;
}

std::size_t matvec_scratch_bytes_x16(GgmlType type, std::size_t cols, std::size_t n_tokens) {
  return matvec_x16_rows_offset(type, cols, n_tokens) + 16 * ggml_row_bytes(type, cols);
}

void matmul_x16_ref(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                    std::size_t ldx, std::size_t n_tokens, float* y, std::size_t ldy, void* scratch) {
  matvec_x16_check_args(type, rows, cols);
  const std::size_t rb = ggml_row_bytes(type, cols), nb = cols / ggml_block_elems(type);
  std::vector<std::uint8_t> plain(rows * rb);  // (rows, rb) the original layout
  for (std::size_t i = 0; i < rows / 16; ++i)
    x16_deinterleave(type, static_cast<const std::uint8_t*>(w) + i * 16 * rb, 0, nb, plain.data() + i * 16 * rb, rb);
  matmul_ref(type, plain.data(), rows, cols, x, ldx, n_tokens, y, ldy, scratch);
}

}  // namespace latte::kernels
