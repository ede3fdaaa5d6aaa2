// The scalar GGML block references of quant/ggml_blocks.h: dequantize (the
// ground truth every kernel is tested against) and quantize. Naive on purpose.
#include "quant/ggml_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "quant/fp16.h"

namespace latte {

void q3_k_scales(const std::uint8_t* scales12, std::int8_t out[16]) {
  for (int k = 0; k < 16; ++k) {
    const int lo = k < 8 ? (scales12[k] & 15) : (scales12[k - 8] >> 4);
    const int hi = (scales12[8 + k % 4] >> (2 * (k / 4))) & 3;
    out[k] = static_cast<std::int8_t>((lo | (hi << 4)) - 32);
  }
}

void get_scale_min_k4(int j, const std::uint8_t* q, std::uint8_t* sc, std::uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<std::uint8_t>((q[j + 4] & 15) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void pack_scale_min_k4(const std::uint8_t sc[8], const std::uint8_t m[8], std::uint8_t out[12]) {
  for (int j = 0; j < 4; ++j) {
    // Low sub-blocks: 6 bits in place; the top 2 bits of each byte carry the
    // high bits of sub-block j+4.
    out[j] = static_cast<std::uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<std::uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<std::uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

std::size_t ggml_block_elems(GgmlType type) {
  auto info = ggml_type_info(static_cast<std::uint32_t>(type));
  if (!info) throw std::invalid_argument("ggml type id " + std::to_string(static_cast<unsigned>(type)) + " is not supported");
  return info->block_elems;
}

std::size_t ggml_row_bytes(GgmlType type, std::size_t n) {
  auto info = ggml_type_info(static_cast<std::uint32_t>(type));
  if (!info) throw std::invalid_argument("ggml type id " + std::to_string(static_cast<unsigned>(type)) + " is not supported");
  if (n % info->block_elems != 0)
    throw std::invalid_argument(std::string("row of ") + std::to_string(n) + " elements is not a multiple of the " +
                                info->name + " block size " + std::to_string(info->block_elems));
  return n / info->block_elems * info->block_bytes;
}

namespace {

float h(std::uint16_t v) { return fp16_to_f32(v); }

std::uint32_t load_u32le(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
void store_u32le(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// ---------------------------------------------------------------- dequantize
void deq_q4_0(const BlockQ4_0* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, y += 32) {
    const float d = h(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((b[i].qs[j] & 15) - 8) * d;
      y[j + 16] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}
void deq_q4_1(const BlockQ4_1* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, y += 32) {
    const float d = h(b[i].d), m = h(b[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(b[i].qs[j] & 15) * d + m;
      y[j + 16] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}
void deq_q5_0(const BlockQ5_0* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, y += 32) {
    const float d = h(b[i].d);
    const std::uint32_t qh = load_u32le(b[i].qh);
    for (int j = 0; j < 16; ++j) {
      const int lo = (b[i].qs[j] & 15) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (b[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      y[j] = static_cast<float>(lo - 16) * d;
      y[j + 16] = static_cast<float>(hi - 16) * d;
    }
  }
}
void deq_q5_1(const BlockQ5_1* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, y += 32) {
    const float d = h(b[i].d), m = h(b[i].m);
    const std::uint32_t qh = load_u32le(b[i].qh);
    for (int j = 0; j < 16; ++j) {
      const int lo = (b[i].qs[j] & 15) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (b[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      y[j] = static_cast<float>(lo) * d + m;
      y[j + 16] = static_cast<float>(hi) * d + m;
    }
  }
}
void deq_q8_0(const BlockQ8_0* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, y += 32) {
    const float d = h(b[i].d);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}
void deq_q2_k(const BlockQ2_K* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = h(b[i].d), dmin = h(b[i].dmin);
    for (int half = 0; half < 2; ++half) {
      const std::uint8_t* q = b[i].qs + 32 * half;
      for (int j = 0; j < 4; ++j) {
        for (int l = 0; l < 32; ++l) {
          const std::uint8_t sc = b[i].scales[8 * half + 2 * j + l / 16];
          *y++ = d * static_cast<float>(sc & 15) * static_cast<float>((q[l] >> (2 * j)) & 3) -
                 dmin * static_cast<float>(sc >> 4);
        }
      }
    }
  }
}
void deq_q3_k(const BlockQ3_K* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = h(b[i].d);
    std::int8_t sc[16];
    q3_k_scales(b[i].scales, sc);
    for (int half = 0; half < 2; ++half) {
      const std::uint8_t* q = b[i].qs + 32 * half;
      for (int j = 0; j < 4; ++j) {
        for (int l = 0; l < 32; ++l) {
          const int hi = (b[i].hmask[l] >> (4 * half + j)) & 1;
          const int v = (((q[l] >> (2 * j)) & 3) | (hi << 2)) - 4;
          *y++ = d * static_cast<float>(sc[8 * half + 2 * j + l / 16]) * static_cast<float>(v);
        }
      }
    }
  }
}
void deq_iq4_nl(const BlockIQ4_NL* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, y += 32) {
    const float d = h(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kIq4nlValues[b[i].qs[j] & 15]);
      y[j + 16] = d * static_cast<float>(kIq4nlValues[b[i].qs[j] >> 4]);
    }
  }
}
int iq4_xs_scale(const BlockIQ4_XS& b, int sub) {
  return (((b.scales_l[sub / 2] >> (4 * (sub % 2))) & 15) | (((b.scales_h >> (2 * sub)) & 3) << 4)) - 32;
}
void deq_iq4_xs(const BlockIQ4_XS* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = h(b[i].d);
    for (int sub = 0; sub < 8; ++sub, y += 32) {
      const float dl = d * static_cast<float>(iq4_xs_scale(b[i], sub));
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIq4nlValues[b[i].qs[16 * sub + j] & 15]);
        y[j + 16] = dl * static_cast<float>(kIq4nlValues[b[i].qs[16 * sub + j] >> 4]);
      }
    }
  }
}
void deq_q4_k(const BlockQ4_K* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = h(b[i].d), dmin = h(b[i].dmin);
    const std::uint8_t* q = b[i].qs;
    for (int c = 0; c < 4; ++c, q += 32) {  // 64-element chunks
      std::uint8_t sc0, m0, sc1, m1;
      get_scale_min_k4(2 * c, b[i].scales, &sc0, &m0);
      get_scale_min_k4(2 * c + 1, b[i].scales, &sc1, &m1);
      for (int l = 0; l < 32; ++l) {
        *y++ = d * sc0 * static_cast<float>(q[l] & 15) - dmin * m0;
      }
      for (int l = 0; l < 32; ++l) {
        *y++ = d * sc1 * static_cast<float>(q[l] >> 4) - dmin * m1;
      }
    }
  }
}
void deq_q5_k(const BlockQ5_K* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = h(b[i].d), dmin = h(b[i].dmin);
    const std::uint8_t* q = b[i].qs;
    for (int c = 0; c < 4; ++c, q += 32) {
      std::uint8_t sc0, m0, sc1, m1;
      get_scale_min_k4(2 * c, b[i].scales, &sc0, &m0);
      get_scale_min_k4(2 * c + 1, b[i].scales, &sc1, &m1);
      for (int l = 0; l < 32; ++l) {
        const int v = (q[l] & 15) | (((b[i].qh[l] >> (2 * c)) & 1) << 4);
        *y++ = d * sc0 * static_cast<float>(v) - dmin * m0;
      }
      for (int l = 0; l < 32; ++l) {
        const int v = (q[l] >> 4) | (((b[i].qh[l] >> (2 * c + 1)) & 1) << 4);
        *y++ = d * sc1 * static_cast<float>(v) - dmin * m1;
      }
    }
  }
}
void deq_q6_k(const BlockQ6_K* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = h(b[i].d);
    for (int half = 0; half < 2; ++half, y += 128) {
      const std::uint8_t* ql = b[i].ql + 64 * half;
      const std::uint8_t* qh = b[i].qh + 32 * half;
      const std::int8_t* sc = b[i].scales + 8 * half;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q0 = ((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * static_cast<float>(q0);
        y[l + 32] = d * sc[is + 2] * static_cast<float>(q1);
        y[l + 64] = d * sc[is + 4] * static_cast<float>(q2);
        y[l + 96] = d * sc[is + 6] * static_cast<float>(q3);
      }
    }
  }
}

// ---------------------------------------------------------------- quantize
void quant_q8_0(const float* x, BlockQ8_0* b, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    for (int j = 0; j < 32; ++j) b[i].qs[j] = static_cast<std::int8_t>(std::lround(x[j] * id));
  }
}
// The element of largest magnitude, with its sign (symmetric types put it at -2^(bits-1)).
float signed_absmax(const float* x, int n) {
  float amax = 0, v = 0;
  for (int j = 0; j < n; ++j)
    if (std::fabs(x[j]) > amax) { amax = std::fabs(x[j]); v = x[j]; }
  return v;
}
void quant_q4_0(const float* x, BlockQ4_0* b, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += 32) {
    const float d = signed_absmax(x, 32) / -8.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    for (int j = 0; j < 16; ++j) {
      const int lo = std::clamp(static_cast<int>(std::lround(x[j] * id)) + 8, 0, 15);
      const int hi = std::clamp(static_cast<int>(std::lround(x[j + 16] * id)) + 8, 0, 15);
      b[i].qs[j] = static_cast<std::uint8_t>(lo | (hi << 4));
    }
  }
}
void quant_q5_0(const float* x, BlockQ5_0* b, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += 32) {
    const float d = signed_absmax(x, 32) / -16.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    std::uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int lo = std::clamp(static_cast<int>(std::lround(x[j] * id)) + 16, 0, 31);
      const int hi = std::clamp(static_cast<int>(std::lround(x[j + 16] * id)) + 16, 0, 31);
      b[i].qs[j] = static_cast<std::uint8_t>((lo & 15) | ((hi & 15) << 4));
      qh |= static_cast<std::uint32_t>(lo >> 4) << j;
      qh |= static_cast<std::uint32_t>(hi >> 4) << (j + 16);
    }
    store_u32le(b[i].qh, qh);
  }
}
// Asymmetric: x ~ min + q * (max - min) / levels.
template <class Block, int kLevels>
void quant_asym(const float* x, Block* b, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += 32) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < 32; ++j) { mn = std::min(mn, x[j]); mx = std::max(mx, x[j]); }
    const float d = (mx - mn) / kLevels;
    const float id = d != 0 ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    b[i].m = f32_to_fp16(mn);
    std::uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int lo = std::clamp(static_cast<int>(std::lround((x[j] - mn) * id)), 0, kLevels);
      const int hi = std::clamp(static_cast<int>(std::lround((x[j + 16] - mn) * id)), 0, kLevels);
      b[i].qs[j] = static_cast<std::uint8_t>((lo & 15) | ((hi & 15) << 4));
      qh |= static_cast<std::uint32_t>(lo >> 4) << j;
      qh |= static_cast<std::uint32_t>(hi >> 4) << (j + 16);
    }
    if constexpr (kLevels == 31) store_u32le(b[i].qh, qh);
  }
}

