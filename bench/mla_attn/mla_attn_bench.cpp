// Decode attention, one layer, one step (kernels/mla_attn), side by side:
// every ISA this CPU runs x cache storage x shape x context x threads, the
// same attention composed from oneDNN matmul + softmax primitives on an f32
// copy of the cache, and the scalar reference.
//
// Counters on every Latte entry:
//   cache_GBps    cache bytes read per second
//   GOPs          2 * n_h * (2 d_c + d_R) * n_ctx operations per second
//   roofline_pct  100 * max(bytes / read bandwidth, ops / peak) / time, with
//                 this machine's read bandwidth and the ISA's peak (fp32 FMA
//                 for f32/f16 caches, int8 dot products for int8 and int4), both
//                 measured first with the entry's thread count
//   vs_onednn     oneDNN time / Latte time for the same shape, context, threads
#include "kernels/gcc_avx512_warnings.h"  // before the intrinsic headers

#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/isa.h"
#include "kernels/mla_attn/mla_attn.h"
#include "quant/latent_formats.h"
#include "tools/read_bandwidth.h"
#include "tests/common/kernel_regions.h"

namespace {

using namespace latte;
using Clock = std::chrono::steady_clock;

constexpr int kDC = 512, kDR = 64;
// Tile tokens of the benchmarked caches (LATTE_BENCH_TILE to compare sizes).
const int kTile = [] {
  const char* e = std::getenv("LATTE_BENCH_TILE");
  return e ? std::atoi(e) : 64;
}();
constexpr std::int64_t kContexts[] = {1024, 4096, 16384, 65536};
constexpr int kThreads[] = {1, 2};

struct Shape {
  const char* name;
  int n_heads;
};
constexpr Shape kShapes[] = {{"v2lite", 16}, {"v3", 128}};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---------------------------------------------------------------- machine limits

template <class F>
double peak_ops(int threads, double ops_per_call, F&& f) {
  const long iters = 20'000'000;
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {  // best of 5: other processes only slow it down
    auto t0 = Clock::now();
#pragma omp parallel num_threads(threads)
    benchmark::DoNotOptimize(f(iters));
    best = std::max(best, ops_per_call * iters * threads / seconds_since(t0));
  }
  return best;
}

__attribute__((target("avx2,fma"))) float fma_avx2(long n) {
  __m256 a[10];
  for (int k = 0; k < 10; ++k) a[k] = _mm256_set1_ps(1.f + k);
  const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < n; ++i)
    for (int k = 0; k < 10; ++k) a[k] = _mm256_fmadd_ps(a[k], b, c);
  float s = 0;
  for (int k = 0; k < 10; ++k) s += _mm256_cvtss_f32(a[k]);
  return s;
}

__attribute__((target("avx512f"))) float fma_avx512(long n) {
  __m512 a[12];
  for (int k = 0; k < 12; ++k) a[k] = _mm512_set1_ps(1.f + k);
  const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < n; ++i)
    for (int k = 0; k < 12; ++k) a[k] = _mm512_fmadd_ps(a[k], b, c);
  float s = 0;
  for (int k = 0; k < 12; ++k) s += _mm512_reduce_add_ps(a[k]);
  return s;
}

// int8 dot products as the kernels use them (u8 x s8 into int32).
__attribute__((target("avx2"))) int dot_avx2(long n) {
  // 4 chains in named registers: more would spill (16 ymm registers)
  __m256i a0 = _mm256_set1_epi32(0), a1 = a0, a2 = a0, a3 = a0;
  __m256i x0 = _mm256_set1_epi8(3), x1 = _mm256_set1_epi8(4), x2 = _mm256_set1_epi8(5), x3 = _mm256_set1_epi8(6);
  const __m256i y = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
#define LATTE_DOT(a, x) a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), one))
  for (long i = 0; i < n; ++i) {
    // opaque inputs: the products cannot be hoisted out of the loop
    __asm__ volatile("" : "+x"(x0), "+x"(x1), "+x"(x2), "+x"(x3));
    LATTE_DOT(a0, x0); LATTE_DOT(a1, x1); LATTE_DOT(a2, x2); LATTE_DOT(a3, x3);
  }
#undef LATTE_DOT
  __m256i s = _mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3));
  return _mm256_extract_epi32(s, 0);
}

