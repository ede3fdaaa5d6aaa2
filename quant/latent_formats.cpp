// The latent cache's tile layouts and the reference row store, load and checks
// (quant/latent_formats.h): the kernels read the bytes these write.
#include "quant/latent_formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "quant/fp16.h"

namespace latte {

const char* latent_storage_name(LatentStorage s) {
  switch (s) {
    case LatentStorage::f32: return "f32";
    case LatentStorage::f16: return "f16";
    case LatentStorage::int8: return "int8";
    case LatentStorage::int4: return "int4";
  }
  return "?";
}

bool latent_storage_quantized(LatentStorage s) { return s == LatentStorage::int8 || s == LatentStorage::int4; }

std::optional<LatentStorage> parse_latent_storage(std::string_view name) {
  for (LatentStorage s : {LatentStorage::f32, LatentStorage::f16, LatentStorage::int8, LatentStorage::int4})
    if (name == latent_storage_name(s)) return s;
  return std::nullopt;
}

const char* latent_layout_problem(LatentStorage s, int d_c, int d_R, int tokens) {
  if (d_c <= 0 || d_R < 0) return "d_c must be > 0 and d_R >= 0";
  if (tokens <= 0 || tokens % kLatentTileQuantum != 0) return "tile tokens must be a positive multiple of 32";
  if (s != LatentStorage::f32 && s != LatentStorage::f16 && s != LatentStorage::int8 && s != LatentStorage::int4)
    return "unknown latent storage";
  const bool q = latent_storage_quantized(s);
  if (q && (d_c % 4 != 0 || d_R % 4 != 0))
    return s == LatentStorage::int8 ? "int8 latent storage needs d_c and d_R to be multiples of 4"
                                    : "int4 latent storage needs d_c and d_R to be multiples of 4";
  if (q && tokens > kLatentInt8MaxTileTokens)
    return s == LatentStorage::int8 ? "int8 latent tiles hold at most 65536 tokens"
                                    : "int4 latent tiles hold at most 65536 tokens";
  if (q && (d_c > kLatentInt8MaxChannels || d_R > kLatentInt8MaxChannels))
    return s == LatentStorage::int8 ? "int8 latent storage needs d_c and d_R of at most 65536"
                                    : "int4 latent storage needs d_c and d_R of at most 65536";
  return "";
}

LatentTileLayout make_latent_tile_layout(LatentStorage s, int d_c, int d_R, int tokens) {
  const char* why = latent_layout_problem(s, d_c, d_R, tokens);
  if (*why) throw std::invalid_argument(std::string("latent tile layout: ") + why);
  LatentTileLayout L;
  L.storage = s;
  L.d_c = d_c;
  L.d_R = d_R;
  L.tokens = tokens;
  const std::size_t row = static_cast<std::size_t>(d_c + d_R);
  switch (s) {
    case LatentStorage::f32: L.bytes = row * tokens * 4; break;
    case LatentStorage::f16: L.bytes = row * tokens * 2; break;
    case LatentStorage::int8:
      L.scale_offset = row * tokens;
      L.rope_scale_offset = L.scale_offset + 4 * static_cast<std::size_t>(tokens);
      L.bytes = L.rope_scale_offset + 4 * static_cast<std::size_t>(tokens);
      break;
    case LatentStorage::int4:
      L.rope_offset = static_cast<std::size_t>(d_c) * tokens / 2;
      L.rope_scale_offset = L.rope_offset + static_cast<std::size_t>(d_R) * tokens;
      L.channel_scale_offset = L.rope_scale_offset + 4 * static_cast<std::size_t>(tokens);
      L.bytes = L.channel_scale_offset + 2 * static_cast<std::size_t>(d_c);
      break;
  }
  return L;
}

namespace {

// The row quantizers' one body: q = round(x / s), s = max|x| / qmax.
float quantize_sym(const float* x, int n, std::int8_t* q, float qmax) {
  float amax = 0.f;
  bool finite = true;
  for (int i = 0; i < n; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    finite = finite && std::isfinite(x[i]);
  }
  if (!finite) {  // a NaN scale keeps the NaN visible downstream, not -127 * s
    std::fill(q, q + n, std::int8_t{0});
    return std::numeric_limits<float>::quiet_NaN();
  }
  if (!std::isfinite(qmax / amax)) amax = 0.f;  // zero, or so tiny 1 / s overflows: zeros
  const float s = amax / qmax;
  const float inv = amax > 0.f ? qmax / amax : 0.f;
  for (int i = 0; i < n; ++i) {
    float r = std::nearbyint(x[i] * inv);
    r = std::min(qmax, std::max(-qmax, r));
    q[i] = static_cast<std::int8_t>(r);
  }
  return s;
}

// Byte offset of channel c (of d_c + d_R) of token t in an int8 tile's data,
// or of a rope channel (c >= d_c) in an int4 tile's int8 rope part.
std::size_t int8_offset(const LatentTileLayout& L, int c, int t) {
  const std::size_t k = t / 4;
  if (L.storage == LatentStorage::int4) {
    const std::size_t g = (c - L.d_c) / 4;
    return L.rope_offset + (g * (L.tokens / 4) + k) * 16 + (c % 4) * 4 + (t % 4);
  }
  const std::size_t g = c / 4;
  return (g * (L.tokens / 4) + k) * 16 + (c % 4) * 4 + (t % 4);
}

// An int4 tile's latent channel c of token t: its byte, and whether it is
// the high nibble (see the header's layout).
std::size_t int4_offset(const LatentTileLayout& L, int c, int t, bool& hi) {
  const int blk = (t % 32) / 4;
  hi = blk >= 4;
  return ((static_cast<std::size_t>(c / 4) * (L.tokens / 32) + t / 32) * 64) + (blk % 4) * 16 + (c % 4) * 4 + (t % 4);
}

// The stored integer of channel c of token t of a quantized tile.
int get_q(const LatentTileLayout& L, const std::uint8_t* base, int c, int t) {
  if (L.storage == LatentStorage::int4 && c < L.d_c) {
    bool hi;
    const std::uint8_t b = base[int4_offset(L, c, t, hi)];
    return (hi ? b >> 4 : b & 0xF) - 8;
  }
  return static_cast<int>(base[int8_offset(L, c, t)]) - 128;
}

void set_q(const LatentTileLayout& L, std::uint8_t* base, int c, int t, int q) {
  if (L.storage == LatentStorage::int4 && c < L.d_c) {
    bool hi;
    std::uint8_t& b = base[int4_offset(L, c, t, hi)];
    const auto n = static_cast<std::uint8_t>(q + 8);
    b = hi ? static_cast<std::uint8_t>((b & 0x0F) | (n << 4)) : static_cast<std::uint8_t>((b & 0xF0) | n);
    return;
  }
  base[int8_offset(L, c, t)] = static_cast<std::uint8_t>(q + 128);
}

// Quantizes n values (channels c0 ..) into row t at 8 bits (int8 rows, and
// int4's rope part); returns the scale.
float put_row(const LatentTileLayout& L, std::uint8_t* base, int t, const float* x, int n, int c0) {
  // The layout takes any width (kv_lora_rank comes from the model file):
  // rows past the stack buffer quantize into the heap.
  std::int8_t small[4096];
  std::vector<std::int8_t> big;
  std::int8_t* q = small;
  if (n > 4096) {
    big.resize(static_cast<std::size_t>(n));
    q = big.data();
  }
  const float s = latent_quantize_int8(x, n, q);
  for (int i = 0; i < n; ++i) set_q(L, base, c0 + i, t, q[i]);
  return s;
}

float* rope_scales(const LatentTileLayout& L, void* tile) {
  return reinterpret_cast<float*>(static_cast<std::uint8_t*>(tile) + L.rope_scale_offset);
}
const float* rope_scales(const LatentTileLayout& L, const void* tile) {
  return reinterpret_cast<const float*>(static_cast<const std::uint8_t*>(tile) + L.rope_scale_offset);
}
const std::uint16_t* channel_scales(const LatentTileLayout& L, const void* tile) {
  return reinterpret_cast<const std::uint16_t*>(static_cast<const std::uint8_t*>(tile) + L.channel_scale_offset);
}

// The latent part of an int4 tile from rows (n, d_c + d_R): per channel,
// scale = max|x| / 7 rounded to f16, q = round(x / scale) clamped to 7.
void put_int4_latents(const LatentTileLayout& L, std::uint8_t* base, int n, const float* rows) {
  const int C = L.d_c + L.d_R;
  auto* cs = reinterpret_cast<std::uint16_t*>(base + L.channel_scale_offset);
  for (int c = 0; c < L.d_c; ++c) {
    float amax = 0.f;
    bool finite = true;
    for (int t = 0; t < n; ++t) {
      const float x = rows[static_cast<std::size_t>(t) * C + c];
      amax = std::max(amax, std::fabs(x));
      finite = finite && std::isfinite(x);
    }
    // f16's largest finite value bounds the scale: larger latents saturate.
    const std::uint16_t h = finite ? f32_to_fp16(std::min(amax / 7.f, 65504.f)) : f32_to_fp16(NAN);
    cs[c] = h;
    const float s = fp16_to_f32(h);
    const float inv = finite && s > 0.f && std::isfinite(1.f / s) ? 1.f / s : 0.f;
    for (int t = 0; t < L.tokens; ++t) {
      // A channel that is not finite keeps zeros beside its NaN scale.
      float r = t < n && finite ? std::nearbyint(rows[static_cast<std::size_t>(t) * C + c] * inv) : 0.f;
      r = std::min(7.f, std::max(-7.f, r));
      set_q(L, base, c, t, static_cast<int>(r));
    }
  }
}

}  // namespace

float latent_quantize_int8(const float* x, int n, std::int8_t* q) { return quantize_sym(x, n, q, 127.f); }

void latent_store_row(const LatentTileLayout& L, void* tile, int t, const float* c_kv,
                      const float* k_pe) {
  const int C = L.d_c + L.d_R;
  switch (L.storage) {
    case LatentStorage::f32: {
      float* row = static_cast<float*>(tile) + static_cast<std::size_t>(t) * C;
      std::memcpy(row, c_kv, sizeof(float) * L.d_c);
      if (L.d_R > 0) std::memcpy(row + L.d_c, k_pe, sizeof(float) * L.d_R);  // k_pe may be null without a rope part
      break;
    }
    case LatentStorage::f16: {
      auto* row = static_cast<std::uint16_t*>(tile) + static_cast<std::size_t>(t) * C;
      // Finite values past f16's range saturate at +-65504 (as inf they
      // would poison the scores, and latent_tile_problem refuses them).
      const auto h = [](float v) { return f32_to_fp16(std::isfinite(v) ? std::clamp(v, -65504.f, 65504.f) : v); };
      for (int i = 0; i < L.d_c; ++i) row[i] = h(c_kv[i]);
      for (int i = 0; i < L.d_R; ++i) row[L.d_c + i] = h(k_pe[i]);
      break;
    }
    case LatentStorage::int8: {
      auto* base = static_cast<std::uint8_t*>(tile);
      float* scales = reinterpret_cast<float*>(base + L.scale_offset);
      scales[t] = put_row(L, base, t, c_kv, L.d_c, 0);
      rope_scales(L, tile)[t] = L.d_R > 0 ? put_row(L, base, t, k_pe, L.d_R, L.d_c) : 0.f;
      break;
    }
    case LatentStorage::int4:
      throw std::invalid_argument("latent_store_row: int4 tiles are written whole (latent_store_tile)");
  }
}

void latent_store_tile(const LatentTileLayout& L, void* tile, int n, const float* rows) {
  if (n < 0 || n > L.tokens)
    throw std::invalid_argument("latent_store_tile: " + std::to_string(n) + " rows for a tile of " +
                                std::to_string(L.tokens));
  const int C = L.d_c + L.d_R;
  if (L.storage != LatentStorage::int4) {
    const std::vector<float> zeros(n < L.tokens ? static_cast<std::size_t>(C) : 0, 0.f);
    for (int t = 0; t < L.tokens; ++t) {
      const float* r = t < n ? rows + static_cast<std::size_t>(t) * C : zeros.data();
      latent_store_row(L, tile, t, r, r + L.d_c);
    }
    return;
  }
  // int4 allocates nothing (a cache's shift promises not to throw past its
  // checks), but put_row's for rope parts wider than 4096.
  auto* base = static_cast<std::uint8_t*>(tile);
  put_int4_latents(L, base, n, rows);
  for (int t = 0; t < L.tokens; ++t) {
    if (t < n) {
      rope_scales(L, tile)[t] = L.d_R > 0 ? put_row(L, base, t, rows + static_cast<std::size_t>(t) * C + L.d_c, L.d_R, L.d_c) : 0.f;
    } else {  // zeros: q 0 and a zero scale
      for (int c = L.d_c; c < C; ++c) set_q(L, base, c, t, 0);
      rope_scales(L, tile)[t] = 0.f;
    }
  }
}

std::string latent_tile_problem(const LatentTileLayout& L, const void* tile) {
  const int C = L.d_c + L.d_R;
  const auto bad = [](int t, const char* what, float v) {
    return "row " + std::to_string(t) + ": " + what + " is " + std::to_string(v);
  };
  for (int t = 0; t < L.tokens; ++t) {
    switch (L.storage) {
      case LatentStorage::f32: {
        const float* row = static_cast<const float*>(tile) + static_cast<std::size_t>(t) * C;
        for (int i = 0; i < C; ++i)
          if (!std::isfinite(row[i])) return bad(t, "a value", row[i]);
        break;
      }
      case LatentStorage::f16: {
        const auto* row = static_cast<const std::uint16_t*>(tile) + static_cast<std::size_t>(t) * C;
        for (int i = 0; i < C; ++i)
          if ((row[i] & 0x7C00u) == 0x7C00u) return bad(t, "a value", fp16_to_f32(row[i]));
        break;
      }
      case LatentStorage::int8:
      case LatentStorage::int4: {
        const float sl = L.storage == LatentStorage::int8
                             ? reinterpret_cast<const float*>(static_cast<const std::uint8_t*>(tile) + L.scale_offset)[t]
                             : 0.f;
        for (const float s : {sl, rope_scales(L, tile)[t]})
          if (!(std::isfinite(s) && s >= 0.0f)) return bad(t, "a scale", s);
        break;
      }
    }
  }
  if (L.storage == LatentStorage::int4) {
    for (int c = 0; c < L.d_c; ++c) {
      const float s = fp16_to_f32(channel_scales(L, tile)[c]);
      if (!(std::isfinite(s) && s >= 0.0f))
        return "latent channel " + std::to_string(c) + ": its scale is " + std::to_string(s);
    }
  }
  return {};
}

void latent_load_row(const LatentTileLayout& L, const void* tile, int t, float* c_kv,
                     float* k_pe) {
  const int C = L.d_c + L.d_R;
  switch (L.storage) {
    case LatentStorage::f32: {
      const float* row = static_cast<const float*>(tile) + static_cast<std::size_t>(t) * C;
      std::memcpy(c_kv, row, sizeof(float) * L.d_c);
      if (L.d_R > 0) std::memcpy(k_pe, row + L.d_c, sizeof(float) * L.d_R);  // as in latent_store_row
      break;
    }
    case LatentStorage::f16: {
      const auto* row = static_cast<const std::uint16_t*>(tile) + static_cast<std::size_t>(t) * C;
      for (int i = 0; i < L.d_c; ++i) c_kv[i] = fp16_to_f32(row[i]);
      for (int i = 0; i < L.d_R; ++i) k_pe[i] = fp16_to_f32(row[L.d_c + i]);
      break;
    }
    case LatentStorage::int8:
    case LatentStorage::int4: {
      const auto* base = static_cast<const std::uint8_t*>(tile);
      const float sr = rope_scales(L, tile)[t];
      if (L.storage == LatentStorage::int8) {
        const float sl = reinterpret_cast<const float*>(base + L.scale_offset)[t];
        for (int i = 0; i < L.d_c; ++i) c_kv[i] = sl * static_cast<float>(get_q(L, base, i, t));
      } else {
        const std::uint16_t* cs = channel_scales(L, tile);
        for (int i = 0; i < L.d_c; ++i) c_kv[i] = fp16_to_f32(cs[i]) * static_cast<float>(get_q(L, base, i, t));
      }
      for (int i = 0; i < L.d_R; ++i) k_pe[i] = sr * static_cast<float>(get_q(L, base, L.d_c + i, t));
      break;
    }
  }
}

void latent_copy_row(const LatentTileLayout& L, const void* src, int ts, void* dst, int td) {
  const int C = L.d_c + L.d_R;
  switch (L.storage) {
    case LatentStorage::f32:
    case LatentStorage::f16: {
      const std::size_t w = L.storage == LatentStorage::f32 ? 4 : 2;
      std::memmove(static_cast<std::uint8_t*>(dst) + static_cast<std::size_t>(td) * C * w,
                   static_cast<const std::uint8_t*>(src) + static_cast<std::size_t>(ts) * C * w, C * w);
      break;
    }
    case LatentStorage::int4:
      throw std::invalid_argument("latent_copy_row: an int4 row is its tile's (per-channel scales)");
    case LatentStorage::int8: {
      const auto* s8 = static_cast<const std::uint8_t*>(src);
      auto* d8 = static_cast<std::uint8_t*>(dst);
      // One byte (or nibble) per channel, spread over the tile's blocks.
      for (int c = 0; c < C; ++c) set_q(L, d8, c, td, get_q(L, s8, c, ts));
      const float* ss = reinterpret_cast<const float*>(s8 + L.scale_offset);
      float* ds = reinterpret_cast<float*>(d8 + L.scale_offset);
      ds[td] = ss[ts];
      ds[L.tokens + td] = ss[L.tokens + ts];
      break;
    }
  }
}

void latent_load_rope(const LatentTileLayout& L, const void* tile, int t, float* k_pe) {
  const int C = L.d_c + L.d_R;
  switch (L.storage) {
    case LatentStorage::f32:
      std::memcpy(k_pe, static_cast<const float*>(tile) + static_cast<std::size_t>(t) * C + L.d_c, sizeof(float) * L.d_R);
      break;
    case LatentStorage::f16: {
      const auto* row = static_cast<const std::uint16_t*>(tile) + static_cast<std::size_t>(t) * C + L.d_c;
      for (int i = 0; i < L.d_R; ++i) k_pe[i] = fp16_to_f32(row[i]);
      break;
    }
    case LatentStorage::int8:
    case LatentStorage::int4: {
      const auto* base = static_cast<const std::uint8_t*>(tile);
      const float sr = rope_scales(L, tile)[t];
      for (int i = 0; i < L.d_R; ++i) k_pe[i] = sr * static_cast<float>(get_q(L, base, L.d_c + i, t));
      break;
    }
  }
}

void latent_store_rope(const LatentTileLayout& L, void* tile, int t, const float* k_pe) {
  const int C = L.d_c + L.d_R;
  switch (L.storage) {
    case LatentStorage::f32:
      std::memcpy(static_cast<float*>(tile) + static_cast<std::size_t>(t) * C + L.d_c, k_pe, sizeof(float) * L.d_R);
      break;
    case LatentStorage::f16: {
      auto* row = static_cast<std::uint16_t*>(tile) + static_cast<std::size_t>(t) * C + L.d_c;
      for (int i = 0; i < L.d_R; ++i)
        row[i] = f32_to_fp16(std::isfinite(k_pe[i]) ? std::clamp(k_pe[i], -65504.f, 65504.f) : k_pe[i]);
      break;
    }
    case LatentStorage::int8:
    case LatentStorage::int4: {
      auto* base = static_cast<std::uint8_t*>(tile);
      rope_scales(L, tile)[t] = put_row(L, base, t, k_pe, L.d_R, L.d_c);
      break;
    }
  }
}

}  // namespace latte
