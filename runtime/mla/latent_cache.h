// The MLA latent cache: per layer, one row [c_KV ; k_pe] per token, stored in
// tiles of a fixed token count (quant/latent_formats.h) that are allocated
// on first write, up to a fixed maximum context. Where the system allows, a
// layer's tiles lie in one reserved address range (committed page by page as
// tiles are written, huge pages past the first 2 MiB), so attention reads a
// layer as one stream with few TLB misses. The decode kernels
// (kernels/mla_attn) read a layer through view(). An int4 cache keeps each
// layer's tile still filling in int8's layout (one int8 tile a layer): a
// token's own row and its neighbours' are at int8 precision, and a tile is
// quantized to int4 once it is full, whole (its channel scales come from
// all of its rows); a row written again into a full tile, or moved there by
// a shift, quantizes that tile again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "quant/latent_formats.h"
#include "runtime/mla/rope.h"

namespace latte {

// 128 tokens per tile (73 KiB per V2-Lite int8 tile and layer: the
// allocation step): fewer tile boundaries in every value-product stream than
// 64 made decode a little faster, and 256 no faster (docs/performance-log.md, "Figures moved out of runtime comments").
inline constexpr int kLatentCacheTileTokens = 128;
// int4 caches: 512 tokens per tile, each latent channel's scale over them.
// Against 128: the kernels rescale the query and flush the value sums once
// per tile, so the attention runs faster, and the logits lose no more
// (docs/performance-log.md, "Issue 60, third part").
inline constexpr int kLatentCacheInt4TileTokens = 512;
inline int latent_cache_tile_tokens(LatentStorage s) {
  return s == LatentStorage::int4 ? kLatentCacheInt4TileTokens : kLatentCacheTileTokens;
}

// Largest context capacity (tokens) a cache, a session or a model file's
// context_length may state: 2^31 - 1 keeps positions in int32 and every size
// computed from it far from overflow. The tile table is calloc'd for the
// whole capacity (8 bytes per tile per layer: 128 MiB per layer at this
// bound with 128-token tiles), which only reserves it until written.
inline constexpr std::int64_t kMaxContextTokens = 0x7fffffff;

struct LatentCacheConfig {
  int n_layers = 0;
  int d_c = 0;                      // kv_lora_rank
  int d_R = 0;                      // qk_rope_head_dim
  std::int64_t max_tokens = 0;      // context capacity
  LatentStorage storage = LatentStorage::int8;
  int tile_tokens = 0;              // 0: latent_cache_tile_tokens(storage)
};

class LatentCache {
 public:
  // Throws Error(invalid_argument) for an invalid configuration.
  explicit LatentCache(const LatentCacheConfig& cfg);
  ~LatentCache();
  LatentCache(const LatentCache&) = delete;
  LatentCache& operator=(const LatentCache&) = delete;
  LatentCache(LatentCache&& o) noexcept;
  LatentCache& operator=(LatentCache&& o) noexcept;

  // Bytes a cache holding n_tokens (its maximum) takes once full: tiles, tile
  // tables and the object itself. Allocates nothing; equals bytes() of such a
  // cache after n_tokens writes to every layer.
  static std::size_t bytes_for(int n_layers, int d_c, int d_R, std::int64_t n_tokens,
                               LatentStorage storage, int tile_tokens = 0);

  // Bytes held now (allocated tiles, tile tables, this object).
  std::size_t bytes() const;

  const LatentCacheConfig& config() const { return cfg_; }
  const LatentTileLayout& layout() const { return layout_; }
  std::int64_t max_tokens() const { return cfg_.max_tokens; }
  // Tokens stored in `layer` (positions [0, size)).
  std::int64_t size(int layer) const;

  // Writes rows for positions [pos, pos + n) of `layer`: c_kv (n, d_c), k_pe
  // (n, d_R). pos <= size(layer) (no holes; rewriting earlier rows is fine).
  // Throws Error(context_overflow) past max_tokens, Error(invalid_argument)
  // for a bad layer or position; Error(out_of_memory) if a tile cannot be
  // allocated.
  void write(int layer, std::int64_t pos, int n, const float* c_kv, const float* k_pe);

  // Reads one stored row back as f32 (dequantized).
  void read_row(int layer, std::int64_t pos, float* c_kv, float* k_pe) const;

