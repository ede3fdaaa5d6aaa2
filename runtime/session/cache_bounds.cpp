#include "runtime/session/cache_bounds.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

#include "kernels/matvec/matvec.h"
#include "quant/fp16.h"
#include "quant/ggml_blocks.h"
#include "quant/x16_layout.h"

namespace latte {

namespace {

double largest_abs(const float* w, int n) {
  double m = 0;
  for (int i = 0; i < n; ++i) m = std::max(m, static_cast<double>(std::fabs(w[i])));
  return m;
}

// sqrt(x), with NaN (a NaN weight) as infinity: a bound then allows anything.
double root(double x) { return std::isnan(x) ? HUGE_VAL : std::sqrt(x); }

// The Euclidean norm of row r of w, dequantized as the kernels read it
// (rows of an x16 matrix are taken back to the original layout first).
double row_norm(const WeightRef& w, std::int64_t r, std::vector<std::uint8_t>& tile, std::vector<float>& row) {
  const std::size_t cols = static_cast<std::size_t>(w.cols);
  row.resize(cols);
  const std::uint8_t* src = w.data + static_cast<std::size_t>(r) * w.row_bytes;
  if (w.x16) {
    tile.resize(16 * w.row_bytes);
    x16_deinterleave(w.type, w.data + static_cast<std::size_t>(r / 16) * 16 * w.row_bytes, 0,
                                     cols / ggml_block_elems(w.type), tile.data(), w.row_bytes);
    src = tile.data() + static_cast<std::size_t>(r % 16) * w.row_bytes;
  }
  dequantize_row_ref(w.type, src, row.data(), cols);
  double ss = 0;
  for (float v : row) ss += static_cast<double>(v) * v;
  return root(ss);
}

std::string number(double v) {
  std::ostringstream s;
  s.precision(6);
  s << v;
  return s.str();
}

}  // namespace

CacheBound cache_bound(const Model& model, int layer) {
  const MlaConfig& m = model.params().mla;
  const LayerWeights& L = model.layer(layer);
  const int dc = m.kv_lora_rank, dr = m.d_rope;
  CacheBound b;
  b.latent = root(static_cast<double>(dc)) * largest_abs(L.kv_a_norm, dc) * kCacheBoundMargin;
  if (dr > 0) {
    std::vector<std::uint8_t> tile;
    std::vector<float> row;
    double widest = 0;
    for (int r = dc; r < dc + dr; ++r) {
      const double n = row_norm(L.wkv_a, r, tile, row);
      widest = std::isnan(n) ? HUGE_VAL : std::max(widest, n);
    }
    const double stream = root(static_cast<double>(m.d_model)) * largest_abs(L.attn_norm, m.d_model);
    b.rope = std::fabs(m.rope.attn_factor) * std::sqrt(2.0) * widest * stream * kCacheBoundMargin;
  }
  // A NaN (an inf times a zero) allows anything, as an inf does.
  if (std::isnan(b.latent)) b.latent = HUGE_VAL;
  if (std::isnan(b.rope)) b.rope = HUGE_VAL;
  return b;
}

std::string cache_tiles_problem(const LatentCache& cache, const std::uint8_t* tiles, std::int64_t n_tiles,
                                std::int64_t n_tokens, const CacheBound& bound) {
  const int T = cache.layout().tokens, dc = cache.layout().d_c, dr = cache.layout().d_R;
  std::vector<float> kv(static_cast<std::size_t>(dc)), pe(static_cast<std::size_t>(dr));
  for (std::int64_t t = 0; t < n_tiles; ++t) {
    // Every tile but the last is in the cache's layout, so at t times its size.
    const LatentTileLayout& layout = cache.stored_layout(n_tokens, t);
    const std::uint8_t* tile = tiles + static_cast<std::size_t>(t) * cache.layout().bytes;
    const float* lat_scales = reinterpret_cast<const float*>(tile + layout.scale_offset);  // int8
    const float* rope_scales = reinterpret_cast<const float*>(tile + layout.rope_scale_offset);
    if (layout.storage == LatentStorage::int4) {
      // A channel scale s stands for values up to 7 s (nibbles 1..15) and,
      // from no writer, 8 s (nibble 0): bounded by the scale alone, which f16
      // rounds up by at most 2^-11 of itself.
      const auto* cs = reinterpret_cast<const std::uint16_t*>(tile + layout.channel_scale_offset);
      for (int c = 0; c < dc; ++c) {
        const float s = fp16_to_f32(cs[c]);
        if (!(s >= 0.f && 7.0 * s <= bound.latent * (1.0 + 1.0 / 2048)))
          return "tile " + std::to_string(t) + ", latent channel " + std::to_string(c) + ": its scale is " + number(s) +
                 "; this model's layer gives at most " + number(bound.latent / 7.0) + " there";
      }
    }
    for (int r = 0; r < T; ++r) {
      const std::int64_t token = t * T + r;
      const auto where = [&] {
        return "tile " + std::to_string(t) + ", row " + std::to_string(r) + " (token " + std::to_string(token) + "): ";
      };
      if (token >= n_tokens) {
        // Written as zeros: every value, and (int8) both scales.
        latent_load_row(layout, tile, r, kv.data(), pe.data());
        const bool zero = std::all_of(kv.begin(), kv.end(), [](float v) { return v == 0.f; }) &&
                          std::all_of(pe.begin(), pe.end(), [](float v) { return v == 0.f; }) &&
                          (!latent_storage_quantized(layout.storage) ||
                           ((layout.storage == LatentStorage::int4 || lat_scales[r] == 0.f) && rope_scales[r] == 0.f));
        if (!zero)
          return where() + "past the " + std::to_string(n_tokens) + " tokens, a row the format writes as zeros holds " +
                 "other bytes";
        continue;
      }
      if (latent_storage_quantized(layout.storage)) {
        // A scale s stands for values up to 127 s (stored bytes 1..255)
        // and, from no writer, 128 s (byte 0): bounded by the scale alone.
        // int4's latent scales are its channels' (above).
        const struct {
          const char* name;
          float s;
          double most;
        } parts[] = {{"latent scale", layout.storage == LatentStorage::int8 ? lat_scales[r] : 0.f, bound.latent},
                     {"rope scale", rope_scales[r], bound.rope}};
        for (const auto& part : parts)
          if (!(part.s >= 0.f && 127.0 * part.s <= part.most))
            return where() + "its " + part.name + " is " + number(part.s) + "; this model's layer gives at most " +
                   number(part.most / 127.0) + " there";
        continue;
      }
      latent_load_row(layout, tile, r, kv.data(), pe.data());
      for (int i = 0; i < dc; ++i)
        if (!(std::fabs(kv[i]) <= bound.latent))
          return where() + "latent value " + std::to_string(i) + " is " + number(kv[i]) +
                 "; this model's layer gives at most " + number(bound.latent) + " in magnitude there";
      for (int i = 0; i < dr; ++i)
        if (!(std::fabs(pe[i]) <= bound.rope))
          return where() + "rope value " + std::to_string(i) + " is " + number(pe[i]) +
                 "; this model's layer gives at most " + number(bound.rope) + " in magnitude there";
    }
  }
  return {};
}

}  // namespace latte