// Q4_K / Q5_K: per sub-block of 32 an asymmetric range [lo, hi] with lo <= 0
// (the format's min is subtracted, so it must be >= 0), then the 8 scales and
// mins quantized to 6 bits against the block's d and dmin (fp16).
template <class Block, int kLevels>
void quant_k45(const float* x, Block* b, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += 256) {
    float scale[8], minv[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      float lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) { lo = std::min(lo, x[32 * j + l]); hi = std::max(hi, x[32 * j + l]); }
      scale[j] = (hi - lo) / kLevels;
      minv[j] = -lo;
      max_scale = std::max(max_scale, scale[j]);
      max_min = std::max(max_min, minv[j]);
    }
    const float d = fp16_to_f32(f32_to_fp16(max_scale / 63.f));
    const float dmin = fp16_to_f32(f32_to_fp16(max_min / 63.f));
    b[i].d = f32_to_fp16(d);
    b[i].dmin = f32_to_fp16(dmin);
    std::uint8_t sc[8], mq[8];
    for (int j = 0; j < 8; ++j) {
      // Round the scale up so the top of the range still fits in kLevels.
      sc[j] = static_cast<std::uint8_t>(d > 0 ? std::min(63.f, std::ceil(scale[j] / d)) : 0);
      mq[j] = static_cast<std::uint8_t>(dmin > 0 ? std::min(63.f, std::nearbyint(minv[j] / dmin)) : 0);
    }
    pack_scale_min_k4(sc, mq, b[i].scales);
    std::uint8_t q[256];
    for (int j = 0; j < 8; ++j) {
      const float ds = d * sc[j], dm = dmin * mq[j];
      const float ids = ds != 0 ? 1.f / ds : 0.f;
      for (int l = 0; l < 32; ++l)
        q[32 * j + l] = static_cast<std::uint8_t>(
            std::clamp(static_cast<int>(std::lround((x[32 * j + l] + dm) * ids)), 0, kLevels));
    }
    if constexpr (kLevels == 31) std::memset(b[i].qh, 0, 32);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const std::uint8_t a = q[64 * c + l], e = q[64 * c + 32 + l];
        b[i].qs[32 * c + l] = static_cast<std::uint8_t>((a & 15) | ((e & 15) << 4));
        if constexpr (kLevels == 31)
          b[i].qh[l] |= static_cast<std::uint8_t>(((a >> 4) << (2 * c)) | ((e >> 4) << (2 * c + 1)));
      }
    }
  }
}

