// latent_int4_study: the storage-only error of candidate 4-bit latent cache
// formats (issue 60), measured before any kernel exists. A session runs with
// an f32 cache; after every step the rows it wrote are replaced by their
// round trip through the candidate format (what a cache in that format would
// give the attention back), so the perplexity and logits it then yields are
// those of the format's storage alone, with exact kernels: the oracle for
// what real kernels may add. k_pe keeps the int8 row format in every
// candidate (the issue keeps RoPE's part at int8).
//
// Emulation limits, stated with the results: a token attends to its own row
// exact (the row is replaced after its step), and formats that quantize a
// tile of tokens together keep the rows of the tile still filling at int8.
//
// Usage:
//   latent_int4_study -m FILE --windows FILE [--max-windows N]
//       perplexity over windows of token ids ("1,2,3" a line), token by token
//   latent_int4_study -m FILE --prefill N --decode K
//       N pseudo-random tokens prefilled, K greedy decodes: logits' NMSE of
//       every decode against the f32 cache's, and the latents' NMSE
//   --only S: the formats whose name holds S (and f32)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "quant/latent_formats.h"
#include "runtime/error.h"
#include "runtime/model/model.h"
#include "runtime/session/session.h"

namespace {

using latte::LatentCache;
using latte::Session;

// ------------------------------------------------------------ the candidates
enum class Kind { exact, int8_row, sym, affine, channel_tile, tile_mean };

struct Format {
  std::string name;
  Kind kind;
  int group = 0;        // sym/affine: channels per scale (0: the whole row)
  int tile = 0;         // channel_tile: tokens per tile
  bool rotate = false;  // a normalized Hadamard transform first (folded into W_UK/W_UV)
  // Divided by kv_a_norm's weights first (and multiplied back after): the
  // norm's per-channel gains, which a cache can fold into W_UK and W_UV.
  bool gamma = false;
};

// Bytes per token and layer of c_KV (d_c channels) in the format, with f16
// scales and mins; k_pe (d_R) at int8 with an f32 scale comes on top.
double ckv_bytes(const Format& f, int d_c) {
  switch (f.kind) {
    case Kind::exact: return 4.0 * d_c;
    case Kind::int8_row: return d_c + 4.0;
    case Kind::sym: return d_c / 2.0 + 2.0 * d_c / (f.group ? f.group : d_c);
    case Kind::affine: return d_c / 2.0 + 4.0 * d_c / (f.group ? f.group : d_c);
    case Kind::channel_tile: return d_c / 2.0 + 4.0 * d_c / f.tile;
    case Kind::tile_mean: return d_c / 2.0 + 2.0 + 2.0 * d_c / f.tile;
  }
  return 0;
}

void hadamard(float* x, int n) {  // in place, normalized: its own inverse
  for (int h = 1; h < n; h *= 2)
    for (int i = 0; i < n; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b, x[j + h] = a - b;
      }
  const float s = 1.f / std::sqrt(static_cast<float>(n));
  for (int i = 0; i < n; ++i) x[i] *= s;
}

// q4_0's rule: d = (the signed value of largest magnitude) / -8, q in [0, 15].
void round_trip_sym(float* x, int n) {
  float m = 0, am = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > am) am = std::fabs(x[i]), m = x[i];
  const float d = m / -8.f;
  const float id = d != 0 ? 1.f / d : 0.f;
  for (int i = 0; i < n; ++i) {
    const float q = std::min(15.f, std::max(0.f, std::nearbyint(x[i] * id + 8.f)));
    x[i] = (q - 8.f) * d;
  }
}

// q4_1's rule: x ~ min + d q, q in [0, 15].
void round_trip_affine(float* x, int n, int stride = 1) {
  float lo = x[0], hi = x[0];
  for (int i = 0; i < n; ++i) lo = std::min(lo, x[i * stride]), hi = std::max(hi, x[i * stride]);
  const float d = (hi - lo) / 15.f;
  const float id = d != 0 ? 1.f / d : 0.f;
  for (int i = 0; i < n; ++i) {
    const float q = std::min(15.f, std::max(0.f, std::nearbyint((x[i * stride] - lo) * id)));
    x[i * stride] = lo + q * d;
  }
}

void round_trip_int8(float* x, int n) {
  std::vector<std::int8_t> q(static_cast<std::size_t>(n));
  const float s = latte::latent_quantize_int8(x, n, q.data());
  for (int i = 0; i < n; ++i) x[i] = s * q[static_cast<std::size_t>(i)];
}