  // A layer's first n tokens as saved and loaded: their tiles one after
  // another, as stored (an int4 cache's filling tile in int8's layout),
  // rows past n written as zeros. stored_bytes(n) long.
  std::size_t stored_bytes(std::int64_t n) const;
  void save_tiles(int layer, std::int64_t n, std::uint8_t* out) const;
  // The layout tile t of a layer's first n tokens is stored in.
  const LatentTileLayout& stored_layout(std::int64_t n, std::int64_t t) const;

  // Forgets tokens at and after n_tokens in every layer; keeps the tiles.
  void truncate(std::int64_t n_tokens);

  // Forgets positions [n_keep, n_keep + n_discard) of every layer: the rows
  // after them move down by n_discard, their c_KV as stored and their k_pe
  // turned by `turn` (f32 and f16 in place; int8 dequantized, turned and
  // requantized with a fresh rope scale; int4: every full tile the rows land
  // in quantized again, with channel scales from its new rows, kept rows of
  // that tile included: they change too, unless the shift moves whole tiles). n_keep, n_discard >= 0 and
  // n_keep + n_discard <= size(layer) for every layer, else
  // Error(invalid_argument) and nothing changes; nothing else throws. The
  // layers are split over `threads` threads.
  void shift(std::int64_t n_keep, std::int64_t n_discard, const RopeTurn& turn, int threads = 1);

  // Raw tiles: tile t (of ceil(size(layer) / tile_tokens)) of a layer, in
  // stored_layout(size(layer), t).
  const void* tile(int layer, std::int64_t t) const;
  // Makes `layer` hold n_tokens rows (n_tokens <= max_tokens, from an empty
  // layer) copied from what save_tiles wrote (stored_bytes(n_tokens)).
  // Error(bad_file) naming the layer, tile and row of a tile
  // latent_tile_problem refuses; Error(out_of_memory).
  void load_tiles(int layer, std::int64_t n_tokens, const std::uint8_t* tiles);

  // One layer as the kernels see it; stays valid for the life of the cache
  // (the tile table never moves). Attend to at most size(layer) tokens.
  LatentLayerView view(int layer) const;

 private:
  struct Layer {
    // (ceil(max_tokens / tile_tokens)) nullptr until written. calloc'd, so
    // its pages are committed as tiles are written: a 2^31-token context
    // does not cost 256 MiB of table per layer up front.
    void** tiles = nullptr;
    std::size_t n_slots = 0;
    std::size_t used_slots = 0;  // slots [0, used_slots) may hold a tile
    std::int64_t n = 0;
    // Address space reserved for all of the layer's tiles, in order (null
    // where it could not be reserved: tiles are then allocated one by one).
    std::uint8_t* region = nullptr;
    std::size_t region_bytes = 0;
    // int4: tile n / tile_tokens, the one filling, in int8's layout.
    void* fill = nullptr;
  };
  void check_layer(int layer) const;
  void free_all();
  // The tile in slot t of layer l, allocated (zeroed) if it is not yet.
  void* tile_for_write(Layer& l, std::size_t t);
  // int4: whether tile t of a layer of n tokens is the filling one.
  bool is_fill(std::int64_t n, std::int64_t t) const { return fills_ && t == n / cfg_.tile_tokens; }
  // Tile t of l as it stands: the fill tile or a tile of the table (in
  // stored_layout(l.n, t)).
  void* stored_tile(const Layer& l, std::int64_t t) const { return is_fill(l.n, t) ? l.fill : l.tiles[t]; }
  // int4: the full fill tile into tile t, quantized whole; rows (tile_tokens,
  // d_c + d_R) scratch.
  void fill_to_tile(Layer& l, std::size_t t, float* rows);
  // A layer cut to n tokens; int4: if that moves the filling tile back, the
  // kept rows of the new one go to the fill tile as int8. row: (d_c + d_R)
  // scratch (int4 only).
  void cut(Layer& l, std::int64_t n, float* row);
  void shift_through_rows(std::int64_t n_keep, std::int64_t n_discard, const RopeTurn& turn, int nt);

  LatentCacheConfig cfg_;
  LatentTileLayout layout_;
  bool fills_ = false;             // int4: a fill tile per layer
  LatentTileLayout fill_layout_;   // int8's layout of this shape
  std::size_t fill_alloc_ = 0;
  std::vector<float> row_;         // int4: (tile_tokens, d_c + d_R) scratch for write and truncate
  std::size_t tile_alloc_ = 0;  // bytes per tile allocation (64-byte multiple)
  std::vector<Layer> layers_;
  std::size_t n_tiles_ = 0;     // allocated tiles, all layers
};

}  // namespace latte