// scale[k] = max |x| over sub-block k of 16 (of 256), / levels; returns the
// largest (Q3_K and Q6_K's symmetric scales).
float sub16_symmetric_scales(const float* x, float levels, float* scale) {
  float max_scale = 0;
  for (int k = 0; k < 16; ++k) {
    float amax = 0;
    for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * k + l]));
    scale[k] = amax / levels;
    max_scale = std::max(max_scale, scale[k]);
  }
  return max_scale;
}

// Q2_K: per sub-block of 16 an asymmetric range [lo <= 0, hi] over 3 steps;
// the 16 scales and mins quantized to 4 bits against the block's d, dmin.
void quant_q2_k(const float* x, BlockQ2_K* b, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += 256) {
    float scale[16], minv[16], max_scale = 0, max_min = 0;
    for (int k = 0; k < 16; ++k) {
      float lo = 0, hi = 0;
      for (int l = 0; l < 16; ++l) { lo = std::min(lo, x[16 * k + l]); hi = std::max(hi, x[16 * k + l]); }
      scale[k] = (hi - lo) / 3.f;
      minv[k] = -lo;
      max_scale = std::max(max_scale, scale[k]);
      max_min = std::max(max_min, minv[k]);
    }
    const float d = fp16_to_f32(f32_to_fp16(max_scale / 15.f));
    const float dmin = fp16_to_f32(f32_to_fp16(max_min / 15.f));
    b[i].d = f32_to_fp16(d);
    b[i].dmin = f32_to_fp16(dmin);
    std::uint8_t q[256];
    for (int k = 0; k < 16; ++k) {
      const int sc = d > 0 ? static_cast<int>(std::min(15.f, std::ceil(scale[k] / d))) : 0;
      const int m = dmin > 0 ? static_cast<int>(std::min(15.f, std::nearbyint(minv[k] / dmin))) : 0;
      b[i].scales[k] = static_cast<std::uint8_t>(sc | (m << 4));
      const float ds = d * static_cast<float>(sc), dm = dmin * static_cast<float>(m);
      const float ids = ds != 0 ? 1.f / ds : 0.f;
      for (int l = 0; l < 16; ++l)
        q[16 * k + l] = static_cast<std::uint8_t>(std::clamp(static_cast<int>(std::lround((x[16 * k + l] + dm) * ids)), 0, 3));
    }
    std::memset(b[i].qs, 0, 64);
    for (int e = 0; e < 256; ++e) {  // element e = 128h + 32j + l
      const int half = e / 128, j = (e % 128) / 32, l = e % 32;
      b[i].qs[32 * half + l] |= static_cast<std::uint8_t>(q[e] << (2 * j));
    }
  }
}