// One row's c_KV through a per-row format (not channel_tile); gain: the
// layer's kv_a_norm weights (d_c).
void round_trip_row(const Format& f, float* x, int d_c, const float* gain) {
  if (f.kind == Kind::exact) return;
  if (f.kind == Kind::int8_row) return round_trip_int8(x, d_c);
  if (f.gamma)
    for (int i = 0; i < d_c; ++i) x[i] = gain[i] != 0 ? x[i] / gain[i] : 0.f;
  if (f.rotate) hadamard(x, d_c);
  const int g = f.group ? f.group : d_c;
  for (int i = 0; i < d_c; i += g) f.kind == Kind::sym ? round_trip_sym(x + i, g) : round_trip_affine(x + i, g);
  if (f.rotate) hadamard(x, d_c);
  if (f.gamma)
    for (int i = 0; i < d_c; ++i) x[i] *= gain[i];
}

// ------------------------------------------------------------ the emulation
// Keeps each layer's exact rows and rewrites the session's f32 cache with
// their round trips after every step.
class Emulator {
 public:
  Emulator(const Format& f, const latte::Model& m) : f_(f) {
    n_layers_ = m.params().n_layers, d_c_ = m.params().mla.kv_lora_rank, d_R_ = m.params().mla.d_rope;
    exact_.resize(static_cast<std::size_t>(n_layers_));
    for (int l = 0; l < n_layers_; ++l) {
      const float* g = m.layer(l).kv_a_norm;
      gains_.emplace_back(static_cast<std::size_t>(d_c_), 1.f);
      if (g) std::copy_n(g, d_c_, gains_.back().begin());
    }
  }
  void reset() {
    for (auto& e : exact_) e.clear();
  }
  // After a step that wrote positions [from, n) of every layer.
  void after_step(Session& s, std::int64_t from) {
    // A measurement tool: it rewrites rows the session wrote, at their
    // positions (LatentCache::write allows it), so the session's own state
    // (tokens, positions) stays true.
    auto& cache = const_cast<LatentCache&>(s.cache());
    const std::int64_t n = s.n_past();
    const int w = d_c_ + d_R_;
    std::vector<float> row(static_cast<std::size_t>(w));
    for (int l = 0; l < n_layers_; ++l) {
      auto& ex = exact_[static_cast<std::size_t>(l)];
      ex.resize(static_cast<std::size_t>(n * w));
      for (std::int64_t p = from; p < n; ++p) cache.read_row(l, p, &ex[static_cast<std::size_t>(p * w)], &ex[static_cast<std::size_t>(p * w + d_c_)]);
      if (f_.kind == Kind::exact) continue;
      std::int64_t lo = from;
      const bool tiled = f_.kind == Kind::channel_tile || f_.kind == Kind::tile_mean;
      if (tiled) {
        // The tiles completed by this step are quantized together; the
        // rows of the filling tile stay int8 (below).
        const std::int64_t done_before = from / f_.tile * f_.tile, done_now = n / f_.tile * f_.tile;
        for (std::int64_t t0 = done_before; t0 < done_now; t0 += f_.tile) {
          std::vector<float> tile(ex.begin() + t0 * w, ex.begin() + (t0 + f_.tile) * w);
          round_trip_tile(tile.data(), w);
          for (int t = 0; t < f_.tile; ++t) {
            float* r = &tile[static_cast<std::size_t>(t * w)];
            round_trip_int8(r + d_c_, d_R_);
            write(cache, l, t0 + t, r);
          }
        }
        lo = std::max(lo, done_now);
      }
      for (std::int64_t p = lo; p < n; ++p) {
        std::copy_n(&ex[static_cast<std::size_t>(p * w)], w, row.data());
        if (tiled) round_trip_int8(row.data(), d_c_);
        else round_trip_row(f_, row.data(), d_c_, gains_[static_cast<std::size_t>(l)].data());
        round_trip_int8(row.data() + d_c_, d_R_);
        write(cache, l, p, row.data());
      }
    }
  }
  // NMSE of the c_KV the cache holds now against the exact rows.
  double nmse(const Session& s) const {
    const int w = d_c_ + d_R_;
    std::vector<float> row(static_cast<std::size_t>(w));
    double err = 0, sig = 0;
    for (int l = 0; l < n_layers_; ++l)
      for (std::int64_t p = 0; p < s.n_past(); ++p) {
        s.cache().read_row(l, p, row.data(), row.data() + d_c_);
        const float* ex = &exact_[static_cast<std::size_t>(l)][static_cast<std::size_t>(p * w)];
        for (int c = 0; c < d_c_; ++c) err += (row[c] - ex[c]) * static_cast<double>(row[c] - ex[c]), sig += ex[c] * static_cast<double>(ex[c]);
      }
    return sig > 0 ? err / sig : 0;
  }

