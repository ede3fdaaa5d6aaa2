// A loaded MLA model: the GGUF file mapped read-only, its weights used in
// place where a kernel reads their format, and packed once at load where a
// kernel wants another layout (read into private memory, the matrices decode
// streams are re-laid out there, row-interleaved, for this CPU's kernels).
// Read-only after load (but for its fingerprint, computed once on first use,
// under a lock): any number of sessions on any threads share one Model.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "quant/ggml_types.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/model/fingerprint.h"
#include "runtime/model/model_params.h"
#include "runtime/tokenizer/tokenizer.h"

namespace latte {

// A weight matrix W (rows, cols) for y = W x: `rows` rows of `cols` elements
// of `type`, each `row_bytes` long, row r at data + r * row_bytes.
struct WeightRef {
  GgmlType type = GgmlType::F32;
  const std::uint8_t* data = nullptr;
  std::int64_t rows = 0, cols = 0;
  std::size_t row_bytes = 0;
  // Row-interleaved by 16 (kernels/matvec/matvec.h, x16): same size and row
  // offsets, read only through matmul_x16; slices start at multiples of 16.
  bool x16 = false;

  bool empty() const { return data == nullptr; }
  // Rows [r0, r0 + n) as a matrix of its own.
  WeightRef row_slice(std::int64_t r0, std::int64_t n) const {
    return {type, data + static_cast<std::size_t>(r0) * row_bytes, n, cols, row_bytes, x16};
  }
};

// Per-head matrices: head h is `head` with data advanced by h * stride bytes.
struct HeadWeights {
  WeightRef head;
  std::size_t stride = 0;
  WeightRef operator[](int h) const {
    WeightRef w = head;
    w.data += static_cast<std::size_t>(h) * stride;
    return w;
  }
};

struct FfnWeights {
  WeightRef gate, up, down;  // (ff, d), (ff, d), (d, ff); gate empty for relu^2
};

struct LayerWeights {
  const float* attn_norm = nullptr;   // (d)
  const float* ffn_norm = nullptr;    // (d)
  WeightRef wq;                       // (n_h*(d_nope+d_R), d)   no q_lora
  WeightRef wq_a;                     // (q_lora, d)
  const float* q_a_norm = nullptr;    // (q_lora)
  WeightRef wq_b;                     // (n_h*(d_nope+d_R), q_lora)
  WeightRef wkv_a;                    // (d_c + d_R, d)
  const float* kv_a_norm = nullptr;   // (d_c)
  HeadWeights wuk_t;                  // per head (d_c, d_nope): q_lat = W_UK_h^T q_nope   (absorbed)
  HeadWeights wuv;                    // per head (d_v, d_c):    o_h = W_UV_h o_lat         (absorbed)
  // The naive form decompresses a block of cached latents for all heads in
  // one f32 GEMM: K_nope (B, n_h*d_nope) = C (B, d_c) W_UK^T, likewise V.
  const float* naive_wuk = nullptr;   // (n_h*d_nope, d_c), packed f32
  const float* naive_wuv = nullptr;   // (n_h*d_v, d_c), packed f32 (in place when F32 and contiguous)
  WeightRef wo;                       // (d, n_h*d_v)
  FfnWeights dense;
  WeightRef gate_inp;                 // (n_exp, d)
  const float* exp_bias = nullptr;    // (n_exp) or null
  HeadWeights exp_gate, exp_up;       // per expert (ff_exp, d)
  HeadWeights exp_down;               // per expert (d, ff_exp)
  FfnWeights shared;                  // shared experts fused: (ff_exp*n_shared, d) ...
};

struct LoadOptions {
  // Called while loading with (bytes done, bytes in all): mapped, up to the
  // file's size as its tensors are bound; read into memory, up to its size
  // as it is read in (GgufLoad::read), then, where the load re-lays out
  // weights (`interleave` on a CPU with x16 kernels: Model::relayout_pass),
  // a second pass up to twice its size: the file's bytes again, up to the
  // end of each matrix as it is re-laid out. Monotonic; the caller says
  // the end (Model::load_progress_total). May be empty. It may throw
  // (Error(aborted): a cancelled load) to stop the load, in any phase;
  // everything the load took is given back.
  std::function<void(std::size_t, std::size_t)> on_progress;
  // Map the file (default) or read it into huge pages (GgufLoad::read).
  GgufLoad file = GgufLoad::map;
  // With GgufLoad::read: re-lay out the matrices decode streams, in place,
  // row-interleaved where the active ISA's kernels read that faster (x16).
  bool interleave = true;
};

class Model {
 public:
  // Maps (or reads) and validates the file: architecture, every tensor's
  // presence, type and shape. latte::Error naming the key or tensor on
  // failure; invalid_argument for an empty path. Logs (runtime/log.h) why a
  // file was mapped rather than read, kernels slower than the CPU's best,
  // and what was loaded.
  static std::shared_ptr<const Model> load(const std::string& path, const LoadOptions& options = {});
  static std::shared_ptr<const Model> from_file(GgufFile file, const LoadOptions& options = {});
  // Whether a load read into memory with `options` takes the second pass
  // that re-lays out weights (LoadOptions::interleave on a CPU whose
  // kernels have an x16 layout), whatever the file holds.
  static bool relayout_pass(const LoadOptions& options);
  // The bytes_total of this model's load progress (LoadOptions::on_progress):
  // the file's size, twice it where it was read and took the second pass.
  std::uint64_t load_progress_total() const { return progress_total_; }

