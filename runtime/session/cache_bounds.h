// What a model's latent cache can hold: the largest magnitude of each
// layer's cached c_KV and k_pe values, derived from the weights that make
// them (session_forward.cpp), and the check of tiles from outside (a saved
// session's) against it. A value past what the model can produce would
// overflow every later step's attention, which then blames the model's
// weights: such a tile is refused where it enters instead.
#pragma once

#include <cstdint>
#include <string>

#include "quant/latent_formats.h"
#include "runtime/mla/latent_cache.h"
#include "runtime/model/model.h"

namespace latte {

// The bounds are exact for the forward pass's arithmetic; this margin takes
// in its rounding (activations quantized per block, f16 and int8 storage,
// int8 keys requantized at each context shift) many times over, while
// still refusing values that could overflow where the model's own cannot.
inline constexpr double kCacheBoundMargin = 4.0;

struct CacheBound {
  // c_KV is RMS-normed times attn_kv_a_norm: |c_KV_i| <= sqrt(d_c) x the
  // largest |attn_kv_a_norm| weight.
  double latent = 0;
  // k_pe is attn_kv_a_mqa's rope rows times the RMS-normed stream times
  // attn_norm (a vector of norm <= sqrt(d) x the largest |attn_norm|
  // weight), rotated in pairs (norm kept) and scaled by the RoPE attn_factor:
  // |k_pe_i| <= |attn_factor| x sqrt(2) x the largest rope row's norm x that.
  double rope = 0;
};

// The bounds of `layer`, times kCacheBoundMargin (infinite where the
// weights' own values overflow them: the model then can produce any value).
CacheBound cache_bound(const Model& model, int layer);

// The first thing in `n_tiles` tiles of one layer (laid out one after
// another, as LatentCache::load_tiles takes them) that the model could not
// have written there: a value, or an int8 scale's values, past `bound`
// (NaN and inf included), or anything but zeros in a row at or past
// `n_tokens` (a session file writes those rows as zeros). "tile T, row R
// (token N): ..."; empty if there is none.
// cache: one of the shape the tiles are for (its layouts: LatentCache::
// stored_layout; an int4 cache's last tile, when not full, is int8).
std::string cache_tiles_problem(const LatentCache& cache, const std::uint8_t* tiles, std::int64_t n_tiles,
                                std::int64_t n_tokens, const CacheBound& bound);

}  // namespace latte
