// The `latte` command line.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "platform/paths.h"
#include "platform/process.h"
#include "tools/cli/commands.h"
#include "runtime/error.h"
#include "runtime/session/session.h"

namespace {

// Whole-string numeric checks with messages that say what is wrong (CLI11's
// Range calls "abc" out of range, and its integer parse accepts "-1" for an
// unsigned seed).
CLI::Validator integer_in(long long lo, long long hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        const char* b = s.c_str();
        const char* digits = b + (*b == '-');
        if (*digits == '\0' || std::strspn(digits, "0123456789") != std::strlen(digits)) return "'" + s + "' is not an integer";
        errno = 0;
        const long long v = std::strtoll(b, nullptr, 10);
        if (errno != 0 || v < lo || v > hi)
          return s + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        return "";
      },
      "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

// lo_open: lo itself is refused, "(lo, hi]".
CLI::Validator real_in(double lo, double hi, bool lo_open) {
  char range[48];
  std::snprintf(range, sizeof range, "%c%g, %g]", lo_open ? '(' : '[', lo, hi);
  return CLI::Validator(
      [lo, hi, lo_open, range = std::string(range)](std::string& s) -> std::string {
        char* end = nullptr;
        const double d = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0' || !std::isfinite(d)) return "'" + s + "' is not a finite number";
        // Judged as the float it is stored in: 1e-50 is 0 there.
        const double v = static_cast<float>(d);
        if (v < lo || v > hi || (lo_open && v == lo))
          return s + " is outside " + range + (v != d ? " (as a 32-bit float: " + std::to_string(v) + ")" : "");
        return "";
      },
      range);
}

const CLI::Validator kSeed(
    [](std::string& s) -> std::string {
      if (s.empty() || std::strspn(s.c_str(), "0123456789") != s.size()) return "'" + s + "' is not a non-negative integer";
      errno = 0;
      std::strtoull(s.c_str(), nullptr, 10);
      if (errno != 0) return s + " is larger than 2^64 - 1";
      return "";
    },
    "");

// --no-mmap's help, the same for every command that loads a model.
constexpr const char* kNoMmapHelp =
    "Read the model into memory (huge pages) instead of mapping it, its matrices re-laid out in place for this "
    "CPU's kernels: faster decode, slower load";

}  // namespace