// Q3_K: per sub-block of 16 a symmetric scale amax/4 (q in -4..3, the top
// clamped), the scales quantized to 0..31 against d = max / 31 and stored + 32.
void quant_q3_k(const float* x, BlockQ3_K* b, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += 256) {
    float scale[16];
    const float d = fp16_to_f32(f32_to_fp16(sub16_symmetric_scales(x, 4.f, scale) / 31.f));
    b[i].d = f32_to_fp16(d);
    std::uint8_t sc[16], q[256];
    for (int k = 0; k < 16; ++k) {
      sc[k] = static_cast<std::uint8_t>(d > 0 ? std::min(31.f, std::ceil(scale[k] / d)) : 0);
      const float ds = d * static_cast<float>(sc[k]);
      const float ids = ds != 0 ? 1.f / ds : 0.f;
      for (int l = 0; l < 16; ++l)
        q[16 * k + l] = static_cast<std::uint8_t>(std::clamp(static_cast<int>(std::lround(x[16 * k + l] * ids)), -4, 3) + 4);
    }
    std::memset(b[i].scales, 0, 12);
    for (int k = 0; k < 16; ++k) {
      const int v = sc[k] + 32;  // 6 bits
      b[i].scales[k % 8] |= static_cast<std::uint8_t>((v & 15) << (k < 8 ? 0 : 4));
      b[i].scales[8 + k % 4] |= static_cast<std::uint8_t>((v >> 4) << (2 * (k / 4)));
    }
    std::memset(b[i].qs, 0, 64);
    std::memset(b[i].hmask, 0, 32);
    for (int e = 0; e < 256; ++e) {
      const int half = e / 128, j = (e % 128) / 32, l = e % 32;
      b[i].qs[32 * half + l] |= static_cast<std::uint8_t>((q[e] & 3) << (2 * j));
      b[i].hmask[l] |= static_cast<std::uint8_t>((q[e] >> 2) << (4 * half + j));
    }
  }
}