  const ModelParams& params() const { return params_; }
  const GgufFile& file() const { return file_; }
  const LayerWeights& layer(int i) const { return layers_[i]; }
  // (n_vocab, d). x16 where it is the output head too (tied) and was relaid:
  // then its rows below n_vocab / 16 * 16 lie in x16 tiles, the rest as the
  // file holds them.
  const WeightRef& token_embd() const { return token_embd_; }
  const float* output_norm() const { return output_norm_; }  // (d)
  // The output head: (n_vocab, d), or where it was relaid and n_vocab is not
  // a multiple of 16 (x16 takes whole tiles) its rows in whole tiles, x16,
  // and output_tail() the last n_vocab % 16, as the file holds them.
  const WeightRef& output() const { return output_; }
  const WeightRef& output_tail() const { return output_tail_; }  // (n_vocab % 16, d) or empty
  // minicpm3: per-pair rope frequency factors (long / short), else empty.
  const std::vector<float>& rope_factors(bool long_context) const {
    return long_context ? rope_long_ : rope_short_;
  }
  // The file's tokenizer; null if it has none (then only token ids work).
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  // The elements of every tensor in the file: the parameter count.
  std::uint64_t parameter_count() const;
  // Bytes of the weights mapped from the file and packed at load.
  std::size_t mapped_weight_bytes() const { return mapped_bytes_; }
  std::size_t packed_weight_bytes() const;
  // Matrix bytes one decode step streams: every layer's matrices as the
  // decode path reads them (packed copies included, prefill-only packs not),
  // the routed experts counted n_experts_used times, the output matrix and
  // one embedding row. Decode at depth 0 is bound by reading these, so
  // bytes x tok/s against the machine's read bandwidth is its efficiency.
  std::size_t decode_weight_bytes() const;
  // Bytes of one routed expert (gate, up and down) of an MoE layer; 0
  // without MoE layers. decode_weight_bytes counts n_experts_used of them
  // per MoE layer.
  std::size_t expert_bytes() const;
  // A 64-bit hash of every byte of the model file as the file holds it
  // (runtime/model/fingerprint.h): a saved session names the model it
  // belongs to by it, so any other weights (another model, another
  // fine-tune of the same shapes, one weight edited anywhere) give another
  // value, and a file mapped or read into memory (re-laid out or not) the
  // same one. Load stays instant: the hash is computed the first time it is
  // asked for, over `threads` threads (0: the machine's; the value does not
  // depend on it), a pass over the whole file, and kept; later calls, from
  // any thread, return it at once. Error(out_of_memory) naming the buffer.
  std::uint64_t fingerprint(int threads = 0) const;
  // Weight bytes re-laid out row-interleaved at load (WeightRef::x16).
  std::size_t interleaved_weight_bytes() const { return interleaved_bytes_; }

 private:
  explicit Model(GgufFile file);
  void bind(const LoadOptions& options);
  void interleave(const LoadOptions& options);

  GgufFile file_;
  ModelParams params_;
  WeightRef token_embd_, output_, output_tail_;
  const float* output_norm_ = nullptr;
  std::vector<LayerWeights> layers_;
  std::vector<std::vector<std::uint8_t>> packed_;  // owned re-laid-out weights
  std::vector<float> rope_long_, rope_short_;
  std::size_t mapped_bytes_ = 0;
  std::size_t interleaved_bytes_ = 0;
  std::uint64_t progress_total_ = 0;
  std::vector<RelaidMatrix> relaid_;  // the file's matrices interleave() re-laid out, by offset
  mutable std::mutex fingerprint_mutex_;
  mutable std::atomic<bool> fingerprint_ready_{false};
  mutable std::uint64_t fingerprint_ = 0;  // once fingerprint_ready_
  std::unique_ptr<Tokenizer> tokenizer_;
};

}  // namespace latte