 private:
  void write(LatentCache& cache, int l, std::int64_t p, const float* r) const { cache.write(l, p, 1, r, r + d_c_); }
  // One complete tile's c_KV (f_.tile rows of stride w): channel_tile, each
  // channel at int4 with its own scale and min; tile_mean, the tile's
  // per-channel mean taken out, each row at int4 with one scale.
  void round_trip_tile(float* tile, int w) const {
    if (f_.kind == Kind::channel_tile) {
      for (int c = 0; c < d_c_; ++c) round_trip_affine(tile + c, f_.tile, w);
      return;
    }
    std::vector<double> mean(static_cast<std::size_t>(d_c_), 0.0);
    for (int t = 0; t < f_.tile; ++t)
      for (int c = 0; c < d_c_; ++c) mean[static_cast<std::size_t>(c)] += tile[t * w + c];
    for (auto& m : mean) m /= f_.tile;
    for (int t = 0; t < f_.tile; ++t) {
      float* r = tile + t * w;
      for (int c = 0; c < d_c_; ++c) r[c] -= static_cast<float>(mean[static_cast<std::size_t>(c)]);
      round_trip_sym(r, d_c_);
      for (int c = 0; c < d_c_; ++c) r[c] += static_cast<float>(mean[static_cast<std::size_t>(c)]);
    }
  }
  Format f_;
  int n_layers_ = 0, d_c_ = 0, d_R_ = 0;
  std::vector<std::vector<float>> exact_;
  std::vector<std::vector<float>> gains_;
};

std::vector<Format> formats(int d_c) {
  std::vector<Format> v = {{"f32", Kind::exact}, {"int8 (row)", Kind::int8_row}};
  for (int g : {32, 64, 128, 0}) {
    if (g >= d_c) continue;  // a group of the whole row is "row"
    const std::string gs = g ? "g" + std::to_string(g) : std::string("row");
    v.push_back({"int4 sym " + gs, Kind::sym, g});
    v.push_back({"int4 affine " + gs, Kind::affine, g});
    if ((d_c & (d_c - 1)) == 0) {
      v.push_back({"hadamard + int4 sym " + gs, Kind::sym, g, 0, true});
      v.push_back({"hadamard + int4 affine " + gs, Kind::affine, g, 0, true});
    }
    v.push_back({"norm gains + int4 sym " + gs, Kind::sym, g, 0, false, true});
    v.push_back({"norm gains + int4 affine " + gs, Kind::affine, g, 0, false, true});
    if ((d_c & (d_c - 1)) == 0) v.push_back({"norm gains + hadamard + int4 sym " + gs, Kind::sym, g, 0, true, true});
  }
  for (int t : {32, 128}) {
    v.push_back({"int4 per channel, tile " + std::to_string(t), Kind::channel_tile, 0, t});
    v.push_back({"int4 sym row, tile's channel means out, tile " + std::to_string(t), Kind::tile_mean, 0, t});
  }
  return v;
}

double log_softmax_at(std::span<const float> z, std::int32_t target) {
  const float m = *std::max_element(z.begin(), z.end());
  double s = 0;
  for (float v : z) s += std::exp(static_cast<double>(v) - m);
  return static_cast<double>(z[static_cast<std::size_t>(target)]) - m - std::log(s);
}

std::vector<std::vector<std::int32_t>> read_windows(const std::string& path, std::size_t max_n) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<std::vector<std::int32_t>> v;
  std::string line;
  while (v.size() < max_n && std::getline(in, line)) {
    std::vector<std::int32_t> w;
    std::stringstream ss(line);
    std::string tok;
    while (std::getline(ss, tok, ',')) w.push_back(static_cast<std::int32_t>(std::stol(tok)));
    if (w.size() >= 2) v.push_back(std::move(w));
  }
  return v;
}