// The IQ4_NL table index whose value is nearest v.
std::uint8_t iq4nl_nearest(float v) {
  int best = 0;
  for (int k = 1; k < 16; ++k)
    if (std::fabs(v - kIq4nlValues[k]) < std::fabs(v - kIq4nlValues[best])) best = k;
  return static_cast<std::uint8_t>(best);
}
// 32 values -> 16 nibble pairs against scale ds (0: all index 8, value 1 * 0).
void iq4nl_pack(const float* x, float ds, std::uint8_t* qs) {
  const float id = ds != 0 ? 1.f / ds : 0.f;
  for (int j = 0; j < 16; ++j)
    qs[j] = static_cast<std::uint8_t>(iq4nl_nearest(x[j] * id) | (iq4nl_nearest(x[j + 16] * id) << 4));
}
// IQ4_NL: the signed absmax mapped to -127 (the table's widest end).
void quant_iq4_nl(const float* x, BlockIQ4_NL* b, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += 32) {
    const float d = fp16_to_f32(f32_to_fp16(signed_absmax(x, 32) / -127.f));
    b[i].d = f32_to_fp16(d);
    iq4nl_pack(x, d, b[i].qs);
  }
}
// IQ4_XS: per sub-block of 32 the signed absmax / -127, those 8 scales
// quantized to -32..31 against d = max |scale| / 32.
void quant_iq4_xs(const float* x, BlockIQ4_XS* b, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += 256) {
    float sc[8], amax = 0;
    for (int sub = 0; sub < 8; ++sub) {
      sc[sub] = signed_absmax(x + 32 * sub, 32) / -127.f;
      amax = std::max(amax, std::fabs(sc[sub]));
    }
    const float d = fp16_to_f32(f32_to_fp16(amax / 32.f));
    b[i].d = f32_to_fp16(d);
    b[i].scales_h = 0;
    std::memset(b[i].scales_l, 0, 4);
    for (int sub = 0; sub < 8; ++sub) {
      const int ls = d > 0 ? std::clamp(static_cast<int>(std::lround(sc[sub] / d)), -32, 31) : 0;
      const int v = ls + 32;
      b[i].scales_l[sub / 2] |= static_cast<std::uint8_t>((v & 15) << (4 * (sub % 2)));
      b[i].scales_h = static_cast<std::uint16_t>(b[i].scales_h | ((v >> 4) << (2 * sub)));
      iq4nl_pack(x + 32 * sub, d * static_cast<float>(ls), b[i].qs + 16 * sub);
    }
  }
}

