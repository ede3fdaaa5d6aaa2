// Activation quantization for the int8 paths: x -> int8 blocks with one
// scale per 32 (ActQ8) or per 256 (ActQ8K), and the packed GEMM's half-group
// sums. Scalar code over act_amax / act_round32 (per-ISA intrinsics, in
// matvec_dequantize_impl.h).
#pragma once

#include "kernels/matvec/matvec_gguf_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

// Activation blocks are quantized to qs = round(x * 127 / amax), amax = max
// |x| over the block, scale d = amax / 127. amax 0 (quants 0) when the block
// is all zero or so small that 127 / amax overflows. A NaN or inf in the
// block (a model whose numbers overflow) gives zero quants and a NaN scale,
// so the product is NaN and the session's logits check reports it, instead
// of an int overflow in the sums or finite garbage (the conversion's result
// for NaN differs by ISA).

// x [cols] -> xq [cols/32]; and, where sums16 is not null, sums16 [cols/16]
// the integer sum of each half group's qs (the packed GEMM's offset terms:
// per 32 from two, per 16 for the types with 16-element sub-blocks)
template <class Arch>
void matvec_quantize_act(const float* x, std::size_t cols, ActQ8* xq, std::int32_t* sums16 = nullptr) {
  for (std::size_t b = 0; b < cols / 32; ++b) {
    float amax = act_amax(x + 32 * b, 32);
    const float id = act_inverse_scale(amax);
    int s0 = 0, s1 = 0;
    if (!act_round32(x + 32 * b, id, xq[b].qs, s0, s1)) {
      std::memset(xq[b].qs, 0, 32);
      s0 = s1 = 0;
      amax = __builtin_nanf("");
    }
    xq[b].d = amax / 127.f;
    xq[b].s = xq[b].d * static_cast<float>(s0 + s1);
    if (sums16) {
      sums16[2 * b] = s0;
      sums16[2 * b + 1] = s1;
    }
  }
}

// x [cols] -> xq [cols/256] (one scale per 256, sums per 32 and per 16)
template <class Arch>
void matvec_quantize_act_k(const float* x, std::size_t cols, ActQ8K* xq) {
  for (std::size_t b = 0; b < cols / 256; ++b) {
    const float* xb = x + 256 * b;
    float amax = act_amax(xb, 256);
    const float id = act_inverse_scale(amax);
    bool ok = true;
    for (int g = 0; g < 8; ++g) {
      int s0 = 0, s1 = 0;
      ok = act_round32(xb + 32 * g, id, xq[b].qs + 32 * g, s0, s1) && ok;
      xq[b].sums16[2 * g] = static_cast<std::int16_t>(s0);  // |sum| <= 16 * 127
      xq[b].sums16[2 * g + 1] = static_cast<std::int16_t>(s1);
      // Unsigned: after a NaN or inf (ok false, the block zeroed below) the
      // sums hold INT_MIN-based garbage whose int sum would overflow (UB).
      xq[b].sums[g] = static_cast<int>(static_cast<unsigned>(s0) + static_cast<unsigned>(s1));
    }
    if (!ok) {
      std::memset(xq[b].qs, 0, sizeof xq[b].qs);
      std::memset(xq[b].sums16, 0, sizeof xq[b].sums16);
      std::memset(xq[b].sums, 0, sizeof xq[b].sums);
      amax = __builtin_nanf("");
    }
    xq[b].d = amax / 127.f;
  }
}

// Tokens [t0, t1) of x (ldx apart) quantized into xb, act_bytes each:
// ActQ8K runs where kq, else ActQ8 runs, then, where sums is given, their
// integer sums per 16 at sums + t * cols / 16 (the packed GEMM's).
template <class Arch>
void quantize_tokens(bool kq, const float* x, std::size_t ldx, std::size_t t0, std::size_t t1, std::size_t cols,
                     std::uint8_t* xb, std::size_t act_bytes, std::int32_t* sums) {
  for (std::size_t t = t0; t < t1; ++t) {
    const float* xt = x + t * ldx;
    void* dst = xb + t * act_bytes;
    if (kq) matvec_quantize_act_k<Arch>(xt, cols, static_cast<ActQ8K*>(dst));
    else matvec_quantize_act<Arch>(xt, cols, static_cast<ActQ8*>(dst), sums ? sums + t * (cols / 16) : nullptr);
  }
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
