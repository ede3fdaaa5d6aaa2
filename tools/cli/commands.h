// The CLI's commands, one function each.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <istream>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "latte/latte.hpp"
#include "tools/dev/dev_commands.h"

namespace latte::cli {

// A command line wrong in itself (options that exclude each other, a value
// that does not fit another), found by a command: exit status 2, as for
// CLI11's own parse errors (main.cpp), where latte::Error is 1.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `latte info --models`: the cache accounting table of mla-spec.md section 2.
void print_model_cache_table(std::FILE* out);
// `latte info FILE`: architecture, shapes, tensor types, cache bytes.
int run_info_file(const std::string& path);


struct EvalOptions {
  std::string model;
  std::string tokens;      // "1,2,3"
  std::string logits_out;
  std::string cache = "f32";
  int threads = 0;
  int prefill_chunk = 512;
  bool no_mmap = false;     // read the file into huge pages, whatever its size
  bool mmap = false;        // map it, whatever its size (default: read where it fits in memory)
};
// `latte eval`: logits of every position as float32 [n_tokens, n_vocab].
int run_eval(const EvalOptions& opts);

struct BenchOptions {
  std::string model;
  std::string depths = "0";  // "0,4096,16384": context depths, tokens already in the cache
  std::string cache = "int8";
  int threads = 0;
  int n_prompt = 512;
  int n_gen = 32;
  int repetitions = 1;
  std::string form = "auto";  // prefill form: auto (cost model) | naive | absorbed
  int prefill_chunk = 512;    // tokens per prefill chunk (the measured prefill and the fill)
  bool json = false;
  bool no_mmap = false;     // read the file into huge pages, whatever its size
  bool mmap = false;        // map it, whatever its size (default: read where it fits in memory)
  bool shift = false;       // time context shifts against re-prefills instead (bench_shift.cpp)
  std::int64_t reprefill_max = 32768;  // with shift: longest re-prefill measured (tokens)
  std::string batch;        // "1,2,4,8": aggregate decode of N sequences stepped together (bench_batch.cpp)
  std::string versus;       // a second cache type filled beside, its decode steps alternated with the first's
};
// `latte bench`: prefill and decode tok/s at several context depths.
int run_bench(const BenchOptions& opts);
// `latte bench --batch`: aggregate decode tok/s of N sequences at each depth,
// stepped together, against the step's memory bound.
int run_bench_batch(const BenchOptions& opts);

struct RunOptions {
  std::string model;  // empty: the shipped model
  std::string prompt;
  std::string prompt_file;  // the prompt text from a file instead of -p
  std::string prompt_ids;  // token ids instead of text ("1,2,3")
  bool print_ids = false;  // print generated token ids, not text
  bool verbose_prompt = false;  // show each prompt's text and token count on stderr
  std::string session_file;     // resume from / save to this file
  bool ignore_eos = false; // keep generating past end-of-generation tokens
  std::string grammar;       // GBNF text the output follows
  std::string grammar_file;  // GBNF from a file
  std::string json_schema;   // a JSON Schema file, or the schema when it starts with '{'
  bool json = false;         // any JSON object
  int n_predict = 128;
  bool chat = false;
  std::string chat_format;    // empty: the one the model's template writes
  std::string system_prompt;  // with chat: a system turn opening each conversation
  bool interactive = false;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  std::uint64_t seed = 0;
  bool seed_given = false;  // else a random seed, said on stderr
  std::string cache = "int8";
  int threads = 0;
  std::int64_t n_ctx = -1;  // -1: 4096, or the model's trained context if smaller; 0: the model's
  bool no_mmap = false;     // read the file into huge pages, whatever its size
  bool mmap = false;        // map it, whatever its size (default: read where it fits in memory)
  bool no_context_shift = false;  // stop when the context fills instead of shifting it
  std::int64_t keep = -1;   // tokens a shift keeps; -1: the system turn with --chat, else BOS
};
// `latte run`: generate text from a prompt, streaming it.
int run_generate(const RunOptions& opts);
// The shipped model's file name, installed in <prefix>/share/latte/.
inline constexpr const char* kShippedModelName = "latte-tiny-mla.gguf";
// The model `latte run` uses without -m: $LATTE_MODEL, else the shipped
// model beside this executable's bin/ folder (../share/latte/).
std::string default_model_path();
// default_model_path() where it names a file; else Error(io_error) saying
// which file was looked for and to give -m FILE or set LATTE_MODEL.
std::string default_model_or_explain();

struct PerplexityOptions {
  std::string model;
  std::string windows_file;  // token-id windows, one per line
  std::string text_file;     // or raw text
  std::int64_t n_ctx = 512;  // window length for text
  std::string cache = "f32";
  std::string form = "auto";  // prefill form: auto | naive | absorbed
  bool decode = false;        // feed tokens one by one (absorbed decode kernel)
  bool llama_cpp = false;     // -f only: llama.cpp's chunks, second halves scored
  int threads = 0;
  int prefill_chunk = 512;
  bool json = false;
  bool no_mmap = false;     // read the file into huge pages, whatever its size
  bool mmap = false;        // map it, whatever its size (default: read where it fits in memory)
  bool shift = false;       // -f only: the whole text through one --ctx session, shifted as it fills
  std::int64_t keep = -1;   // with shift: tokens kept at the start; -1: BOS where the model adds one
  bool reprefill = false;   // with shift: prefill the kept tokens afresh instead of shifting
};
// `latte perplexity`: mean NLL of the next token over windows of a text.
int run_perplexity(const PerplexityOptions& opts);

// "1,2,3" -> integers in [0, max]: digits only, no empty items; otherwise
// Error(invalid_argument) naming the item (`what` names the option or line).
std::vector<std::int64_t> parse_int_list(const std::string& s, const char* what, std::int64_t max);
// What parse_int_list would refuse in s ("item 2, 'x', is not ..."), or "".
std::string int_list_problem(const std::string& s, std::int64_t max);
// The same for token ids (max INT32_MAX).
std::vector<std::int32_t> parse_token_list(const std::string& s, const char* what);
// Error(invalid_argument) naming the first id >= n_vocab, counted from 1 as
// parse_token_list counts items.
void check_token_ids(const std::vector<std::int32_t>& ids, std::int32_t n_vocab, const std::string& what);
// Opens a file for reading, or Error(io_error) naming it and why not (a
// directory, missing, unreadable).
std::ifstream open_input(const std::string& path);
// The most bytes of text Latte reads from one input file or one line of
// input: prompts, -i lines and --windows files past it are refused.
inline constexpr std::size_t kMaxInputTextBytes = std::size_t{64} << 20;
// A whole file's bytes, with the same errors; Error(invalid_argument) past
// kMaxInputTextBytes.
std::string read_text_file(const std::string& path);
// Reads one line (without its newline) of at most kMaxInputTextBytes.
enum class LineRead { line, end, too_long };
LineRead read_line_bounded(std::istream& in, std::string& line);
// "1 token", "2 tokens": a count and its noun, plural but for 1.
inline std::string count_of(long long n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}
// s as a JSON string literal, quotes included.
std::string json_string(std::string_view s);
// A stderr warning when n_tokens of context exceed what the model was
// trained for (`trained`, its context_length; 0: unknown); `what` names the
// setting.
void warn_beyond_trained_context(std::int64_t trained, std::int64_t n_tokens, const char* what);
// "f32", "f16", "int8" or "int4" (main.cpp's validators allow no other) as a
// latte_cache_type.
latte_cache_type cache_type_of(const std::string& name);
// "auto", "naive" or "absorbed" (--form) as a latte_prefill_form.
latte_prefill_form prefill_form_of(const std::string& name);
// Errors the commands raise themselves: latte::api::Exception, as the API's
// own, so main.cpp reports both alike ("latte: I/O error: ...").
[[noreturn]] inline void fail(latte_status status, const std::string& message) {
  throw api::Exception(status, message);
}

// Makes room for n_new tokens in a full context: shifts it, keeping the
// first n_keep tokens and dropping half of the rest (more where the new
// tokens need it), as latte_session_set_context_shift would; returns the
// tokens dropped (0: they fit). Error(context_overflow) where they do not
// fit beside the kept ones.
std::int64_t make_room(api::Session& s, std::int64_t n_new, std::int64_t n_keep);
// Whether the model's tokenizer adds BOS to a text (add_bos -1 says so).
inline bool adds_bos(const api::Model& model) { return model.bos() >= 0 && !model.tokenize("", -1).empty(); }

// Loads a model (open_model.cpp): progress on a terminal ("loading FILE:
// 1.2 / 9.0 GiB"), then a line saying what was loaded and, mapped where
// reading was the default, why (from the library's log). use_mmap 0 for
// no_mmap, 1 for mmap, else -1.
api::Model open_model(const std::string& path, bool no_mmap = false, bool mmap = false);

}  // namespace latte::cli
