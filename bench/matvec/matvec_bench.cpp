// Weight x activation products: decode matvec bandwidth per type and ISA, and
// prefill matmul (our int8/f32 kernels) against oneDNN's f32 matmul on the
// dequantized weights.
//
//   bench_matvec --benchmark_filter=Matvec     GB/s of weight bytes read
//   bench_matvec --benchmark_filter=Matmul     GFLOP/s (2*tokens*rows*cols)
// Rates use real time; on a shared machine compare the CPU column too (the
// main thread's CPU time: robust for 1 thread, not meaningful for 2).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <vector>

#include "kernels/isa.h"
#include "kernels/matvec/matvec.h"
#include "quant/fp16.h"
#include "quant/ggml_blocks.h"
#include "tests/common/kernel_regions.h"
#include "tools/read_bandwidth.h"

namespace {

using latte::GgmlType;
using latte::Isa;

constexpr GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                               GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                               GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                               GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS};

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<std::uint8_t> make_weights(GgmlType t, std::size_t rows, std::size_t cols) {
  const std::size_t rb = latte::ggml_row_bytes(t, cols);
  std::vector<std::uint8_t> w(rows * rb);
  auto row = random_floats(cols, 1);
  for (std::size_t r = 0; r < rows; ++r) {
    row[r % cols] += 0.01f;  // rows differ a little; quantizing random data per row is slow
    latte::quantize_row_ref(t, row.data(), w.data() + r * rb, cols);
  }
  return w;
}

// A matrix's bytes, or copies of them past `past_bytes` (0: the one
// matrix), handed out one per iteration in turn, so that each product reads
// its weights from memory rather than from the LLC.
class WeightCopies {
 public:
  WeightCopies(const std::vector<std::uint8_t>& w, std::size_t past_bytes)
      : size_(w.size()), copies_(past_bytes ? past_bytes / w.size() + 1 : 1), all_(copies_ * size_) {
    for (std::size_t c = 0; c < copies_; ++c) std::copy(w.begin(), w.end(), all_.begin() + c * size_);
  }
  const std::uint8_t* next() {
    const std::uint8_t* p = all_.data() + next_ * size_;
    next_ = next_ + 1 == copies_ ? 0 : next_ + 1;
    return p;
  }

 private:
  std::size_t size_, copies_, next_ = 0;
  std::vector<std::uint8_t> all_;
};

// One matrix (in the LLC when it fits: the kernel's compute ceiling), or,
// with from_dram, copies of it past 512 MB read in turn (the weights from
// memory, as in a model's decode). Counters: GB/s of weight bytes, and
// Gw/thr, G weights per second per thread, against ReadStream's limit.
// x16: the weights row-interleaved (matvec.h), through matmul_x16.
// args: isa, type, rows, cols, threads
void matvec_bench(benchmark::State& state, bool from_dram, bool x16) {
  const auto isa = static_cast<Isa>(state.range(0));
  const auto type = static_cast<GgmlType>(state.range(1));
  const std::size_t rows = state.range(2), cols = state.range(3);
  const int threads = static_cast<int>(state.range(4));
  const auto& k = latte::kernels::matvec_kernels(isa);
  auto w = make_weights(type, rows, cols);
  if (x16) latte::test::x16_interleave(type, w.data(), rows, cols);
  WeightCopies wc(w, from_dram ? std::size_t{512} << 20 : 0);
  auto x = random_floats(cols, 2);
  std::vector<float> y(rows);
  std::vector<std::uint8_t> scratch((x16 ? latte::kernels::matvec_scratch_bytes_x16(type, cols, 1)
                                         : latte::kernels::matvec_scratch_bytes(type, cols, 1)) + 1);
  for (auto _ : state) {
    latte::test::matmul_on_threads(k, type, wc.next(), rows, cols, x.data(), cols, 1, y.data(), rows, scratch.data(),
                                   threads, x16);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * w.size()));
  state.counters["Gw/thr"] = benchmark::Counter(static_cast<double>(rows * cols) * state.iterations() / 1e9 / threads,
                                                benchmark::Counter::kIsRate);
  state.SetLabel(std::string(latte::isa_name(isa)) + " " + latte::ggml_type_name(type) + (x16 ? " x16" : ""));
}
void BM_Matvec(benchmark::State& state) { matvec_bench(state, false, false); }
void BM_MatvecDram(benchmark::State& state) { matvec_bench(state, true, false); }
void BM_MatvecX16(benchmark::State& state) { matvec_bench(state, false, true); }
void BM_MatvecDramX16(benchmark::State& state) { matvec_bench(state, true, true); }

// The roofline for Matvec: a plain sum over as many bytes, each thread one
// contiguous half, the way the static row split streams a matrix.
// args: bytes, threads
void BM_ReadStream(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0)) / sizeof(std::uint32_t);
  const int threads = static_cast<int>(state.range(1));
  std::vector<std::uint32_t> buf(n, 1);
  for (auto _ : state) benchmark::DoNotOptimize(latte::read_words(buf.data(), n, threads));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(std::uint32_t)));
}

