#include "runtime/mla/latent_cache.h"

#include <atomic>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "platform/alloc_hook.h"
#include "platform/memory.h"
#include "platform/thread_pool.h"
#include "runtime/error.h"

namespace latte {

namespace {

std::size_t round64(std::size_t n) { return (n + 63) / 64 * 64; }

std::int64_t tiles_for(std::int64_t tokens, int tile) { return (tokens + tile - 1) / tile; }

}  // namespace

LatentCache::LatentCache(const LatentCacheConfig& config) : cfg_(config) {
  if (cfg_.tile_tokens == 0) cfg_.tile_tokens = latent_cache_tile_tokens(cfg_.storage);
  const LatentCacheConfig& cfg = cfg_;
  if (cfg.n_layers <= 0) throw Error(Status::invalid_argument, "latent cache: n_layers must be > 0");
  if (cfg.max_tokens <= 0) throw Error(Status::invalid_argument, "latent cache: max_tokens must be > 0");
  if (cfg.max_tokens > kMaxContextTokens)
    throw Error(Status::invalid_argument, "latent cache: max_tokens " + std::to_string(cfg.max_tokens) +
                                              " is above the limit of " + std::to_string(kMaxContextTokens));
  const char* why = latent_layout_problem(cfg.storage, cfg.d_c, cfg.d_R, cfg.tile_tokens);
  if (*why) throw Error(Status::invalid_argument, std::string("latent cache: ") + why);
  layout_ = make_latent_tile_layout(cfg.storage, cfg.d_c, cfg.d_R, cfg.tile_tokens);
  tile_alloc_ = round64(layout_.bytes);
  fills_ = cfg.storage == LatentStorage::int4;
  if (fills_) {
    fill_layout_ = make_latent_tile_layout(LatentStorage::int8, cfg.d_c, cfg.d_R, cfg.tile_tokens);
    fill_alloc_ = round64(fill_layout_.bytes);
    row_.resize(static_cast<std::size_t>(cfg.tile_tokens) * (cfg.d_c + cfg.d_R));
  }
  layers_.resize(cfg.n_layers);
  const std::int64_t n_tiles = tiles_for(cfg.max_tokens, cfg.tile_tokens);
  for (auto& l : layers_) {
    l.tiles = alloc_should_fail(static_cast<std::size_t>(n_tiles) * sizeof(void*))
                  ? nullptr
                  : static_cast<void**>(std::calloc(static_cast<std::size_t>(n_tiles), sizeof(void*)));
    if (l.tiles == nullptr) {
      free_all();
      throw Error(Status::out_of_memory, "latent cache: cannot allocate the tile table for " +
                                             std::to_string(cfg.max_tokens) + " tokens");
    }
    l.n_slots = static_cast<std::size_t>(n_tiles);
    // Address space for every tile of the context, committed as tiles are
    // written. The first 2 MiB stay on small pages so a short context costs
    // what it uses; past them huge pages: a 16K-token int8 V2-Lite layer
    // (9 MiB) then needs 5 TLB entries, not 2300. Null: tiles one by one.
    l.region_bytes = static_cast<std::size_t>(n_tiles) * tile_alloc_;
    l.region = map_huge_region(l.region_bytes, kHugePageBytes, /*lazy=*/true);
    if (fills_) {
      l.fill = alloc_should_fail(fill_alloc_) ? nullptr : aligned_alloc_bytes(64, fill_alloc_);
      if (l.fill == nullptr) {
        free_all();
        throw Error(Status::out_of_memory, "latent cache: cannot allocate a layer's filling tile");
      }
      std::memset(l.fill, 0, fill_alloc_);
    }
  }
}

LatentCache::~LatentCache() { free_all(); }

LatentCache::LatentCache(LatentCache&& o) noexcept
    : cfg_(o.cfg_), layout_(o.layout_), fills_(o.fills_), fill_layout_(o.fill_layout_), fill_alloc_(o.fill_alloc_),
      row_(std::move(o.row_)), tile_alloc_(o.tile_alloc_), layers_(std::move(o.layers_)), n_tiles_(o.n_tiles_) {
  o.layers_.clear();
  o.n_tiles_ = 0;
}

LatentCache& LatentCache::operator=(LatentCache&& o) noexcept {
  if (this != &o) {
    free_all();
    cfg_ = o.cfg_;
    layout_ = o.layout_;
    fills_ = o.fills_;
    fill_layout_ = o.fill_layout_;
    fill_alloc_ = o.fill_alloc_;
    row_ = std::move(o.row_);
    tile_alloc_ = o.tile_alloc_;
    layers_ = std::move(o.layers_);
    n_tiles_ = o.n_tiles_;
    o.layers_.clear();
    o.n_tiles_ = 0;
  }
  return *this;
}

void LatentCache::free_all() {
  for (auto& l : layers_) {
    if (l.region) {
      unmap_huge_region(l.region, l.region_bytes);
      l.region = nullptr;
      l.region_bytes = 0;
    } else if (l.tiles) {
      for (std::size_t i = 0; i < l.used_slots; ++i) aligned_free(l.tiles[i]);
    }
    std::free(l.tiles);
    l.tiles = nullptr;
    l.n_slots = l.used_slots = 0;
    aligned_free(l.fill);
    l.fill = nullptr;
  }
  n_tiles_ = 0;
}

std::size_t LatentCache::bytes_for(int n_layers, int d_c, int d_R, std::int64_t n_tokens, LatentStorage storage,
                                   int tile_tokens) {
  if (tile_tokens == 0) tile_tokens = latent_cache_tile_tokens(storage);
  const char* why = latent_layout_problem(storage, d_c, d_R, tile_tokens);
  if (*why) throw Error(Status::invalid_argument, std::string("latent cache: ") + why);
  if (n_layers < 0 || n_tokens < 0) throw Error(Status::invalid_argument, "latent cache: negative size");
  const std::size_t tile = round64(make_latent_tile_layout(storage, d_c, d_R, tile_tokens).bytes);
  const std::size_t nt = static_cast<std::size_t>(tiles_for(n_tokens, tile_tokens));
  // int4: each layer's filling tile, in int8's layout, beside its tiles.
  const std::size_t fill = storage == LatentStorage::int4
                               ? round64(make_latent_tile_layout(LatentStorage::int8, d_c, d_R, tile_tokens).bytes)
                               : 0;
  // int4: a tile of f32 rows, scratch for quantizing a tile whole.
  return sizeof(LatentCache) +
         (storage == LatentStorage::int4 ? 4 * static_cast<std::size_t>(tile_tokens) * (d_c + d_R) : 0) +
         static_cast<std::size_t>(n_layers) * (sizeof(Layer) + fill + nt * (sizeof(void*) + tile));
}

std::size_t LatentCache::bytes() const {
  std::size_t b = sizeof(LatentCache) + row_.size() * sizeof(float) + layers_.size() * (sizeof(Layer) + fill_alloc_) +
                  n_tiles_ * tile_alloc_;
  for (const auto& l : layers_) b += l.n_slots * sizeof(void*);
  return b;
}

void LatentCache::check_layer(int layer) const {
  if (layer < 0 || layer >= static_cast<int>(layers_.size()))
    throw Error(Status::invalid_argument, "latent cache: layer " + std::to_string(layer) + " out of range [0, " +
                                              std::to_string(layers_.size()) + ")");
}

std::int64_t LatentCache::size(int layer) const {
  check_layer(layer);
  return layers_[layer].n;
}

void LatentCache::write(int layer, std::int64_t pos, int n, const float* c_kv, const float* k_pe) {
  check_layer(layer);
  Layer& l = layers_[layer];
  if (n < 0 || pos < 0)
    throw Error(Status::invalid_argument, "latent cache: write of " + std::to_string(n) + " rows at position " +
                                              std::to_string(pos) + ": both must be >= 0");
  if (pos > l.n)
    throw Error(Status::invalid_argument, "latent cache: write at position " + std::to_string(pos) +
                                              " leaves a hole (layer holds " + std::to_string(l.n) + " tokens)");
  if (pos + n > cfg_.max_tokens)
    throw Error(Status::context_overflow, "latent cache: " + std::to_string(pos + n) +
                                              " tokens exceed the context of " + std::to_string(cfg_.max_tokens));
  const int T = cfg_.tile_tokens;
  if (!fills_) {
    for (int i = 0; i < n; ++i) {
      const std::int64_t p = pos + i;
      void* tile = tile_for_write(l, static_cast<std::size_t>(p / T));
      latent_store_row(layout_, tile, static_cast<int>(p % T), c_kv + static_cast<std::size_t>(i) * cfg_.d_c,
                       k_pe + static_cast<std::size_t>(i) * cfg_.d_R);
    }
    if (pos + n > l.n) l.n = pos + n;
    return;
  }
  // int4. What can fail first: every tile the rows reach (the filling one
  // too: it takes the fill tile's rows once full).
  for (std::int64_t t = pos / T; t < tiles_for(pos + n, T); ++t) tile_for_write(l, static_cast<std::size_t>(t));
  std::int64_t size = l.n;
  for (int i = 0; i < n; ++i) {
    const std::int64_t p = pos + i, t = p / T;
    const float* kv = c_kv + static_cast<std::size_t>(i) * cfg_.d_c;
    const float* pe = k_pe + static_cast<std::size_t>(i) * cfg_.d_R;
    if (!is_fill(size, t)) {  // a full tile's row, written again: the tile quantized again
      const int C = cfg_.d_c + cfg_.d_R;
      float* rows = row_.data();
      for (int r = 0; r < T; ++r) {
        float* row = rows + static_cast<std::size_t>(r) * C;
        latent_load_row(layout_, l.tiles[t], r, row, row + cfg_.d_c);
      }
      float* row = rows + static_cast<std::size_t>(p % T) * C;
      std::memcpy(row, kv, sizeof(float) * cfg_.d_c);
      std::memcpy(row + cfg_.d_c, pe, sizeof(float) * cfg_.d_R);
      latent_store_tile(layout_, l.tiles[t], T, rows);
      continue;
    }
    latent_store_row(fill_layout_, l.fill, static_cast<int>(p % T), kv, pe);
    if (p >= size) size = p + 1;
    if (size % T == 0) {  // the tile is full: to int4, and the fill tile starts the next
      fill_to_tile(l, static_cast<std::size_t>(t), row_.data());
      std::memset(l.fill, 0, fill_alloc_);
    }
  }
  l.n = size;
}

void LatentCache::fill_to_tile(Layer& l, std::size_t t, float* rows) {
  const int T = cfg_.tile_tokens, C = cfg_.d_c + cfg_.d_R;
  for (int r = 0; r < T; ++r) {
    float* row = rows + static_cast<std::size_t>(r) * C;
    latent_load_row(fill_layout_, l.fill, r, row, row + cfg_.d_c);
  }
  latent_store_tile(layout_, l.tiles[t], T, rows);
}

void LatentCache::cut(Layer& l, std::int64_t n, float* row) {
  const int T = cfg_.tile_tokens;
  if (fills_ && n / T < l.n / T) {  // the filling tile moves back to a full one
    float *kv = row, *pe = row + cfg_.d_c;
    std::memset(l.fill, 0, fill_alloc_);
    const std::int64_t t = n / T;
    for (int r = 0; r < static_cast<int>(n % T); ++r) {
      latent_load_row(layout_, l.tiles[t], r, kv, pe);
      latent_store_row(fill_layout_, l.fill, r, kv, pe);
    }
  }
  l.n = n;
}

void* LatentCache::tile_for_write(Layer& l, std::size_t t) {
  void*& tile = l.tiles[t];
  if (tile == nullptr) {
    if (l.region) {
      // Fresh pages read as zero; committed first where the OS asks for it.
      if (!commit_region(l.region + t * tile_alloc_, tile_alloc_))
        throw Error(Status::out_of_memory, "latent cache: cannot commit a tile");
      tile = l.region + t * tile_alloc_;
    } else {
      tile = alloc_should_fail(tile_alloc_) ? nullptr : aligned_alloc_bytes(64, tile_alloc_);
      if (tile == nullptr) throw Error(Status::out_of_memory, "latent cache: cannot allocate a tile");
      std::memset(tile, 0, tile_alloc_);
    }
    ++n_tiles_;
    l.used_slots = std::max(l.used_slots, t + 1);
  }
  return tile;
}

const void* LatentCache::tile(int layer, std::int64_t t) const {
  check_layer(layer);
  const Layer& l = layers_[layer];
  if (t < 0 || t >= tiles_for(l.n, cfg_.tile_tokens))
    throw Error(Status::invalid_argument, "latent cache: tile " + std::to_string(t) + " of layer " +
                                              std::to_string(layer) + " holds no tokens");
  return stored_tile(l, t);
}

const LatentTileLayout& LatentCache::stored_layout(std::int64_t n, std::int64_t t) const {
  return is_fill(n, t) ? fill_layout_ : layout_;
}

std::size_t LatentCache::stored_bytes(std::int64_t n) const {
  const int T = cfg_.tile_tokens;
  if (!fills_) return static_cast<std::size_t>(tiles_for(n, T)) * layout_.bytes;
  return static_cast<std::size_t>(n / T) * layout_.bytes + (n % T ? fill_layout_.bytes : 0);
}

void LatentCache::save_tiles(int layer, std::int64_t n, std::uint8_t* out) const {
  check_layer(layer);
  const Layer& l = layers_[layer];
  if (n < 0 || n > l.n)
    throw Error(Status::invalid_argument, "latent cache: save_tiles of " + std::to_string(n) + " tokens of a layer of " +
                                              std::to_string(l.n));
  const int T = cfg_.tile_tokens;
  const std::int64_t n_tiles = tiles_for(n, T);
  std::size_t off = 0;
  for (std::int64_t t = 0; t < n_tiles; ++t) {
    // The tile as it stands (stored_layout(size)), saved in the layout n
    // gives it: they differ where n cuts a full int4 tile.
    const LatentTileLayout& want = stored_layout(n, t);
    const LatentTileLayout& have = stored_layout(l.n, t);
    const void* src = stored_tile(l, t);
    std::uint8_t* dst = out + off;
    if (&want == &have) {
      std::memcpy(dst, src, want.bytes);
    } else {
      std::memset(dst, 0, want.bytes);
      std::vector<float> kv(static_cast<std::size_t>(cfg_.d_c)), pe(static_cast<std::size_t>(cfg_.d_R));
      for (int r = 0; r < static_cast<int>(n - t * T); ++r) {
        latent_load_row(have, src, r, kv.data(), pe.data());
        latent_store_row(want, dst, r, kv.data(), pe.data());
      }
    }
    off += want.bytes;
  }
  if (n_tiles == 0) return;
  // Rows past n as zeros: a truncation or a refused call may have left
  // anything there (stale tokens, NaN), which a saved session must not carry.
  const std::int64_t last = n_tiles - 1;
  const LatentTileLayout& ll = stored_layout(n, last);
  const std::vector<float> zeros(static_cast<std::size_t>(cfg_.d_c + cfg_.d_R), 0.f);
  std::uint8_t* dst = out + off - ll.bytes;
  for (int r = static_cast<int>(n - last * T); r < T; ++r)
    latent_store_row(ll, dst, r, zeros.data(), zeros.data() + cfg_.d_c);
}

void LatentCache::load_tiles(int layer, std::int64_t n_tokens, const std::uint8_t* tiles) {
  check_layer(layer);
  Layer& l = layers_[layer];
  if (l.n != 0) throw Error(Status::invalid_argument, "latent cache: load_tiles into a layer that holds tokens");
  if (n_tokens < 0) throw Error(Status::invalid_argument, "latent cache: load_tiles of " + std::to_string(n_tokens) + " tokens");
  if (n_tokens > cfg_.max_tokens)
    throw Error(Status::context_overflow, "latent cache: " + std::to_string(n_tokens) + " tokens exceed the context of " +
                                              std::to_string(cfg_.max_tokens));
  const std::int64_t n_tiles = tiles_for(n_tokens, cfg_.tile_tokens);
  for (std::int64_t t = 0; t < n_tiles; ++t) {
    const std::uint8_t* src = tiles + static_cast<std::size_t>(t) * layout_.bytes;  // only the last may differ
    if (const std::string why = latent_tile_problem(stored_layout(n_tokens, t), src); !why.empty())
      throw Error(Status::bad_file, "latent cache: layer " + std::to_string(layer) + ", tile " + std::to_string(t) +
                                        ", " + why);
  }
  for (std::int64_t t = 0; t < n_tiles; ++t) tile_for_write(l, static_cast<std::size_t>(t));
  for (std::int64_t t = 0; t < n_tiles; ++t) {
    const std::uint8_t* src = tiles + static_cast<std::size_t>(t) * layout_.bytes;
    if (is_fill(n_tokens, t))
      std::memcpy(l.fill, src, fill_layout_.bytes);
    else
      std::memcpy(l.tiles[t], src, layout_.bytes);
  }
  l.n = n_tokens;
}

void LatentCache::read_row(int layer, std::int64_t pos, float* c_kv, float* k_pe) const {
  check_layer(layer);
  const Layer& l = layers_[layer];
  if (pos < 0 || pos >= l.n)
    throw Error(Status::invalid_argument, "latent cache: position " + std::to_string(pos) + " not stored");
  const std::int64_t t = pos / cfg_.tile_tokens;
  latent_load_row(stored_layout(l.n, t), stored_tile(l, t), static_cast<int>(pos % cfg_.tile_tokens),
                  c_kv, k_pe);
}

void LatentCache::truncate(std::int64_t n_tokens) {
  if (n_tokens < 0) throw Error(Status::invalid_argument, "latent cache: negative length");
  for (auto& l : layers_)
    if (l.n > n_tokens) cut(l, n_tokens, row_.data());
}

void LatentCache::shift(std::int64_t n_keep, std::int64_t n_discard, const RopeTurn& turn, int threads) {
  if (n_keep < 0 || n_discard < 0)
    throw Error(Status::invalid_argument, "latent cache: shift keeping " + std::to_string(n_keep) + " and dropping " +
                                              std::to_string(n_discard) + " tokens: both must be >= 0");
  if (turn.dim != cfg_.d_R || static_cast<int>(turn.cos.size()) != cfg_.d_R / 2)
    throw Error(Status::invalid_argument, "latent cache: shift with a RoPE turn of " + std::to_string(turn.dim) +
                                              " dimensions; the cache's k_pe has " + std::to_string(cfg_.d_R));
  for (std::size_t il = 0; il < layers_.size(); ++il)
    if (n_keep > layers_[il].n - n_discard)
      throw Error(Status::invalid_argument, "latent cache: shift keeping " + std::to_string(n_keep) + " and dropping " +
                                                std::to_string(n_discard) + " tokens, past the " +
                                                std::to_string(layers_[il].n) + " of layer " + std::to_string(il));
  if (n_discard == 0) return;
  const int T = cfg_.tile_tokens;
  const int n_layers = static_cast<int>(layers_.size());
  const int nt = std::max(1, std::min(threads, n_layers));
  if (fills_) return shift_through_rows(n_keep, n_discard, turn, nt);
  // One k_pe row per thread, allocated before anything changes.
  std::vector<float> rows(static_cast<std::size_t>(nt) * cfg_.d_R);
  // Rows go down in increasing order, so each is read before it is written
  // over. The layers are independent: taken one at a time by the slots.
  std::atomic<int> next{0};
  parallel_slots(nt, [&](int slot, int) {
    for (int il = next.fetch_add(1); il < n_layers; il = next.fetch_add(1)) {
      Layer& l = layers_[il];
      float* k_pe = rows.data() + static_cast<std::size_t>(slot) * cfg_.d_R;
      for (std::int64_t p = n_keep + n_discard; p < l.n; ++p) {
        const std::int64_t q = p - n_discard;
        const void* src = l.tiles[p / T];
        void* dst = l.tiles[q / T];
        const int ts = static_cast<int>(p % T), td = static_cast<int>(q % T);
        latent_copy_row(layout_, src, ts, dst, td);
        latent_load_rope(layout_, dst, td, k_pe);
        rope_turn_apply(turn, k_pe);
        latent_store_rope(layout_, dst, td, k_pe);
      }
      l.n -= n_discard;
    }
  });
}

// int4: the rows move as f32, one destination tile at a time in increasing
// order (its rows' sources lie at or after it, in tiles not yet written),
// k_pe turned: a full destination tile is quantized whole again (its channel
// scales from its new rows), the last one, when not full, is the new filling
// tile at int8.
void LatentCache::shift_through_rows(std::int64_t n_keep, std::int64_t n_discard, const RopeTurn& turn, int nt) {
  const int T = cfg_.tile_tokens, C = cfg_.d_c + cfg_.d_R;
  const int n_layers = static_cast<int>(layers_.size());
  // A tile of rows per thread, allocated before anything changes.
  std::vector<float> rows(static_cast<std::size_t>(nt) * T * C);
  std::atomic<int> next{0};
  parallel_slots(nt, [&](int slot, int) {
    float* buf = rows.data() + static_cast<std::size_t>(slot) * T * C;
    for (int il = next.fetch_add(1); il < n_layers; il = next.fetch_add(1)) {
      Layer& l = layers_[il];
      const std::int64_t n_old = l.n, n_new = l.n - n_discard;
      for (std::int64_t td = n_keep / T; td * T < n_new; ++td) {
        const int m = static_cast<int>(std::min<std::int64_t>(T, n_new - td * T));
        for (int j = 0; j < m; ++j) {
          const std::int64_t q = td * T + j, p = q < n_keep ? q : q + n_discard, t = p / T;
          float* r = buf + static_cast<std::size_t>(j) * C;
          latent_load_row(stored_layout(n_old, t), stored_tile(l, t), static_cast<int>(p % T), r, r + cfg_.d_c);
          if (q >= n_keep) rope_turn_apply(turn, r + cfg_.d_c);
        }
        if (m == T) {
          latent_store_tile(layout_, l.tiles[td], T, buf);
        } else {  // the new filling tile (the old one's rows were read above)
          std::memset(l.fill, 0, fill_alloc_);
          for (int j = 0; j < m; ++j) {
            const float* r = buf + static_cast<std::size_t>(j) * C;
            latent_store_row(fill_layout_, l.fill, j, r, r + cfg_.d_c);
          }
        }
      }
      // A whole number of tiles left: the filling tile starts empty.
      if (n_new % T == 0) std::memset(l.fill, 0, fill_alloc_);
      l.n = n_new;
    }
  });
}

LatentLayerView LatentCache::view(int layer) const {
  check_layer(layer);
  const Layer& l = layers_[layer];
  LatentLayerView v{layout_, const_cast<const void* const*>(l.tiles)};
  if (fills_) {
    v.int8_tile = l.n / cfg_.tile_tokens;
    v.int8_data = l.fill;
    v.int8_scale_offset = fill_layout_.scale_offset;
  }
  return v;
}

}  // namespace latte
