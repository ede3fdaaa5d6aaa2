#include "runtime/model/model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "kernels/matvec/matvec.h"
#include "platform/memory.h"
#include "platform/process.h"
#include "platform/thread_pool.h"
#include "quant/ggml_blocks.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/model/vocab.h"

namespace latte {

namespace {

std::string blk(int i, const char* name) { return "blk." + std::to_string(i) + "." + name + ".weight"; }

WeightRef ref_of(const GgufTensor& t) {
  // ne = {cols, rows, (heads/experts)}: a 3-D tensor is viewed as one tall matrix.
  const std::int64_t cols = static_cast<std::int64_t>(t.ne[0]);
  return {t.type, t.data, static_cast<std::int64_t>(t.n_elements / t.ne[0]), cols, t.row_bytes};
}

// What a load did, for the log: why the file was mapped rather than read
// (a slower decode), kernels slower than this CPU's best, then what was
// loaded and how.
void log_load(const Model& m, double seconds) {
  const GgufFile& f = m.file();
  if (!f.load_note().empty()) log_message(LogLevel::warn, f.path() + ": " + f.load_note());
  if (const std::string note = slower_isa_note(); !note.empty()) log_message(LogLevel::warn, note);
  if (!log_enabled(LogLevel::info)) return;
  char line[256];
  std::snprintf(line, sizeof line, ": %s, %d layers, %.2f B parameters, %.2f GiB %s in %.2f s, %s kernels",
                model_arch_name(m.params().arch), m.params().n_layers,
                static_cast<double>(m.parameter_count()) / 1e9, static_cast<double>(f.file_size()) / (1u << 30),
                f.private_data() ? "read into memory" : "mapped", seconds, isa_name(active_isa()));
  log_message(LogLevel::info, "loaded " + f.path() + line);
}

}  // namespace

Model::Model(GgufFile file) : file_(std::move(file)), params_(ModelParams::from_gguf(file_)) {}

std::shared_ptr<const Model> Model::load(const std::string& path, const LoadOptions& options) {
  if (path.empty()) throw Error(Status::invalid_argument, "load model: the path is empty");
  // Before the model takes its memory: an error in oneDNN's calls (a C++
  // exception through its pthread_once) must find the unwinder loaded, in
  // any app, under any memory limit (platform/process.h).
  preload_unwinder();
  const auto t0 = std::chrono::steady_clock::now();
  // The read is the first pass; where a second one follows, it is the first
  // half of the total.
  std::function<void(std::size_t, std::size_t)> on_read;
  if (options.on_progress) {
    const bool second = relayout_pass(options);
    on_read = [&options, second](std::size_t done, std::size_t size) {
      options.on_progress(done, second ? 2 * size : size);
    };
  }
  std::shared_ptr<const Model> m = from_file(GgufFile::open(path, options.file, on_read), options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log_load(*m, seconds);
  return m;
}

std::uint64_t Model::parameter_count() const {
  std::uint64_t n = 0;
  for (const GgufTensor& t : file_.tensors()) n += t.n_elements;
  return n;
}

bool Model::relayout_pass(const LoadOptions& options) {
  if (!options.interleave) return false;
  const auto& k = kernels::matvec_kernels(active_isa());
  for (std::uint32_t id = 0; id < 64; ++id)
    if (const auto info = ggml_type_info(id); info && k.x16_fast(info->type)) return true;
  return false;
}

std::shared_ptr<const Model> Model::from_file(GgufFile file, const LoadOptions& options) {
  std::shared_ptr<Model> m(new Model(std::move(file)));
  const bool second = m->file_.private_data() && relayout_pass(options);
  m->progress_total_ = std::uint64_t{m->file_.file_size()} * (second ? 2 : 1);
  m->bind(options);
  if (second) m->interleave(options);
  // The copy is read-only now, its last protection change made: its pages'
  // first access is paid here, in the load, not by the first prompt.
  if (m->file_.private_data()) touch_pages(m->file_.private_data(), m->file_.file_size());
  if (gguf_has_vocab(m->file_)) {
    m->tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::create(vocab_from_gguf(m->file_)));
    if (m->tokenizer_->n_vocab() > m->params_.n_vocab)
      throw Error(Status::bad_file, "tokenizer.ggml.tokens has " + std::to_string(m->tokenizer_->n_vocab()) +
                                        " tokens, more than the model's vocabulary of " +
                                        std::to_string(m->params_.n_vocab));
  }
  return m;
}

std::size_t Model::packed_weight_bytes() const {
  std::size_t n = 0;
  for (const auto& p : packed_) n += p.size();
  return n;
}

std::uint64_t Model::fingerprint(int threads) const {
  if (fingerprint_ready_.load(std::memory_order_acquire)) return fingerprint_;
  const std::lock_guard<std::mutex> lock(fingerprint_mutex_);
  if (!fingerprint_ready_.load(std::memory_order_relaxed)) {  // a failure leaves it to the next call
    fingerprint_ = file_fingerprint(file_.file_data(), file_.file_size(), relaid_, threads);
    fingerprint_ready_.store(true, std::memory_order_release);
  }
  return fingerprint_;
}

std::size_t Model::expert_bytes() const {
  auto bytes = [](const WeightRef& w) { return static_cast<std::size_t>(w.rows) * w.row_bytes; };
  for (int il = 0; il < params_.n_layers; ++il)
    if (params_.is_moe_layer(il)) {
      const LayerWeights& L = layers_[il];
      return bytes(L.exp_gate.head) + bytes(L.exp_up.head) + bytes(L.exp_down.head);
    }
  return 0;
}

std::size_t Model::decode_weight_bytes() const {
  auto bytes = [](const WeightRef& w) { return static_cast<std::size_t>(w.rows) * w.row_bytes; };
  auto ffn = [&](const FfnWeights& f) { return bytes(f.gate) + bytes(f.up) + bytes(f.down); };
  const int nh = params_.mla.n_heads;
  std::size_t n = bytes(output_) + bytes(output_tail_) + token_embd_.row_bytes;
  for (int il = 0; il < params_.n_layers; ++il) {
    const LayerWeights& L = layers_[il];
    n += bytes(L.wq) + bytes(L.wq_a) + bytes(L.wq_b) + bytes(L.wkv_a) + bytes(L.wo);
    n += static_cast<std::size_t>(nh) * (bytes(L.wuk_t.head) + bytes(L.wuv.head));
    if (params_.is_moe_layer(il)) {
      const std::size_t expert = bytes(L.exp_gate.head) + bytes(L.exp_up.head) + bytes(L.exp_down.head);
      n += bytes(L.gate_inp) + ffn(L.shared) + static_cast<std::size_t>(params_.n_experts_used) * expert;
    } else {
      n += ffn(L.dense);
    }
  }
  return n;
}

// The matrices decode streams through the weight multiply, re-laid out in
// the private copy where the active ISA has x16 kernels for their type: every
// layer's attention and FFN matrices, the per-head W_UK^T and W_UV where the
// file holds them apart (attn_k_b, attn_v_b), each head's W_UV rows inside
// attn_kv_b where it holds them there (legacy files: the heads' rows lie
// apart, so each head is relaid alone), the experts (each head's or
// expert's rows a multiple of 16, so each is a tile-aligned slice) and the
// output matrix, also where it is the embedding table (the graph takes a
// token's row out of its tile). Each is listed in relaid_:
// the fingerprint is of the file's bytes, so it takes them back to the
// file's layout as it hashes them (a saved session names the same model
// whether it was mapped or read). In file order, in slices of at most 64
// MiB (whole tiles of 16 rows), the load's progress told after each: the
// second pass over the file's bytes, up to the slice's end (LoadOptions).
void Model::interleave(const LoadOptions& options) {
  const auto& k = kernels::matvec_kernels(active_isa());
  const std::uint8_t* lo = file_.private_data();
  const std::uint8_t* hi = lo + file_.file_size();
  struct Item {
    WeightRef* w;               // the matrix, or a stack's first head or expert (head), flagged x16
    const std::uint8_t* data;   // the rows relaid: w's, or one head's of a stack whose heads lie apart
    std::int64_t rows;          // rows from data: the whole tensor, or one head's
  };
  std::vector<Item> items;
  auto eligible = [&](const WeightRef& w, const std::uint8_t* data, std::int64_t rows) {
    if (w.empty() || !k.x16_fast(w.type) || w.rows % 16 != 0) return false;
    return data >= lo && data + static_cast<std::size_t>(rows) * w.row_bytes <= hi;  // else a copy of ours
  };
  auto add = [&](WeightRef& w, std::int64_t rows) {
    if (eligible(w, w.data, rows)) items.push_back({&w, w.data, rows});
  };
  auto add_ffn = [&](FfnWeights& f) {
    add(f.gate, f.gate.rows);
    add(f.up, f.up.rows);
    add(f.down, f.down.rows);
  };
  // count heads or experts: back to back, relaid as one matrix; apart (a
  // legacy attn_kv_b's W_UV rows between its W_UK rows), each alone, all or none.
  auto add_stack = [&](HeadWeights& h, std::int64_t count) {
    const std::size_t bytes = static_cast<std::size_t>(h.head.rows) * h.head.row_bytes;
    if (h.stride == bytes) return add(h.head, h.head.rows * count);
    if (h.stride < bytes) return;
    for (std::int64_t i = 0; i < count; ++i)
      if (!eligible(h.head, h.head.data + i * h.stride, h.head.rows)) return;
    for (std::int64_t i = 0; i < count; ++i) items.push_back({&h.head, h.head.data + i * h.stride, h.head.rows});
  };
  // An output head of rows not in whole tiles: its whole tiles relaid, the
  // last rows % 16 left as they are (a vocabulary of 73,448: MiniCPM3's).
  if (const std::int64_t whole = output_.rows / 16 * 16; whole > 0 && whole < output_.rows) {
    if (const WeightRef tiles = output_.row_slice(0, whole); eligible(tiles, tiles.data, whole)) {
      output_tail_ = output_.row_slice(whole, output_.rows - whole);
      output_ = tiles;
    }
  }
  add(output_, output_.rows);
  for (LayerWeights& l : layers_) {
    for (WeightRef* w : {&l.wq, &l.wq_a, &l.wq_b, &l.wkv_a, &l.wo}) add(*w, w->rows);
    add_ffn(l.dense);
    add_ffn(l.shared);
    add_stack(l.wuk_t, params_.mla.n_heads);
    add_stack(l.wuv, params_.mla.n_heads);
    add_stack(l.exp_gate, params_.n_experts);
    add_stack(l.exp_up, params_.n_experts);
    add_stack(l.exp_down, params_.n_experts);
  }
  const std::size_t size = file_.file_size();
  auto report = [&](std::size_t file_bytes) {
    if (options.on_progress) options.on_progress(size + file_bytes, 2 * size);
  };
  if (items.empty()) return;
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.data < b.data; });
  try {
    relaid_.reserve(items.size());
  } catch (const std::bad_alloc&) {
    throw Error(Status::out_of_memory, "re-laying out the weights: cannot allocate the list of " +
                                           std::to_string(items.size()) + " matrices");
  }
  std::vector<std::uint8_t> tmp;  // (threads, 16 rows) the interleave's temporary tiles
  file_.edit_private_data([&](std::uint8_t* data) {
    for (const Item& it : items) {
      WeightRef& w = *it.w;
      constexpr std::size_t kSlice = std::size_t{64} << 20;
      const std::size_t rows = static_cast<std::size_t>(it.rows), offset = static_cast<std::size_t>(it.data - lo);
      const std::size_t step = std::max<std::size_t>(16, kSlice / w.row_bytes / 16 * 16);
      for (std::size_t r0 = 0; r0 < rows; r0 += step) {
        const std::size_t n = std::min(step, rows - r0);
        // Whole tiles per thread of the calling thread's pool, 16 rows of
        // temporary memory each, allocated before the region (its slots
        // call nothing that throws).
        const std::size_t tiles = n / 16;
        const int team = static_cast<int>(std::min<std::size_t>(current_pool_threads(), std::max<std::size_t>(tiles, 1)));
        try {
          if (tmp.size() < team * 16 * w.row_bytes) tmp.resize(team * 16 * w.row_bytes);
        } catch (const std::bad_alloc&) {
          throw Error(Status::out_of_memory, "re-laying out the weights: out of memory");
        }
        std::uint8_t* slice = data + offset + r0 * w.row_bytes;
        parallel_slots(team, [&](int t, int nt) {
          const std::size_t i0 = tiles * t / nt, i1 = tiles * (t + 1) / nt;
          kernels::matvec_x16_interleave(w.type, slice + i0 * 16 * w.row_bytes, (i1 - i0) * 16,
                                         static_cast<std::size_t>(w.cols),
                                         tmp.data() + static_cast<std::size_t>(t) * 16 * w.row_bytes);
        });
        report(offset + (r0 + n) * w.row_bytes);
      }
      w.x16 = true;
      interleaved_bytes_ += static_cast<std::size_t>(it.rows) * w.row_bytes;
      relaid_.push_back({offset, w.type, static_cast<std::size_t>(it.rows),
                         static_cast<std::size_t>(w.cols)});
    }
  });
  std::sort(relaid_.begin(), relaid_.end(),
            [](const RelaidMatrix& a, const RelaidMatrix& b) { return a.offset < b.offset; });
  if (token_embd_.data == output_.data) token_embd_.x16 = output_.x16;  // tied: one table
}