int main(int argc, char** raw_argv) {
  latte::preload_unwinder();  // before memory runs short: an error must be able to unwind
  latte::console_output_utf8();
  // The arguments as UTF-8 on every OS (paths included).
  const std::vector<std::string> args = latte::utf8_arguments(argc, raw_argv);
  std::vector<const char*> argv_utf8;
  for (const std::string& a : args) argv_utf8.push_back(a.c_str());
  argv_utf8.push_back(nullptr);
  const char* const* argv = argv_utf8.data();
  CLI::App app{"Latte: Multi-Head Latent Attention inference on the CPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "latte " LATTE_VERSION);

  bool info_models = false;
  std::string info_file;
  auto* info = app.add_subcommand("info", "Describe a GGUF model file, or the public MLA models' cache needs");
  info->add_flag("--models", info_models, "Cache accounting for the public MLA models: latent versus MHA K/V");
  info->add_option("FILE", info_file, "A GGUF model file");

  latte::cli::DemoOptions demo_opts;
  auto* demo = app.add_subcommand("demo", "Run one MLA layer (DeepSeek-V2-Lite shapes, random weights) in both forms");
  demo->add_option("--tokens", demo_opts.n_prefill, "Prefill tokens")->check(integer_in(1, 4096));
  demo->add_option("--steps", demo_opts.n_decode, "Decode steps")->check(integer_in(0, 4096));

  latte::cli::EvalOptions eval_opts;
  auto* eval = app.add_subcommand("eval", "Write the logits of every position of a token sequence");
  eval->add_option("-m,--model", eval_opts.model, "GGUF model file")->required();
  eval->add_option("--tokens", eval_opts.tokens, "Token ids, comma-separated")->required();
  eval->add_option("--logits-out", eval_opts.logits_out, "Output: float32 [n_tokens, n_vocab], row-major")->required();
  eval->add_option("--cache-type", eval_opts.cache, "Latent cache storage")->check(CLI::IsMember({"f32", "f16", "int8"}));
  eval->add_option("--threads", eval_opts.threads, "Threads (0: all cores)")->check(integer_in(0, latte::kMaxThreads));
  eval->add_flag("--no-mmap", eval_opts.no_mmap, kNoMmapHelp);
  eval->add_option("--prefill-chunk", eval_opts.prefill_chunk, "Tokens per prefill chunk")->check(integer_in(1, 1LL << 20));

  latte::cli::BenchOptions bench_opts;
  auto* bench = app.add_subcommand("bench", "Prefill and decode speed at several context depths");
  bench->add_option("-m,--model", bench_opts.model, "GGUF model file")->required();
  bench->add_option("--depths", bench_opts.depths, "Context depths, tokens already in the cache (0,4096,16384)");
  bench->add_option("--cache-type", bench_opts.cache, "Latent cache storage (all: each, with --shift)")
      ->check(CLI::IsMember({"f32", "f16", "int8", "all"}));
  auto* bench_shift = bench->add_flag(
      "--shift", bench_opts.shift,
      "Time a context shift of half of each depth (on a cache filled by writing rows) against a prefill of the "
      "tokens it keeps, alternated, medians over -r");
  bench->add_option("--reprefill-max", bench_opts.reprefill_max,
                    "With --shift: the longest re-prefill measured (tokens; longer ones are skipped)")
      ->check(integer_in(0, 1LL << 24))
      ->needs(bench_shift);
  bench->add_option("--threads", bench_opts.threads, "Threads (0: all cores)")->check(integer_in(0, latte::kMaxThreads));
  bench->add_flag("--no-mmap", bench_opts.no_mmap, kNoMmapHelp);
  bench->add_option("-p,--n-prompt", bench_opts.n_prompt, "Prompt tokens for the prefill measurement")->check(integer_in(0, 1LL << 20));
  bench->add_option("-n,--n-gen", bench_opts.n_gen, "Tokens for the decode measurement")->check(integer_in(0, 1LL << 20));
  bench->add_option("-r,--repetitions", bench_opts.repetitions, "Repetitions (the best is reported)")->check(integer_in(1, 100));
  bench->add_option("--form", bench_opts.form, "Prefill form: auto (the cost model), naive or absorbed")
      ->check(CLI::IsMember({"auto", "naive", "absorbed"}));
  bench->add_option("--prefill-chunk", bench_opts.prefill_chunk, "Tokens per prefill chunk")->check(integer_in(1, 1LL << 20));
  bench->add_flag("--json", bench_opts.json, "JSON output");

  latte::cli::RunOptions run_opts;
  auto* run = app.add_subcommand("run", "Generate text from a prompt, streamed to stdout");
  auto* run_model = run->add_option("-m,--model", run_opts.model, "GGUF model file (default: $LATTE_MODEL, else the shipped model in ../share/latte/ beside this program)");
  auto* run_prompt = run->add_option("-p,--prompt", run_opts.prompt, "Prompt text");
  auto* run_file = run->add_option("-f,--file", run_opts.prompt_file, "Read the prompt text from a file");
  run_file->excludes(run_prompt);
  auto* run_ids = run->add_option("--prompt-ids", run_opts.prompt_ids, "Prompt as token ids (1,2,3) instead of text");
  run_ids->excludes(run_prompt);
  run_ids->excludes(run_file);
  run->add_flag("--print-ids", run_opts.print_ids, "Print the generated token ids instead of text");
  run->add_option("--session", run_opts.session_file,
                  "Resume from this session file if it exists (reusing the prompt's longest cached prefix, or with -i "
                  "the conversation), and save the session to it after each reply (a regular file: a symbolic link is "
                  "followed, anything else refused)");
  run->add_flag("--verbose-prompt", run_opts.verbose_prompt,
                "Show each prompt as the model reads it (chat markers and BOS included) on stderr");
  run->add_flag("--ignore-eos", run_opts.ignore_eos, "Keep generating past end-of-sequence tokens");
  run->add_option("-n,--n-predict", run_opts.n_predict, "Tokens to generate at most")->check(integer_in(0, 1LL << 24));
  auto* run_chat = run->add_flag("--chat", run_opts.chat,
                                 "Wrap the prompt as a user turn in the model's chat format (from its chat template)");
  run_chat->excludes(run_ids);
  run->add_option("--chat-format", run_opts.chat_format,
                  "Chat format instead of the one the model's template writes: deepseek2 (User: / Assistant:), "
                  "deepseek3 (<｜User｜> / <｜Assistant｜>) or chatml (<|im_start|>, MiniCPM3 and PLM)")
      ->check(CLI::IsMember({"deepseek2", "deepseek3", "chatml"}))
      ->needs(run_chat);
  run->add_option("--system", run_opts.system_prompt, "System prompt: a system turn at the start of each conversation")
      ->needs(run_chat);
  run->add_flag("-i,--interactive", run_opts.interactive, "Read prompts (turns with --chat) from stdin, one per line");
  run->add_option("--temp", run_opts.temperature, "Temperature (0: greedy)")->check(real_in(0, 100, false));
  run->add_option("--top-k", run_opts.top_k, "Top-k (0: off)")->check(integer_in(0, 1LL << 24));
  run->add_option("--top-p", run_opts.top_p, "Top-p (1: off)")->check(real_in(0, 1, true));
  run->add_option("--min-p", run_opts.min_p, "Min-p (0: off)")->check(real_in(0, 1, false));
  run->add_option("--repeat-penalty", run_opts.repeat_penalty, "Repetition penalty (1: off)")->check(real_in(0, 100, true));
  run->add_option("--repeat-last-n", run_opts.repeat_last_n, "Tokens the penalty looks back over")->check(integer_in(0, 1LL << 24));
  run->add_option("--seed", run_opts.seed, "Sampling seed (same seed, same text)")->check(kSeed);
  run->add_option("--cache-type", run_opts.cache, "Latent cache storage")->check(CLI::IsMember({"f32", "f16", "int8"}));
  run->add_option("--threads", run_opts.threads, "Threads (0: all cores)")->check(integer_in(0, latte::kMaxThreads));
  run->add_flag("--no-mmap", run_opts.no_mmap, kNoMmapHelp);
  run->add_option("-c,--ctx", run_opts.n_ctx, "Context size in tokens (default: 4096, or the model's trained context if smaller; 0: the model's)")->check(integer_in(0, 1LL << 24));
  auto* run_no_shift = run->add_flag("--no-context-shift", run_opts.no_context_shift,
                                     "Stop generating (with -i: start a new conversation) when the context is full, "
                                     "instead of dropping the oldest half after the kept start");
  run->add_option("--keep", run_opts.keep,
                  "Tokens a context shift keeps at the start (default: the system turn with --chat, else BOS)")
      ->check(integer_in(0, 1LL << 24))
      ->excludes(run_no_shift);

  latte::cli::PerplexityOptions ppl_opts;
  auto* ppl = app.add_subcommand("perplexity", "Perplexity over token windows or a text file");
  ppl->add_option("-m,--model", ppl_opts.model, "GGUF model file")->required();
  auto* ppl_src = ppl->add_option_group("input");
  ppl_src->add_option("--windows", ppl_opts.windows_file, "Token-id windows, one per line (1,2,3)");
  ppl_src->add_option("-f,--file", ppl_opts.text_file, "A text file (tokenized, with BOS where the model adds one, cut into --ctx windows)");
  ppl_src->require_option(1);
  ppl->add_option("-c,--ctx", ppl_opts.n_ctx, "Window length for -f")->check(integer_in(2, 1LL << 20));
  ppl->add_option("--cache-type", ppl_opts.cache, "Latent cache storage")->check(CLI::IsMember({"f32", "f16", "int8"}));
  ppl->add_option("--form", ppl_opts.form, "Prefill form")->check(CLI::IsMember({"auto", "naive", "absorbed"}));
  ppl->add_flag("--decode", ppl_opts.decode, "Feed the tokens one by one (the decode kernel for every position)");
  ppl->add_flag("--llama-cpp", ppl_opts.llama_cpp,
                "With -f, llama.cpp's method: whole --ctx chunks (at least 2), each starting with BOS where the model "
                "adds one, only the tokens after each chunk's first half scored");
  ppl->add_option("--threads", ppl_opts.threads, "Threads (0: all cores)")->check(integer_in(0, latte::kMaxThreads));
  ppl->add_flag("--no-mmap", ppl_opts.no_mmap, kNoMmapHelp);
  ppl->add_option("--prefill-chunk", ppl_opts.prefill_chunk, "Tokens per prefill chunk")->check(integer_in(1, 1LL << 20));
  ppl->add_flag("--json", ppl_opts.json, "JSON output");
  auto* ppl_shift = ppl->add_flag("--shift", ppl_opts.shift,
                                  "With -f, the whole text through one session of --ctx tokens, fed in pieces of "
                                  "--ctx/8 tokens, shifted (the first --keep kept, half the rest dropped) whenever "
                                  "the next piece does not fit: every token after the first scored");
  ppl->add_option("--keep", ppl_opts.keep, "With --shift: tokens kept at the start (default: BOS where the model adds one)")
      ->check(integer_in(0, 1LL << 20))
      ->needs(ppl_shift);
  ppl->add_flag("--reprefill", ppl_opts.reprefill,
                "With --shift: keep and drop the same tokens, but prefill the kept ones afresh instead of shifting "
                "(what a runtime without a shift does)")
      ->needs(ppl_shift);

  latte::cli::MakeModelOptions mm_opts;
  auto* mm = app.add_subcommand("make-model", "Write a random-weight model with real shapes (for benchmarks)");
  mm->add_option("--preset", mm_opts.preset,
                 "Shapes: v2-lite (DeepSeek-V2-Lite attention, dense FFN), v2-lite-moe (DeepSeek-V2-Lite whole: "
                 "a dense first layer, then 64 experts, 6 used, 2 shared) or tiny")
      ->check(CLI::IsMember({"v2-lite", "v2-lite-moe", "tiny"}));
  mm->add_option("--type", mm_opts.type, "Weight type: F32, F16, BF16, Q8_0, Q4_0, ...");
  mm->add_option("--layers", mm_opts.layers, "Layers")->check(integer_in(1, 256));
  mm->add_option("--vocab", mm_opts.vocab, "Vocabulary size")->check(integer_in(258, 1LL << 20));
  mm->add_option("--seed", mm_opts.seed, "Random seed")->check(kSeed);
  mm->add_option("-o,--out", mm_opts.out,
                 "Output GGUF file (replaced whole; only a regular file is replaced: a device or FIFO is refused, "
                 "a symbolic link is followed and its target replaced)")
      ->required();

  // An unknown command: CLI11 would only say that one is required.
  const auto commands = app.get_subcommands([](const CLI::App*) { return true; });
  if (argc >= 2 && argv[1][0] != '-' &&
      std::none_of(commands.begin(), commands.end(), [&](const CLI::App* c) { return c->check_name(argv[1]); })) {
    std::fprintf(stderr, "latte: unknown command '%s' (commands:", argv[1]);
    for (const CLI::App* c : commands) std::fprintf(stderr, " %s", c->get_name().c_str());
    std::fprintf(stderr, "; latte --help)\n");
    return 2;
  }
  CLI11_PARSE(app, argc, argv);
  try {
    latte::active_isa();  // a bad LATTE_ISA fails here, with its message
    if (*info) {
      if (info_models) {
        if (!info_file.empty()) {
          std::fprintf(stderr, "latte info: give a FILE or --models, not both\n");
          return 2;
        }
        latte::cli::print_model_cache_table(stdout);
        return 0;
      }
      if (info_file.empty()) {
        std::fprintf(stderr, "latte info: give a GGUF FILE, or --models\n");
        return 2;
      }
      return latte::cli::run_info_file(info_file);
    }
    if (*demo) return latte::cli::run_demo(demo_opts);
    if (*eval) return latte::cli::run_eval(eval_opts);
    if (*bench) return bench_opts.shift ? latte::cli::run_bench_shift(bench_opts) : latte::cli::run_bench(bench_opts);
    if (*run) {
      if (run_model->count() > 0 && run_opts.model.empty()) {
        std::fprintf(stderr, "latte run: -m was given an empty path (leave -m out for the shipped model)\n");
        return 2;
      }
      if (run_opts.prompt.empty() && run_opts.prompt_file.empty() && run_opts.prompt_ids.empty() && !run_opts.interactive) {
        std::fprintf(stderr, "latte run: give a prompt (-p TEXT, -f FILE or --prompt-ids) or -i\n");
        return 2;
      }
      return latte::cli::run_generate(run_opts);
    }
    if (*ppl) return latte::cli::run_perplexity(ppl_opts);
    if (*mm) return latte::cli::run_make_model(mm_opts);
  } catch (const latte::Error& e) {
    std::fprintf(stderr, "latte: %s: %s\n", latte::status_name(e.status()), e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "latte: out of memory: an allocation failed\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "latte: %s\n", e.what());
    return 1;
  }
  return 0;
}
