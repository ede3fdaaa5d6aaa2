// The int8 operation layer: every int8 operation the kernel bodies use
// (matvec's quantized rows, x16 tiles, packed GEMM, dequantize and
// activation quantization; mla_attn's int8 cache), one definition per
// operation per ISA, named by what it does:
//   dot4        acc + per int32 lane the sum of its 4 byte products
//               (u8 x s8 on x86, s8 x s8 on NEON), 256- and 512-bit on x86
//   hsum_i32, hsum, hmax_f32           horizontal int32 sum, f32 sum, f32 max
//   ld16/ld32/ld64, st32, st_i32, bcast4, zero_i32   loads, stores, splats
//   splat8, or8, sub8, xor8            byte lane arithmetic (I8x32)
//   nib16, lo_nib, hi_nib              nibble unpack
//   shl_and, shr_and                   bit fields of bytes
//   lookup16, tbl16_lanes              byte table lookup, in-lane byte shuffle
//   mul8_halves, transpose8_words      byte scaling, 32-bit word transpose
//   fma_dot_u/_s, fma_dot2_s, fma_i32  dot products into f32 accumulators
//   store32, cvt_i32_f32, h2f          widen to f32 (fp16 scalars, int32, int8)
// Files: int8_ops_x86_impl.h (AVX2, with AVX-512 VL/BW/VNNI forms where the
// TU's flags have them, and the 512-bit forms the zmm kernels use) and
// int8_ops_neon_impl.h (NEON, with and without sdot).
//
// From xsimd: nothing integer. The float side of the kernels (the F batches
// mla_attn converts to, exp2_i8's polynomial) is xsimd::batch<float, Arch>.
// Not from xsimd, and why:
//  - no xsimd spelling: vpdpbusd (VNNI), vpmaddubsw + vpmaddwd (the AVX2 dot
//    product, whose int16 pair sums saturate: callers keep them < 2^15),
//    sdot, pshufb / tbl byte lookups, vpsignb, fp16 scalars;
//  - weak symbols (cmake/check_isa_objects.cmake): the avx512 object runs
//    256-bit int8 code too, and an xsimd batch<int8_t, avx2> there would be
//    the same out-of-line instance as the avx2 object's; xsimd's integer
//    batches on NEON left weak symbols in the neon/asimd objects;
//  - bit-identical logits: hsum's summation order is the kernels' own
//    (xsimd's reduce_add is free to sum in another).
// Everything here is in an anonymous namespace inside the ISA's namespace:
// each per-ISA object keeps its own copy.
//
// sdot on aarch64: the neon and asimd ISAs compile the same NEON bodies with
// the same ARMv8.0 flags (CMakeLists.txt). neon's files have the instruction
// (LATTE_NEON_SDOT; ARMv8.2 cores with dot products), asimd's the same sums
// from widening multiplies and pairwise adds (Cortex-A53, A72).
//
// What only one family needs stays there, written over this layer: the GGUF
// formats' decoders (kernels/matvec/matvec_gguf_{x86,neon}_impl.h) and
// mla_attn's cache layout, value-pass packing and offset policy (I8<Arch>).
#pragma once

#include "kernels/isa_body_impl.h"

#include <cstdint>
#include <cstring>

#if defined(__AVX2__)
#include "kernels/int8/int8_ops_x86_impl.h"
#elif defined(__aarch64__)
#include "kernels/int8/int8_ops_neon_impl.h"
#endif