// 12 dot-product chains, and NF fp32 FMA chains beside them: with NF > 0
// it shows whether the softmax's multiplies can hide under the dot products
// (on Zen 4 they cannot: vpdpbusd and vfmadd share their pipes, while adds,
// conversions and shuffles issue beside them). Work: 12 dot products per
// step, whatever NF.
template <int NF>
__attribute__((target("avx512f,avx512vnni"))) int dot_avx512(long n) {
  __m512i a[12];
  __m512 f[NF > 0 ? NF : 1];
  for (int k = 0; k < 12; ++k) a[k] = _mm512_set1_epi32(k);
  for (int k = 0; k < NF; ++k) f[k] = _mm512_set1_ps(1.f + k);
  const __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
  const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < n; ++i) {
    for (int k = 0; k < 12; ++k) a[k] = _mm512_dpbusd_epi32(a[k], x, y);
    for (int k = 0; k < NF; ++k) f[k] = _mm512_fmadd_ps(f[k], b, c);
  }
  int s = 0;
  for (int k = 0; k < 12; ++k) s += _mm512_reduce_add_epi32(a[k]);
  float t = 0;
  for (int k = 0; k < NF; ++k) t += _mm512_reduce_add_ps(f[k]);
  return s + static_cast<int>(t);
}

struct Limits {
  double bw[3] = {};         // bytes/s by thread count
  double fma[3][3] = {};     // [isa][threads] fp32 ops/s
  double dot[3][3] = {};     // [isa][threads] int8 ops/s
  double dot_mix[3] = {};    // [threads] avx512 int8 ops/s with fp32 FMAs beside
};

const Limits& limits() {
  static const Limits L = [] {
    Limits l;
    for (int t : kThreads) {
      l.bw[t] = latte::measure_read_bandwidth(std::size_t{512} << 20, t, 3);  // far larger than the LLC
      if (isa_supported(Isa::avx2)) {
        l.fma[1][t] = peak_ops(t, 10 * 8 * 2, [](long n) { return fma_avx2(n / 4); }) / 4;
        l.dot[1][t] = peak_ops(t, 4 * 32 * 2, [](long n) { return dot_avx2(n / 4); }) / 4;
      }
      if (isa_supported(Isa::avx512)) {
        l.fma[2][t] = peak_ops(t, 12 * 16 * 2, [](long n) { return fma_avx512(n / 4); }) / 4;
        l.dot[2][t] = peak_ops(t, 12 * 64 * 2, [](long n) { return dot_avx512<0>(n / 4); }) / 4;
        l.dot_mix[t] = peak_ops(t, 12 * 64 * 2, [](long n) { return dot_avx512<4>(n / 4); }) / 4;
      }
      std::fprintf(stderr,
                   "limits, %d thread(s): read %.1f GB/s; avx2 fma %.0f / int8 %.0f GOP/s; avx512 fma %.0f / "
                   "int8 %.0f GOP/s (%.0f with 1 fp32 FMA per 3 dot products)\n",
                   t, l.bw[t] / 1e9, l.fma[1][t] / 1e9, l.dot[1][t] / 1e9, l.fma[2][t] / 1e9, l.dot[2][t] / 1e9,
                   l.dot_mix[t] / 1e9);
    }
    return l;
  }();
  return L;
}

// ---------------------------------------------------------------- data

struct Cache {
  LatentTileLayout L;
  std::vector<void*> tiles;
  ~Cache() {
    for (void* t : tiles) std::free(t);
  }
  LatentLayerView view() const { return {L, tiles.data()}; }
  std::size_t bytes_per_token() const { return L.bytes / L.tokens; }
};

std::vector<float> rnd(std::size_t n, unsigned seed, float a) {
  std::vector<float> v(n);
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& f : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    f = a * (static_cast<float>(x >> 40) / 8388608.f - 1.f);
  }
  return v;
}

constexpr std::int64_t kMaxCtx = 65536;

const std::vector<float>& rows_f32() {  // (kMaxCtx, d_c + d_R)
  static const std::vector<float> r = rnd(static_cast<std::size_t>(kMaxCtx) * (kDC + kDR), 1, 1.5f);
  return r;
}

const Cache& cache_for(LatentStorage s) {
  static std::map<LatentStorage, std::unique_ptr<Cache>> caches;
  auto& c = caches[s];
  if (!c) {
    c = std::make_unique<Cache>();
    c->L = make_latent_tile_layout(s, kDC, kDR, kTile);
    const auto& rows = rows_f32();
    for (std::int64_t j = 0; j < kMaxCtx; ++j) {
      if (j % kTile == 0) {
        void* p = std::aligned_alloc(64, (c->L.bytes + 63) / 64 * 64);
        std::memset(p, 0, c->L.bytes);
        c->tiles.push_back(p);
        // int4 tiles are quantized whole (their channel scales).
        if (s == LatentStorage::int4) latent_store_tile(c->L, p, kTile, rows.data() + j * (kDC + kDR));
      }
      const float* r = rows.data() + j * (kDC + kDR);
      if (s != LatentStorage::int4) latent_store_row(c->L, c->tiles.back(), static_cast<int>(j % kTile), r, r + kDC);
    }
  }
  return *c;
}

