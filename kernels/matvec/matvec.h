// Products of a GGML-typed weight matrix with f32 activations.
//   decode:  y = W x            (one token)
//   prefill: Y = X W^T          (several tokens)
// W has `rows` rows of `cols` elements, stored row-major as consecutive blocks
// of its type (a GGUF tensor with ne = {cols, rows}, used in place); each row
// is ggml_row_bytes(type, cols) bytes. Types: every one quant/ggml_types.h
// names (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K, IQ4_XS).
//
// The SIMD bodies for the quantized types first quantize the activations to
// int8 in caller-provided scratch (ActQ8: one f32 scale per 32; ActQ8K: one
// per 256 for Q2_K..Q6_K, as llama.cpp's Q8_K) and use integer dot
// products (AVX-512 VNNI vpdpbusd, AVX2 vpmaddubsw, NEON sdot): that adds an
// error of at most amax(block)/254 per activation (output NMSE around 1e-5).
// F32/F16/BF16 weights are multiplied in f32 (exact products, f32 sums).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dispatch.h"
#include "kernels/isa.h"
#include "quant/ggml_types.h"
#include "quant/x16_layout.h"

namespace latte::kernels {

// Activations quantized for the integer paths: x[i] ~ d * qs[i].
struct ActQ8 {
  float d;
  float s;  // d * sum(qs): the term offsets and mins multiply
  std::int8_t qs[32];
};
static_assert(sizeof(ActQ8) == 40);
// For the K-quants: one scale per 256, so the sub-block scales can multiply
// integer sums. x[i] ~ d * qs[i]; sums[g] = sum(qs[32g .. 32g+31]).
struct ActQ8K {
  float d;
  std::int32_t sums[8];     // per 32 (Q4_K / Q5_K mins)
  std::int16_t sums16[16];  // per 16 (Q2_K mins)
  std::int8_t qs[256];
};
static_assert(sizeof(ActQ8K) == 324);

// Matmul over the packed GEMM's types (packed_gemm_type below: Q8_0 and the
// types decoded to integers per group) repacks each tile of rows once per
// call (rows interleaved, so a register holds one int32 dot per row) instead
// of decoding every weight group once per 4 tokens, from a token count that
// depends on the ISA and the type (matvec_impl.h, packed_min_tokens: where
// the repacking, a pass over the weights, costs less than the row kernels'
// extra work; x16 weights with AVX-512 VNNI: x16_packed_min_tokens): never
// below kPackedGemmMinTokens, always from kPackedGemmAllTokens on.
inline constexpr std::size_t kPackedGemmMinTokens = 8;
inline constexpr std::size_t kPackedGemmAllTokens = 32;

// Scratch bytes the kernels need for n_tokens rows of `cols` activations
// (0 for F32/F16/BF16; for the packed GEMM's types also integer sums). The
// scratch must be at least 4-byte aligned (it holds ActQ8/ActQ8K); 64 is
// best. One scratch per concurrent call.
std::size_t matvec_scratch_bytes(GgmlType type, std::size_t cols, std::size_t n_tokens);

// A product split by its caller. The kernels open no parallel region and
// read no thread setting: a caller that runs a product on several threads
// plans it once, quantizes the activations into the shared scratch (split by
// tokens: matmul_quantize over [t0, t1) ranges that together cover every
// token, all of them before any matmul_rows), then runs runs of rows (split
// by rows, each run starting at a multiple of row_unit, one thread each, with
// its own work memory). Every output row's arithmetic is the same for any
// split (runtime/session/graph_rules.h's rule 1 rests on it).
struct MatmulPlan {
  GgmlType type{};
  bool x16 = false;           // w row-interleaved (matmul_x16's layout)
  std::size_t cols = 0, n_tokens = 0;
  std::size_t row_unit = 16;  // runs of rows start at multiples of this
  bool quantize = false;      // matmul_quantize must run first (the quantized types)
  std::size_t work_bytes = 0; // per-thread work memory of matmul_rows (x16 without tile kernels)
  // The ISA's own choices, read only by its matmul_quantize / matmul_rows:
  int path = 0;
  bool kq = false;            // ActQ8K per token (else ActQ8)
  bool sums = false;          // integer sums per 16 after the activations (the packed GEMM)
  bool pairs = false;         // one token's ActPairs after its activations (AVX-512 block-32 rows)
  std::size_t act_bytes = 0;  // scratch bytes per quantized token
};

struct MatvecKernels {
  // y[r] = sum_c W[r, c] * x[c] for r < rows, on the calling thread.
  //   w: rows x row_bytes; x: [cols]; y: [rows]
  //   scratch: matvec_scratch_bytes(type, cols, 1) bytes
  // To split rows over your own threads: w + r0 * row_bytes, rows = r1 - r0,
  // y + r0, one scratch per thread (or the phases below, which quantize once).
  // cols must be a multiple of the type's block size.
  void (*matvec)(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                 float* y, void* scratch);
  // Y[t, r] = sum_c X[t, c] * W[r, c] for t < n_tokens, r < rows, on the
  // calling thread.
  //   x: [n_tokens][ldx] (ldx >= cols); y: [n_tokens][ldy] (ldy >= rows)
  //   scratch: matvec_scratch_bytes(type, cols, n_tokens) bytes
  // Each weight block is decoded once per group of up to 4 tokens (Q8_0 and
  // the other packed types from a few tokens on, see kPackedGemmMinTokens:
  // once per call, into packed tiles).
  void (*matmul)(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                 std::size_t ldx, std::size_t n_tokens, float* y, std::size_t ldy, void* scratch);
  // dst[0..n) = the n elements of `type` at src as f32 (same values as
  // dequantize_row_ref). n: a multiple of the block size. Single-threaded:
  // for packing weights at load time (e.g. for a oneDNN prefill GEMM).
  void (*dequantize)(GgmlType type, const void* src, float* dst, std::size_t n);
  // The same rounded to bf16 bits (round to nearest even).
  void (*dequantize_bf16)(GgmlType type, const void* src, std::uint16_t* dst, std::size_t n);
  // matmul over a row-interleaved matrix (x16, below): the same arguments,
  // w laid out by matvec_x16_interleave, rows a multiple of 16, scratch
  // matvec_scratch_bytes_x16 bytes. Same results as matmul on the original
  // layout up to f32 summation order.
  void (*matmul_x16)(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                     std::size_t ldx, std::size_t n_tokens, float* y, std::size_t ldy, void* scratch);
  // Whether this ISA's matmul_x16 has kernels of its own for `type` (then
  // x16 decodes faster than the original layout). Elsewhere it takes each
  // tile back to the original layout first: correct, and slower.
  bool (*x16_fast)(GgmlType type);
  // The phases of a split product (MatmulPlan above); matmul and matmul_x16
  // are these three on one thread. Throws std::invalid_argument as matmul.
  MatmulPlan (*matmul_plan)(GgmlType type, std::size_t cols, std::size_t n_tokens, bool x16);
  //   tokens [t0, t1) of x (n_tokens, ldx) quantized into scratch
  //   (matvec_scratch_bytes or _x16 for plan.n_tokens)
  void (*matmul_quantize)(const MatmulPlan& plan, const float* x, std::size_t ldx, std::size_t t0,
                          std::size_t t1, void* scratch);
  //   y (n_tokens, ldy) for the `rows` rows at w (a run's first row and
  //   output column: w + r0 * row_bytes, y + r0); work: plan.work_bytes
  void (*matmul_rows)(const MatmulPlan& plan, const void* w, std::size_t rows, const float* x, std::size_t ldx,
                      float* y, std::size_t ldy, const void* scratch, void* work);
};

// Naive on purpose: dequantize_row_ref of each row, double accumulation,
// unquantized activations. Scratch is unused.
void matvec_ref(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                float* y, void* scratch);
void matmul_ref(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                std::size_t ldx, std::size_t n_tokens, float* y, std::size_t ldy, void* scratch);
// dequantize_row_ref, then quant/fp16.h's f32_to_bf16.
void dequantize_ref(GgmlType type, const void* src, float* dst, std::size_t n);
void dequantize_bf16_ref(GgmlType type, const void* src, std::uint16_t* dst, std::size_t n);

// True for the types matvec/matmul accept.
bool matvec_supports(GgmlType type);
// True for the types matmul runs as a packed int8 GEMM from a few tokens on
// (kPackedGemmMinTokens): Q8_0, and the types whose 32-element groups are
// integers times one scale plus one offset (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
// Q4_K, Q5_K, IQ4_XS) or whose 16-element halves are (Q2_K, Q3_K, Q6_K).
// The one list, constexpr for the kernels' template dispatch (there, in
// constant expressions only: per-ISA objects call no inline function of
// baseline code at run time); matvec_has_packed_gemm asks it out of line.
constexpr bool packed_gemm_type(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_0 ||
         t == GgmlType::Q5_1 || t == GgmlType::IQ4_NL || t == GgmlType::Q4_K || t == GgmlType::Q5_K ||
         t == GgmlType::IQ4_XS || t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q6_K;
}
bool matvec_has_packed_gemm(GgmlType type);
// Throws std::invalid_argument naming the type unless matvec_supports(type)
// and cols is a multiple of its block size (every entry point calls it).
void matvec_check_args(GgmlType type, std::size_t cols);

// ------------------------------------------- row-interleaved weights (x16)
// Decode reads every weight once per token, and the row kernels above spend
// more instructions per Q4_K, Q5_K, Q6_K, IQ4_XS or block-32 4- and 5-bit
// weight than the memory needs time to deliver it. Interleaved by 16 rows
// (quant/x16_layout.h: the byte map and the types that have it), one 64-byte
// load holds 4 bytes of each of 16 rows, a vpdpbusd against one broadcast
// activation word yields one int32 per row, and scales and mins are unpacked
// 16 rows at a time.

// Throws std::invalid_argument naming what is wrong unless type has an x16
// layout, rows is a multiple of 16 and cols of the type's block size.
void matvec_x16_check_args(GgmlType type, std::size_t rows, std::size_t cols);
// A MatmulPlan's shared part, which every ISA's matmul_plan starts from: the
// arguments checked (matvec_check_args, or matvec_x16_check_args for one
// tile), then type, x16, cols and n_tokens set.
MatmulPlan matmul_plan_args(GgmlType type, std::size_t cols, std::size_t n_tokens, bool x16);
// Re-lays out the matrix w (rows x ggml_row_bytes(type, cols)) as x16, in
// place, tile by tile on the calling thread; tmp: 16 rows' bytes. A caller
// splits a matrix over threads by whole tiles.
void matvec_x16_interleave(GgmlType type, void* w, std::size_t rows, std::size_t cols, void* tmp);
// matmul_x16's scratch: matvec_scratch_bytes' rounded up to 64 bytes
// (matvec_x16_rows_offset), then one tile's 16 rows in the original layout.
std::size_t matvec_x16_rows_offset(GgmlType type, std::size_t cols, std::size_t n_tokens);
std::size_t matvec_scratch_bytes_x16(GgmlType type, std::size_t cols, std::size_t n_tokens);
// Naive: the whole matrix back to the original layout, then matmul_ref.
void matmul_x16_ref(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                    std::size_t ldx, std::size_t n_tokens, float* y, std::size_t ldy, void* scratch);

// The table for `isa` (kernels/dispatch.h): isa must be supported
// (isa_supported), else throws; the per-ISA tables are defined in
// matvec__<isa>.cpp.
LATTE_DECLARE_KERNEL_TABLES(matvec, MatvecKernels);

}  // namespace latte::kernels
