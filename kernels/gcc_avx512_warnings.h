// Included first by the per-ISA kernel bodies (*_impl.h) and bench_mla_attn's
// peak loops. GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(),
// which -W(maybe-)uninitialized reports falsely; the state must be set before
// the intrinsic headers are read, and it lasts for the rest of the unit.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