struct QueryData {
  std::vector<float> lat, pe;
};
const QueryData& query(int n_heads) {
  static std::map<int, QueryData> q;
  auto& d = q[n_heads];
  if (d.lat.empty()) {
    d.lat = rnd(static_cast<std::size_t>(n_heads) * kDC, 7, 1.f);
    d.pe = rnd(static_cast<std::size_t>(n_heads) * kDR, 8, 1.f);
  }
  return d;
}

const float kScale = 1.f / std::sqrt(192.f);

// oneDNN seconds per step by (n_heads, n_ctx, threads).
std::map<std::tuple<int, std::int64_t, int>, double>& onednn_times() {
  static std::map<std::tuple<int, std::int64_t, int>, double> m;
  return m;
}

void report(benchmark::State& st, double sec, double bytes, double ops, double roof_ops_peak, int threads,
            int n_heads, std::int64_t n_ctx) {
  const Limits& L = limits();
  st.counters["cache_GBps"] = bytes / sec / 1e9;
  st.counters["GOPs"] = ops / sec / 1e9;
  if (roof_ops_peak > 0) {
    const double lower = std::max(bytes / L.bw[threads], ops / roof_ops_peak);
    st.counters["roofline_pct"] = 100.0 * lower / sec;
  }
  auto it = onednn_times().find({n_heads, n_ctx, threads});
  if (it != onednn_times().end()) st.counters["vs_onednn"] = it->second / sec;
}

// ---------------------------------------------------------------- entries

void bm_latte(benchmark::State& st, Isa isa, LatentStorage s, Shape sh, std::int64_t n_ctx, int threads) {
  const auto& k = kernels::mla_attn_kernels(isa);
  const Cache& c = cache_for(s);
  const QueryData& q = query(sh.n_heads);
  std::vector<float> out(static_cast<std::size_t>(sh.n_heads) * kDC);
  const std::size_t sb = k.scratch_bytes(sh.n_heads, c.L, threads);
  std::unique_ptr<void, decltype(&std::free)> scratch(std::aligned_alloc(64, (sb + 64) / 64 * 64), &std::free);
  kernels::MlaDecodeArgs a;
  a.n_heads = sh.n_heads;
  a.q_lat = q.lat.data();
  a.q_pe = q.pe.data();
  a.scale = kScale;
  a.cache = c.view();
  a.n_ctx = n_ctx;
  a.out = out.data();
  a.threads = threads;
  a.scratch = scratch.get();
  k.decode(a);  // warm
  double total = 0;
  for (auto _ : st) {
    auto t0 = Clock::now();
    latte::test::decode_on_threads(k, a);
    total += seconds_since(t0);
    benchmark::DoNotOptimize(out.data());
  }
  const double sec = total / st.iterations();
  const Limits& L = limits();
  const int ii = isa == Isa::avx512 ? 2 : isa == Isa::avx2 ? 1 : 0;
  const double peak = latent_storage_quantized(s) ? L.dot[ii][threads] : L.fma[ii][threads];
  report(st, sec, static_cast<double>(c.bytes_per_token()) * n_ctx, kernels::mla_decode_ops(sh.n_heads, kDC, kDR, n_ctx),
         peak, threads, sh.n_heads, n_ctx);
}

void bm_ref(benchmark::State& st, Shape sh, std::int64_t n_ctx) {
  const Cache& c = cache_for(LatentStorage::f32);
  const QueryData& q = query(sh.n_heads);
  std::vector<float> out(static_cast<std::size_t>(sh.n_heads) * kDC);
  kernels::MlaDecodeArgs a;
  a.n_heads = sh.n_heads;
  a.q_lat = q.lat.data();
  a.q_pe = q.pe.data();
  a.scale = kScale;
  a.cache = c.view();
  a.n_ctx = n_ctx;
  a.out = out.data();
  double total = 0;
  for (auto _ : st) {
    auto t0 = Clock::now();
    kernels::mla_decode_ref(a);
    total += seconds_since(t0);
  }
  const double sec = total / st.iterations();
  report(st, sec, static_cast<double>(c.bytes_per_token()) * n_ctx, kernels::mla_decode_ops(sh.n_heads, kDC, kDR, n_ctx),
         0, 1, sh.n_heads, n_ctx);
  st.counters.erase("vs_onednn");
}

