// Row formats of the MLA latent cache: one row per token per layer holds
// [c_KV (d_c) ; k_pe (d_R)], grouped into tiles of a fixed token count.
//
//   f32, f16: a tile is (tokens, d_c + d_R) row-major; no per-token overhead.
//   int8:     a tile is data then scales:
//             data   (G, tokens/4, 4, 4) bytes, G = (d_c + d_R) / 4 channel
//                    groups; block (g, k) holds channels 4g..4g+3 (outer) of
//                    tokens 4k..4k+3 (inner), each stored as u8 = q + 128 with
//                    q = round(x / scale) in [-127, 127]. Four tokens of one
//                    channel are one 32-bit word (what vpdpbusd/sdot sum over
//                    for the value product); a 4x4 byte transpose gives four
//                    channels of one token (the score product).
//             lat_scale  f32 (tokens): max|c_KV| / 127 per token
//             rope_scale f32 (tokens): max|k_pe| / 127 per token
//             584 bytes per token for d_c 512, d_R 64.
//   int4:     the latent part at 4 bits with one scale per channel over the
//             tile (KIVI's per-channel keys: latents vary far more between
//             channels than between tokens), the rope part as int8's:
//             latent data (d_c/4, tokens/32, 64) bytes: unit (g, u) packs
//                    the 8 int8-layout blocks of channels 4g..4g+3, tokens
//                    32u..32u+31 as nibbles q + 8 (q in [-7, 7]): byte i
//                    holds byte i of blocks 0-3 (as int8 lays them out) in
//                    its low nibble and byte i of blocks 4-7 in its high
//                    one, so one mask or shift turns 16*L bytes into int8's
//                    layout of 4L consecutive tokens.
//             rope data  at rope_offset: int8's layout over the d_R/4 groups
//             rope_scale f32 (tokens) at rope_scale_offset
//             channel_scale f16 (d_c) at channel_scale_offset: the latent
//                    channel's max|c_KV| over the tile's rows / 7, rounded
//                    to f16; q = round(x / that f16 value), clamped to 7
//             A tile is quantized whole (latent_store_tile): its channel
//             scales depend on every row. 326 bytes per token for d_c 512,
//             d_R 64, 512-token tiles (the cache's, latent_cache.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <optional>
#include <string_view>

namespace latte {

enum class LatentStorage : std::uint8_t { f32 = 0, f16 = 1, int8 = 2, int4 = 3 };

const char* latent_storage_name(LatentStorage s);
// int8 and int4: quantized, with scales per token (int8) or per channel and
// tile (int4's latent part).
bool latent_storage_quantized(LatentStorage s);
std::optional<LatentStorage> parse_latent_storage(std::string_view name);

// Plain data (no inline code: per-ISA kernels read it).
struct LatentTileLayout {
  LatentStorage storage = LatentStorage::f32;
  int d_c = 0;
  int d_R = 0;
  int tokens = 0;                  // rows per tile
  std::size_t scale_offset = 0;    // int8: byte offset of lat_scale (f32, tokens)
  std::size_t rope_scale_offset = 0;  // int8, int4: byte offset of rope_scale (f32, tokens)
  std::size_t rope_offset = 0;     // int4: byte offset of the rope part's data
  std::size_t channel_scale_offset = 0;  // int4: byte offset of the latent channel scales (f16, d_c)
  std::size_t bytes = 0;           // whole tile
};

// Token count per tile must be a multiple of this (the kernels' step).
inline constexpr int kLatentTileQuantum = 32;
// int8 (and int4) tiles hold at most this many tokens: the attention kernels sum a
// tile's quantized weights (<= 127) times cache bytes (<= 255) in int32 per
// channel, which 65536 tokens keep below 2^31 (66K-token tiles wrapped).
inline constexpr int kLatentInt8MaxTileTokens = 65536;
// int8 rows hold at most this many latent (d_c) and rope (d_R) channels each:
// a score sums cache bytes (<= 255) times query bytes (<= 127) over a part
// in int32, as above (d_c 70000 wrapped).
inline constexpr int kLatentInt8MaxChannels = 65536;

// Empty string if (storage, d_c, d_R, tokens) is a valid layout, else why not.
const char* latent_layout_problem(LatentStorage s, int d_c, int d_R, int tokens);

// Throws std::invalid_argument if the layout is invalid.
LatentTileLayout make_latent_tile_layout(LatentStorage s, int d_c, int d_R, int tokens);

// Writes row t (0 <= t < tokens) of a tile from f32 values (the reference
// quantizer: round to nearest even, per-row scales; f16 saturates finite
// values at +-65504). Not int4 (std::invalid_argument): its rows share the
// tile's channel scales, so an int4 tile is written whole.
void latent_store_row(const LatentTileLayout& L, void* tile, int t, const float* c_kv,
                      const float* k_pe);

// Writes a whole tile: rows [0, n) from `rows` (n, d_c + d_R), each
// [c_KV ; k_pe], rows [n, tokens) as zeros. int4: each latent channel's
// scale from its n values (a channel holding a NaN or inf gets a NaN scale
// and zeros, as int8's rows do); the others row by row as latent_store_row.
void latent_store_tile(const LatentTileLayout& L, void* tile, int n, const float* rows);

// Empty string if every row of a tile (all L.tokens of them, written or not)
// holds what latent_store_row writes for finite rows: finite values (f32,
// f16: it saturates at +-65504), finite scales >= 0 (int8, int4's rope
// scales and channel scales); else the first offending row (or channel) and
// value. (Sessions refuse non-finite rows before storing.) For tiles that
// come from outside (a saved session), since the kernels read every row of a
// tile they touch.
std::string latent_tile_problem(const LatentTileLayout& L, const void* tile);

// Reads row t back as f32 (dequantized).
void latent_load_row(const LatentTileLayout& L, const void* tile, int t, float* c_kv,
                     float* k_pe);

// Copies row ts of tile src to row td of tile dst as stored (int8 bytes and
// both scales unchanged). src and dst may be the same tile; ts != td there.
// Not int4 (std::invalid_argument): a row means its tile's channel scales.
void latent_copy_row(const LatentTileLayout& L, const void* src, int ts, void* dst, int td);

// The k_pe part of row t alone: read back as f32 (d_R), and stored over the
// row's k_pe as latent_store_row stores it (int8, int4: a fresh rope scale
// from these values; the latent part and its scales stay).
void latent_load_rope(const LatentTileLayout& L, const void* tile, int t, float* k_pe);
void latent_store_rope(const LatentTileLayout& L, void* tile, int t, const float* k_pe);

// One layer of a cache as the kernels see it: tile pointers in token order;
// tiles[i] holds tokens [i*tokens, (i+1)*tokens). An int4 cache keeps the
// tile still filling in int8's layout: tile int8_tile is then int8_data
// (int8's layout of the same shape; tiles[int8_tile] is not read), -1: none.
struct LatentLayerView {
  LatentTileLayout layout;
  const void* const* tiles = nullptr;
  std::int64_t int8_tile = -1;
  const void* int8_data = nullptr;
  std::size_t int8_scale_offset = 0;  // int8's scale_offset for this shape
};

// The int8 row quantizer alone: q (n) = round(x / s), s = max|x| / 127
// (s = 0 for an all-zero row; NaN, with q all 0, for a row holding a NaN or
// inf). Returns s.
float latent_quantize_int8(const float* x, int n, std::int8_t* q);

}  // namespace latte