// Matmul over one matrix, which stays in the LLC between iterations; or,
// with from_dram, with the weights coming from memory, as in a model (where
// each matrix is read once per chunk and the others evict it from the LLC):
// the matrix copied until the copies exceed 256 MB, one copy per iteration
// in turn. Few-token products are where the two differ: the packed GEMM
// reads a tile's rows a column chunk at a time, 32 short runs, where the row
// kernels read each row whole. x16: the weights row-interleaved, through
// matmul_x16 (a batched decode step's products, where the tile kernels take
// a pass of up to 8 tokens over each tile held in cache).
// args: isa, type, rows, cols, tokens, threads
void matmul_bench(benchmark::State& state, bool from_dram, bool x16 = false) {
  const auto isa = static_cast<Isa>(state.range(0));
  const auto type = static_cast<GgmlType>(state.range(1));
  const std::size_t rows = state.range(2), cols = state.range(3), nt = state.range(4);
  const int threads = static_cast<int>(state.range(5));
  const auto& k = latte::kernels::matvec_kernels(isa);
  auto w = make_weights(type, rows, cols);
  if (x16) latte::test::x16_interleave(type, w.data(), rows, cols);
  WeightCopies wc(w, from_dram ? std::size_t{256} << 20 : 0);
  auto x = random_floats(nt * cols, 2);
  std::vector<float> y(nt * rows);
  std::vector<std::uint8_t> scratch((x16 ? latte::kernels::matvec_scratch_bytes_x16(type, cols, nt)
                                         : latte::kernels::matvec_scratch_bytes(type, cols, nt)) + 1);
  for (auto _ : state) {
    latte::test::matmul_on_threads(k, type, wc.next(), rows, cols, x.data(), cols, nt, y.data(), rows, scratch.data(),
                                   threads, x16);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  if (x16) state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * w.size()));
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * nt * rows * cols * state.iterations() / 1e9,
                                                benchmark::Counter::kIsRate);
  state.SetLabel(std::string(latte::isa_name(isa)) + " " + latte::ggml_type_name(type) + (x16 ? " x16" : ""));
}
void BM_Matmul(benchmark::State& state) { matmul_bench(state, false); }

void BM_MatmulDram(benchmark::State& state) { matmul_bench(state, true); }
void BM_MatmulDramX16(benchmark::State& state) { matmul_bench(state, true, true); }

// oneDNN matmul: Y[nt, rows] = X[nt, cols] * W^T, W dequantized [rows, cols]
// and stored in `wdt` (f32, or bf16: 2 bytes/weight like F16 files, uses
// AVX512_BF16 where the CPU has it); X is given in the same type (for bf16 the
// per-call f32->bf16 conversion of X is not timed). Y is f32.
// args: rows, cols, tokens, threads, bf16 (0/1)
void BM_MatmulOneDnn(benchmark::State& state) {
  const dnnl::memory::dim rows = state.range(0), cols = state.range(1), nt = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const bool bf16 = state.range(4) != 0;
  omp_set_num_threads(threads);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const dt in = bf16 ? dt::bf16 : dt::f32;
  dnnl::memory::desc src_md({nt, cols}, in, tag::ab);
  dnnl::memory::desc wei_md({cols, rows}, in, tag::ba);  // [rows][cols] in memory
  dnnl::memory::desc dst_md({nt, rows}, dt::f32, tag::ab);
  auto x = random_floats(nt * cols, 2);
  auto w = random_floats(rows * cols, 3);
  std::vector<std::uint16_t> xb(x.size()), wb(w.size());
  for (std::size_t i = 0; i < x.size(); ++i) xb[i] = latte::f32_to_bf16(x[i]);
  for (std::size_t i = 0; i < w.size(); ++i) wb[i] = latte::f32_to_bf16(w[i]);
  std::vector<float> y(nt * rows);
  void* xp = bf16 ? static_cast<void*>(xb.data()) : x.data();
  void* wp = bf16 ? static_cast<void*>(wb.data()) : w.data();
  dnnl::memory src(src_md, eng, xp), wei(wei_md, eng, wp), dst(dst_md, eng, y.data());
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_md, dst_md), eng);
  dnnl::matmul mm(pd);
  for (auto _ : state) {
    mm.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
    strm.wait();
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * nt * rows * cols * state.iterations() / 1e9,
                                                benchmark::Counter::kIsRate);
  state.SetLabel(std::string("onednn ") + (bf16 ? "bf16" : "f32") + " " + pd.impl_info_str());
}