// scores = Q K^T (scale folded into Q), softmax over the context, O = P V, with
// K = V[:, :d_c] views of one f32 copy of the cache rows.
void bm_onednn(benchmark::State& st, Shape sh, std::int64_t n_ctx, int threads) {
  using namespace dnnl;
  using dt = memory::data_type;
  omp_set_num_threads(threads);
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  const int nh = sh.n_heads, C = kDC + kDR;
  const memory::dim N = n_ctx;
  const QueryData& q = query(nh);
  std::vector<float> qc(static_cast<std::size_t>(nh) * C);
  for (int h = 0; h < nh; ++h) {
    for (int c = 0; c < kDC; ++c) qc[h * C + c] = q.lat[h * kDC + c] * kScale;
    for (int c = 0; c < kDR; ++c) qc[h * C + kDC + c] = q.pe[h * kDR + c] * kScale;
  }
  float* rows = const_cast<float*>(rows_f32().data());
  std::vector<float> S(static_cast<std::size_t>(nh) * N), O(static_cast<std::size_t>(nh) * kDC);
  memory::desc q_md({nh, C}, dt::f32, memory::dims{C, 1});
  memory::desc kt_md({C, N}, dt::f32, memory::dims{1, C});
  memory::desc s_md({nh, N}, dt::f32, memory::dims{N, 1});
  memory::desc v_md({N, kDC}, dt::f32, memory::dims{C, 1});
  memory::desc o_md({nh, kDC}, dt::f32, memory::dims{kDC, 1});
  matmul mm1(matmul::primitive_desc(matmul::desc(q_md, kt_md, s_md), eng));
  softmax_forward sm(softmax_forward::primitive_desc(softmax_forward::desc(prop_kind::forward_inference, s_md, 1), eng));
  matmul mm2(matmul::primitive_desc(matmul::desc(s_md, v_md, o_md), eng));
  memory qm(q_md, eng, qc.data()), km(kt_md, eng, rows), sm_(s_md, eng, S.data()), vm(v_md, eng, rows),
      om(o_md, eng, O.data());
  auto step = [&] {
    mm1.execute(strm, {{DNNL_ARG_SRC, qm}, {DNNL_ARG_WEIGHTS, km}, {DNNL_ARG_DST, sm_}});
    sm.execute(strm, {{DNNL_ARG_SRC, sm_}, {DNNL_ARG_DST, sm_}});
    mm2.execute(strm, {{DNNL_ARG_SRC, sm_}, {DNNL_ARG_WEIGHTS, vm}, {DNNL_ARG_DST, om}});
    strm.wait();
  };
  step();
  double total = 0;
  for (auto _ : st) {
    auto t0 = Clock::now();
    step();
    total += seconds_since(t0);
    benchmark::DoNotOptimize(O.data());
  }
  const double sec = total / st.iterations();
  onednn_times()[{nh, n_ctx, threads}] = sec;
  const double bytes = 4.0 * C * n_ctx;
  const Limits& L = limits();
  const int ii = isa_supported(Isa::avx512) ? 2 : isa_supported(Isa::avx2) ? 1 : 0;
  report(st, sec, bytes, kernels::mla_decode_ops(nh, kDC, kDR, n_ctx), L.fma[ii][threads], threads, nh, n_ctx);
  st.counters.erase("vs_onednn");
}

void register_all() {
  auto reg = [](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark(name.c_str(), fn)->UseRealTime()->Unit(benchmark::kMicrosecond);
  };
  for (const Shape& sh : kShapes)
    for (std::int64_t n : kContexts)
      for (int t : kThreads) {
        const std::string tail = std::string("/shape:") + sh.name + "/ctx:" + std::to_string(n) +
                                 "/threads:" + std::to_string(t);
        reg("mla_decode/onednn/cache:f32" + tail, [=](benchmark::State& st) { bm_onednn(st, sh, n, t); });
        for (Isa isa : supported_isas()) {
          if (isa == Isa::ref) continue;
          for (LatentStorage s : {LatentStorage::int4, LatentStorage::int8, LatentStorage::f16, LatentStorage::f32})
            reg(std::string("mla_decode/") + isa_name(isa) + "/cache:" + latent_storage_name(s) + tail,
                [=](benchmark::State& st) { bm_latte(st, isa, s, sh, n, t); });
        }
        if (t == 1 && n <= 4096 && sh.n_heads == 16)
          reg("mla_decode/ref/cache:f32" + tail, [=](benchmark::State& st) { bm_ref(st, sh, n); });
      }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  limits();  // measured before any entry runs
  benchmark::AddCustomContext("latte_active_isa", isa_name(active_isa()));
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  benchmark::AddCustomContext("omp_wait_policy", wait ? wait : "(unset)");  // oneDNN's baselines
  const char* spin = std::getenv("LATTE_POOL_SPIN_US");
  benchmark::AddCustomContext("latte_pool_spin_us", spin ? spin : "(unset)");
  char buf[256];
  const Limits& L = limits();
  for (int t : kThreads) {
    std::snprintf(buf, sizeof buf, "read %.2f GB/s, avx2 fma %.1f int8 %.1f, avx512 fma %.1f int8 %.1f GOP/s",
                  L.bw[t] / 1e9, L.fma[1][t] / 1e9, L.dot[1][t] / 1e9, L.fma[2][t] / 1e9, L.dot[2][t] / 1e9);
    benchmark::AddCustomContext("limits_threads_" + std::to_string(t), buf);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