// Q6_K: per sub-block of 16 a symmetric scale amax/31, scales quantized to
// int8 against d = max|scale| / 127.
void quant_q6_k(const float* x, BlockQ6_K* b, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += 256) {
    float scale[16];
    const float d = fp16_to_f32(f32_to_fp16(sub16_symmetric_scales(x, 31.f, scale) / 127.f));
    b[i].d = f32_to_fp16(d);
    std::uint8_t q[256];
    for (int s = 0; s < 16; ++s) {
      const int sc = d > 0 ? std::min(127, static_cast<int>(std::ceil(scale[s] / d))) : 0;
      b[i].scales[s] = static_cast<std::int8_t>(sc);
      const float ds = d * sc;
      const float ids = ds != 0 ? 1.f / ds : 0.f;
      for (int l = 0; l < 16; ++l)
        q[16 * s + l] = static_cast<std::uint8_t>(
            std::clamp(static_cast<int>(std::lround(x[16 * s + l] * ids)), -32, 31) + 32);
    }
    std::memset(b[i].qh, 0, 64);
    for (int half = 0; half < 2; ++half) {
      std::uint8_t* ql = b[i].ql + 64 * half;
      std::uint8_t* qh = b[i].qh + 32 * half;
      const std::uint8_t* qq = q + 128 * half;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<std::uint8_t>((qq[l] & 15) | ((qq[l + 64] & 15) << 4));
        ql[l + 32] = static_cast<std::uint8_t>((qq[l + 32] & 15) | ((qq[l + 96] & 15) << 4));
        qh[l] = static_cast<std::uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) | ((qq[l + 64] >> 4) << 4) |
                                          ((qq[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace

void dequantize_row_ref(GgmlType type, const void* src, float* dst, std::size_t n) {
  (void)ggml_row_bytes(type, n);  // validates type and n
  const std::size_t nb = n / ggml_block_elems(type);
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, src, n * 4); return;
    case GgmlType::F16: {
      const auto* s = static_cast<const std::uint8_t*>(src);
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t v;
        std::memcpy(&v, s + 2 * i, 2);
        dst[i] = fp16_to_f32(v);
      }
      return;
    }
    case GgmlType::BF16: {
      const auto* s = static_cast<const std::uint8_t*>(src);
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t v;
        std::memcpy(&v, s + 2 * i, 2);
        dst[i] = bf16_to_f32(v);
      }
      return;
    }
    case GgmlType::Q4_0: deq_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb); return;
    case GgmlType::Q4_1: deq_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb); return;
    case GgmlType::Q5_0: deq_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb); return;
    case GgmlType::Q5_1: deq_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb); return;
    case GgmlType::Q8_0: deq_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb); return;
    case GgmlType::Q2_K: deq_q2_k(static_cast<const BlockQ2_K*>(src), dst, nb); return;
    case GgmlType::Q3_K: deq_q3_k(static_cast<const BlockQ3_K*>(src), dst, nb); return;
    case GgmlType::Q4_K: deq_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb); return;
    case GgmlType::Q5_K: deq_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb); return;
    case GgmlType::Q6_K: deq_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb); return;
    case GgmlType::IQ4_NL: deq_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, nb); return;
    case GgmlType::IQ4_XS: deq_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, nb); return;
  }
  throw std::invalid_argument("dequantize_row_ref: unsupported type");
}

void quantize_row_ref(GgmlType type, const float* src, void* dst, std::size_t n) {
  (void)ggml_row_bytes(type, n);
  const std::size_t nb = n / ggml_block_elems(type);
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, src, n * 4); return;
    case GgmlType::F16:
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t v = f32_to_fp16(src[i]);
        std::memcpy(static_cast<std::uint8_t*>(dst) + 2 * i, &v, 2);
      }
      return;
    case GgmlType::BF16:
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t v = f32_to_bf16(src[i]);
        std::memcpy(static_cast<std::uint8_t*>(dst) + 2 * i, &v, 2);
      }
      return;
    case GgmlType::Q4_0: quant_q4_0(src, static_cast<BlockQ4_0*>(dst), nb); return;
    case GgmlType::Q4_1: quant_asym<BlockQ4_1, 15>(src, static_cast<BlockQ4_1*>(dst), nb); return;
    case GgmlType::Q5_0: quant_q5_0(src, static_cast<BlockQ5_0*>(dst), nb); return;
    case GgmlType::Q5_1: quant_asym<BlockQ5_1, 31>(src, static_cast<BlockQ5_1*>(dst), nb); return;
    case GgmlType::Q8_0: quant_q8_0(src, static_cast<BlockQ8_0*>(dst), nb); return;
    case GgmlType::Q2_K: quant_q2_k(src, static_cast<BlockQ2_K*>(dst), nb); return;
    case GgmlType::Q3_K: quant_q3_k(src, static_cast<BlockQ3_K*>(dst), nb); return;
    case GgmlType::Q4_K: quant_k45<BlockQ4_K, 15>(src, static_cast<BlockQ4_K*>(dst), nb); return;
    case GgmlType::Q5_K: quant_k45<BlockQ5_K, 31>(src, static_cast<BlockQ5_K*>(dst), nb); return;
    case GgmlType::Q6_K: quant_q6_k(src, static_cast<BlockQ6_K*>(dst), nb); return;
    case GgmlType::IQ4_NL: quant_iq4_nl(src, static_cast<BlockIQ4_NL*>(dst), nb); return;
    case GgmlType::IQ4_XS: quant_iq4_xs(src, static_cast<BlockIQ4_XS*>(dst), nb); return;
  }
  throw std::invalid_argument("quantize_row_ref: unsupported type");
}

}  // namespace latte