// The cost of producing the f32 weights oneDNN's f32 path needs, per call,
// when they are not kept resident (dequantize the whole matrix once, with the
// kernel the session's prefill uses for its panels).
// args: type, rows, cols
void BM_DequantizeMatrix(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const std::size_t rows = state.range(1), cols = state.range(2);
  const auto& k = latte::kernels::matvec_kernels(latte::active_isa());
  auto w = make_weights(type, rows, cols);
  std::vector<float> out(rows * cols);
  for (auto _ : state) {
    k.dequantize(type, w.data(), out.data(), rows * cols);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(std::string(latte::isa_name(latte::active_isa())) + " dequantize " + latte::ggml_type_name(type));
}

void register_all() {
  for (Isa isa : latte::supported_isas()) {
    if (isa == Isa::ref) continue;
    for (GgmlType t : kTypes) {
      // 2048x2048 (attention-sized) and 10944x2048 (V2-Lite dense FFN up/gate).
      for (long rows : {2048L, 10944L})
        for (long threads : {1L, 2L})
          benchmark::RegisterBenchmark("Matvec", BM_Matvec)
              ->Args({static_cast<long>(isa), static_cast<long>(t), rows, 2048, threads})
              ->ArgNames({"isa", "type", "rows", "cols", "thr"})
              ->MinTime(0.2)
              ->UseRealTime();
    }
  }
  // Decode's weights from memory: the types real GGUF files carry, at the
  // shape of a V2-Lite expert's down projection and of its attention.
  for (Isa isa : latte::supported_isas()) {
    if (isa == Isa::ref) continue;
    for (GgmlType t : kTypes)
      for (long threads : {1L, 2L})
        benchmark::RegisterBenchmark("MatvecDram", BM_MatvecDram)
            ->Args({static_cast<long>(isa), static_cast<long>(t), 2048, 2048, threads})
            ->ArgNames({"isa", "type", "rows", "cols", "thr"})
            ->MinTime(0.3)
            ->UseRealTime();
  }
  // The same over row-interleaved weights, where the ISA has kernels for them.
  for (Isa isa : latte::supported_isas()) {
    const auto& k = latte::kernels::matvec_kernels(isa);
    for (GgmlType t : kTypes) {
      if (isa == Isa::ref || !k.x16_fast(t)) continue;
      for (long threads : {1L, 2L}) {
        benchmark::RegisterBenchmark("MatvecX16", BM_MatvecX16)
            ->Args({static_cast<long>(isa), static_cast<long>(t), 2048, 2048, threads})
            ->ArgNames({"isa", "type", "rows", "cols", "thr"})
            ->MinTime(0.2)
            ->UseRealTime();
        benchmark::RegisterBenchmark("MatvecDramX16", BM_MatvecDramX16)
            ->Args({static_cast<long>(isa), static_cast<long>(t), 2048, 2048, threads})
            ->ArgNames({"isa", "type", "rows", "cols", "thr"})
            ->MinTime(0.3)
            ->UseRealTime();
      }
    }
  }
  for (long threads : {1L, 2L})
    for (long bytes : {10944L * 2048 * 2, 1L << 30})  // the Matvec matrix's size; past the LLC
      benchmark::RegisterBenchmark("ReadStream", BM_ReadStream)
          ->Args({bytes, threads})
          ->ArgNames({"bytes", "thr"})
          ->MinTime(0.2)
          ->UseRealTime();
  const Isa best = latte::active_isa();
  for (GgmlType t : kTypes)
    for (long nt : {4L, 8L, 16L, 32L, 64L, 128L, 256L, 512L})
      for (long threads : {1L, 2L})
        benchmark::RegisterBenchmark("Matmul", BM_Matmul)
            ->Args({static_cast<long>(best), static_cast<long>(t), 2048, 2048, nt, threads})
            ->ArgNames({"isa", "type", "rows", "cols", "tok", "thr"})
            ->MinTime(0.2)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
  for (GgmlType t : kTypes)
    for (long nt : {2L, 3L, 4L, 6L, 8L, 12L, 16L})
      for (long threads : {1L, 2L})
        benchmark::RegisterBenchmark("MatmulDram", BM_MatmulDram)
            ->Args({static_cast<long>(best), static_cast<long>(t), 2048, 2048, nt, threads})
            ->ArgNames({"isa", "type", "rows", "cols", "tok", "thr"})
            ->MinTime(0.2)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
  for (GgmlType t : kTypes) {  // where the ISA has tile kernels for the type
    if (!latte::kernels::matvec_kernels(best).x16_fast(t)) continue;
    for (long nt : {1L, 4L, 8L, 16L})
      for (long threads : {1L, 2L})
        benchmark::RegisterBenchmark("MatmulDramX16", BM_MatmulDramX16)
            ->Args({static_cast<long>(best), static_cast<long>(t), 2560, 2560, nt, threads})
            ->ArgNames({"isa", "type", "rows", "cols", "tok", "thr"})
            ->MinTime(0.3)
            ->UseRealTime();
  }
  for (long bf16 : {0L, 1L})
    for (long nt : {16L, 32L, 64L, 128L, 256L, 512L})
      for (long threads : {1L, 2L})
        benchmark::RegisterBenchmark("MatmulOneDnn", BM_MatmulOneDnn)
            ->Args({2048, 2048, nt, threads, bf16})
            ->ArgNames({"rows", "cols", "tok", "thr", "bf16"})
            ->MinTime(0.2)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
  for (GgmlType t : kTypes)
    benchmark::RegisterBenchmark("DequantizeMatrix", BM_DequantizeMatrix)
        ->Args({static_cast<long>(t), 2048, 2048})
        ->ArgNames({"type", "rows", "cols"})
        ->MinTime(0.2)
        ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