void Model::bind(const LoadOptions& options) {
  const ModelParams& p = params_;
  const MlaConfig& m = p.mla;
  const std::uint64_t d = m.d_model, nh = m.n_heads, dc = m.kv_lora_rank, dr = m.d_rope;
  const std::uint64_t dn = m.d_nope, dv = m.d_v, qh = m.q_head_dim(), V = p.n_vocab;
  // Progress in bytes of the file: the header, then each tensor bound. A
  // file read into memory said its progress as it was read.
  const std::size_t file_bytes = file_.file_size();
  std::size_t done = static_cast<std::size_t>(std::min<std::uint64_t>(file_.data_offset(), file_bytes));
  const bool report = options.on_progress && !file_.private_data();
  auto tick = [&](const GgufTensor& t) {
    done = static_cast<std::size_t>(std::min<std::uint64_t>(done + t.n_bytes, file_bytes));
    if (report) options.on_progress(done, file_bytes);
  };
  // A buffer the model owns: a failed allocation names what it was for and
  // its size (a misaligned tensor of a large file can ask for gigabytes).
  auto own = [&](std::size_t bytes, const std::string& what) -> std::uint8_t* {
    try {
      return packed_.emplace_back(bytes).data();
    } catch (const std::bad_alloc&) {
      throw Error(Status::out_of_memory, what + ": cannot allocate " + std::to_string(bytes) + " bytes");
    } catch (const std::length_error&) {
      throw Error(Status::out_of_memory, what + ": cannot allocate " + std::to_string(bytes) + " bytes");
    }
  };
  // A tensor is read in place through pointers of its element type: 4-byte
  // aligned for F32, 2 for the 16-bit fields of every other type. A file
  // with general.alignment 1 or 2 may place one off that: copied once here.
  auto in_place = [&](const GgufTensor& t) -> const std::uint8_t* {
    const std::uintptr_t need = t.type == GgmlType::F32 ? 4 : 2;
    if (reinterpret_cast<std::uintptr_t>(t.data) % need == 0) {
      mapped_bytes_ += t.n_bytes;
      return t.data;
    }
    std::uint8_t* copy = own(static_cast<std::size_t>(t.n_bytes),
                             "tensor '" + std::string(t.name) + "' (misaligned in the file): its aligned copy");
    std::memcpy(copy, t.data, static_cast<std::size_t>(t.n_bytes));
    return copy;
  };
  auto matrix = [&](const std::string& name, std::initializer_list<std::uint64_t> ne) {
    const GgufTensor& t = file_.require_tensor(name, ne);
    tick(t);
    WeightRef r = ref_of(t);
    r.data = in_place(t);
    return r;
  };
  // Norm weights are read as f32 vectors: used in place when stored as F32.
  auto vec = [&](const std::string& name, std::uint64_t n) -> const float* {
    const GgufTensor& t = file_.require_tensor(name, {n});
    tick(t);
    const std::uint8_t* data = in_place(t);
    if (t.type == GgmlType::F32) return reinterpret_cast<const float*>(data);
    float* f = reinterpret_cast<float*>(own(n * sizeof(float), "tensor '" + name + "': its f32 copy"));
    dequantize_row_ref(t.type, data, f, n);
    return f;
  };
  int layer_bound = 0;  // the layer being bound, for messages
  // All heads of `src` stacked as one f32 matrix (heads*rows, cols); `transpose`
  // takes each head's transpose first.
  auto pack_f32 = [&](const HeadWeights& src, int heads, bool transpose) -> const float* {
    const std::int64_t rin = src.head.rows, cin = src.head.cols;
    float* out = reinterpret_cast<float*>(own(static_cast<std::size_t>(heads) * rin * cin * sizeof(float),
                                              "layer " + std::to_string(layer_bound) +
                                                  ": the f32 copy of its attention's per-head weights"));
    std::vector<float> in(static_cast<std::size_t>(rin) * cin);  // (rows_in, cols_in)
    for (int h = 0; h < heads; ++h) {
      const WeightRef w = src[h];
      for (std::int64_t r = 0; r < rin; ++r)
        dequantize_row_ref(w.type, w.data + r * w.row_bytes, in.data() + r * cin, cin);
      float* oh = out + static_cast<std::size_t>(h) * rin * cin;
      if (!transpose) std::copy(in.begin(), in.end(), oh);
      else
        for (std::int64_t c = 0; c < cin; ++c)
          for (std::int64_t r = 0; r < rin; ++r) oh[c * rin + r] = in[r * cin + c];
    }
    return out;
  };
  // Per head, the transpose of `src` head h (rows_in, cols_in) as (cols_in, rows_in),
  // in f32: exact for every source type (an F16 copy of dequantized Q8_0 values
  // is not, and flipped greedy tokens in the legacy-layout Q8_0 test).
  auto pack_transposed = [&](const HeadWeights& src, int heads) {
    const std::int64_t rin = src.head.rows, cin = src.head.cols;
    const float* f = pack_f32(src, heads, /*transpose=*/true);
    HeadWeights hw;
    hw.head = {GgmlType::F32, reinterpret_cast<const std::uint8_t*>(f), cin, rin, static_cast<std::size_t>(rin) * 4};
    hw.stride = static_cast<std::size_t>(rin) * cin * 4;
    return hw;
  };

  token_embd_ = matrix("token_embd.weight", {d, V});
  output_norm_ = vec("output_norm.weight", d);
  if (file_.find_tensor("output.weight")) output_ = matrix("output.weight", {d, V});
  else output_ = token_embd_;  // tied embeddings (plm; allowed for any)

  if (p.arch == ModelArch::minicpm3) {
    for (auto [name, dst] : {std::pair{"rope_factors_long.weight", &rope_long_},
                             std::pair{"rope_factors_short.weight", &rope_short_}}) {
      if (!file_.find_tensor(name)) continue;
      const float* f = vec(name, dr / 2);
      dst->assign(f, f + dr / 2);
    }
  }

  layers_.resize(p.n_layers);
  for (int i = 0; i < p.n_layers; ++i) {
    LayerWeights& l = layers_[i];
    layer_bound = i;
    l.attn_norm = vec(blk(i, "attn_norm"), d);
    l.ffn_norm = vec(blk(i, "ffn_norm"), d);
    if (file_.find_tensor(blk(i, "attn_q_a"))) {
      if (m.q_lora_rank == 0)
        throw Error(Status::bad_file, "tensor '" + blk(i, "attn_q_a") + "' present but q_lora_rank is 0");
      const std::uint64_t ql = m.q_lora_rank;
      l.wq_a = matrix(blk(i, "attn_q_a"), {d, ql});
      l.q_a_norm = vec(blk(i, "attn_q_a_norm"), ql);
      l.wq_b = matrix(blk(i, "attn_q_b"), {ql, nh * qh});
    } else {
      // A q_lora_rank the tensors do not use would be reported (latte info)
      // but not run: the file contradicts itself.
      if (m.q_lora_rank != 0)
        throw Error(Status::bad_file, "tensor '" + blk(i, "attn_q_a") + "' absent (a plain '" + blk(i, "attn_q") +
                                          "' instead) but " + model_arch_name(p.arch) +
                                          ".attention.q_lora_rank is " + std::to_string(m.q_lora_rank));
      l.wq = matrix(blk(i, "attn_q"), {d, nh * qh});
    }
    l.wkv_a = matrix(blk(i, "attn_kv_a_mqa"), {d, dc + dr});
    l.kv_a_norm = vec(blk(i, "attn_kv_a_norm"), dc);
    if (p.kv_layout == KvLayout::split) {
      const WeightRef kb = matrix(blk(i, "attn_k_b"), {dn, dc, nh});  // per head (d_c, d_nope)
      l.wuk_t = {kb.row_slice(0, dc), dc * kb.row_bytes};
      const WeightRef vb = matrix(blk(i, "attn_v_b"), {dc, dv, nh});  // per head (d_v, d_c)
      l.wuv = {vb.row_slice(0, dv), dv * vb.row_bytes};
      l.naive_wuk = pack_f32(l.wuk_t, nh, /*transpose=*/true);
      l.naive_wuv = vb.type == GgmlType::F32 ? reinterpret_cast<const float*>(vb.data) : pack_f32(l.wuv, nh, false);
    } else {
      const WeightRef kvb = matrix(blk(i, "attn_kv_b"), {dc, nh * (dn + dv)});
      const std::size_t stride = (dn + dv) * kvb.row_bytes;
      const HeadWeights wuk{kvb.row_slice(0, dn), stride};
      l.wuv = {kvb.row_slice(dn, dv), stride};
      l.wuk_t = pack_transposed(wuk, nh);
      l.naive_wuk = pack_f32(wuk, nh, false);
      l.naive_wuv = pack_f32(l.wuv, nh, false);
    }
    l.wo = matrix(blk(i, "attn_output"), {nh * dv, d});

    auto ffn = [&](FfnWeights& f, const char* gate, const char* up, const char* down, std::uint64_t ff) {
      if (p.ffn_kind == FfnKind::swiglu) f.gate = matrix(blk(i, gate), {d, ff});
      f.up = matrix(blk(i, up), {d, ff});
      f.down = matrix(blk(i, down), {ff, d});
    };
    if (!p.is_moe_layer(i)) {
      ffn(l.dense, "ffn_gate", "ffn_up", "ffn_down", p.ff_dense);
    } else {
      const std::uint64_t ne = p.n_experts, ff = p.ff_expert;
      l.gate_inp = matrix(blk(i, "ffn_gate_inp"), {d, ne});
      const std::string bias = "blk." + std::to_string(i) + ".exp_probs_b.bias";
      if (file_.find_tensor(bias)) l.exp_bias = vec(bias, ne);
      const WeightRef g = matrix(blk(i, "ffn_gate_exps"), {d, ff, ne});
      const WeightRef u = matrix(blk(i, "ffn_up_exps"), {d, ff, ne});
      const WeightRef dw = matrix(blk(i, "ffn_down_exps"), {ff, d, ne});
      l.exp_gate = {g.row_slice(0, ff), ff * g.row_bytes};
      l.exp_up = {u.row_slice(0, ff), ff * u.row_bytes};
      l.exp_down = {dw.row_slice(0, d), d * dw.row_bytes};
      if (p.n_experts_shared > 0)
        ffn(l.shared, "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp", ff * p.n_experts_shared);
    }
  }
}

}  // namespace latte