int run(int argc, char** argv) {
  std::string model_path, windows_path;
  std::size_t max_windows = 1u << 30;
  int n_prefill = 0, n_decode = 0;
  std::string only;  // formats whose name holds this (f32 always runs)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "-m") model_path = next();
    else if (a == "--windows") windows_path = next();
    else if (a == "--max-windows") max_windows = std::stoul(next());
    else if (a == "--prefill") n_prefill = std::stoi(next());
    else if (a == "--decode") n_decode = std::stoi(next());
    else if (a == "--only") only = next();
    else throw std::runtime_error("unknown argument " + a);
  }
  if (model_path.empty() || (windows_path.empty() && n_prefill <= 0))
    throw std::runtime_error("usage: latent_int4_study -m FILE (--windows FILE [--max-windows N] | --prefill N --decode K)");
  auto model = latte::Model::load(model_path);
  const auto& mla = model->params().mla;
  const int L = model->params().n_layers, d_c = mla.kv_lora_rank, d_R = mla.d_rope;
  std::printf("# %s: %d layers, d_c %d, d_R %d\n", model_path.c_str(), L, d_c, d_R);
  std::printf("# bytes per token and layer: c_KV in the format (f16 scales/mins) + k_pe int8 (%d + 4); at this shape and at V2-Lite's (d_c 512, d_R 64)\n", d_R);

  latte::SessionOptions so;
  so.threads = 1;
  so.cache = latte::LatentStorage::f32;
  if (!windows_path.empty()) {
    const auto wins = read_windows(windows_path, max_windows);
    std::size_t longest = 0;
    for (const auto& w : wins) longest = std::max(longest, w.size());
    so.n_ctx = static_cast<std::int64_t>(longest);
    std::printf("| format | bytes/token/layer | at V2-Lite | latent NMSE | perplexity | vs f32 |\n|---|---|---|---|---|---|\n");
    double ppl_f32 = 0;
    std::int64_t predicted = 0;
    for (const Format& f : formats(d_c)) {
      if (f.kind != Kind::exact && f.name.find(only) == std::string::npos) continue;
      Session s(model, so);
      Emulator em(f, *model);
      double nll = 0, nmse_sum = 0;
      std::int64_t n = 0;
      for (const auto& w : wins) {
        s.reset();
        em.reset();
        s.prefill(std::span<const std::int32_t>(w.data(), 1));
        em.after_step(s, 0);
        for (std::size_t i = 1; i < w.size(); ++i) {
          nll -= log_softmax_at(s.logits(), w[i]);
          ++n;
          if (i + 1 < w.size()) {
            s.decode(w[i]);
            em.after_step(s, s.n_past() - 1);
          }
        }
        nmse_sum += em.nmse(s);
      }
      const double ppl = std::exp(nll / static_cast<double>(n));
      predicted = n;
      if (f.kind == Kind::exact) ppl_f32 = ppl;
      std::printf("| %s | %.1f | %.1f | %.3g | %.4f | %+.3f%% |\n", f.name.c_str(), ckv_bytes(f, d_c) + d_R + 4,
                  ckv_bytes(f, 512) + 68, nmse_sum / static_cast<double>(wins.size()), ppl, 100 * (ppl / ppl_f32 - 1));
      std::fflush(stdout);
    }
    std::printf("# %zu windows, %lld predicted tokens, token by token\n", wins.size(), static_cast<long long>(predicted));
    return 0;
  }
  // Prefill + decode mode: the logits' NMSE against the f32 cache's.
  so.n_ctx = n_prefill + n_decode + 1;
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(n_prefill));
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (auto& t : prompt) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    t = static_cast<std::int32_t>(x % static_cast<std::uint64_t>(model->params().n_vocab));
  }
  std::vector<std::vector<float>> ref_logits;
  std::vector<std::int32_t> ref_tokens;
  std::printf("| format | bytes/token/layer | at V2-Lite | latent NMSE | logits NMSE (mean of %d decodes) | max |\n|---|---|---|---|---|---|\n", n_decode);
  for (const Format& f : formats(d_c)) {
    if (f.kind != Kind::exact && f.name.find(only) == std::string::npos) continue;
    Session s(model, so);
    Emulator em(f, *model);
    s.prefill(prompt);
    em.after_step(s, 0);
    double sum = 0, worst = 0;
    for (int k = 0; k < n_decode; ++k) {
      // the f32 run picks the tokens (greedy); the others follow them
      if (f.kind == Kind::exact) {
        const auto z = s.logits();
        ref_logits.emplace_back(z.begin(), z.end());
        ref_tokens.push_back(static_cast<std::int32_t>(std::max_element(z.begin(), z.end()) - z.begin()));
      } else {
        const auto z = s.logits();
        const auto& r = ref_logits[static_cast<std::size_t>(k)];
        double e = 0, g = 0;
        for (std::size_t i = 0; i < r.size(); ++i) e += (z[i] - r[i]) * static_cast<double>(z[i] - r[i]), g += r[i] * static_cast<double>(r[i]);
        sum += e / g, worst = std::max(worst, e / g);
      }
      s.decode(ref_tokens[static_cast<std::size_t>(k)]);
      em.after_step(s, s.n_past() - 1);
    }
    std::printf("| %s | %.1f | %.1f | %.3g | %.3g | %.3g |\n", f.name.c_str(), ckv_bytes(f, d_c) + d_R + 4, ckv_bytes(f, 512) + 68,
                em.nmse(s), sum / n_decode, worst);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "latent_int4_study: %s\n", e.what());
    return 1;
  }
}
