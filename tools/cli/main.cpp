// The `latte` command line.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "tools/paths.h"
#include "latte/latte.hpp"
#include "tools/cli/commands.h"
#ifdef LATTE_HAVE_SERVER
#include "tools/server/serve.h"
#endif

namespace {

// The most threads a session takes (latte_session_options.threads).
constexpr long long kMaxThreads = 1024;

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

// A list of integers in [0, max] ("1,2,3"): its problem, said by
// parse_int_list's rules.
CLI::Validator int_list(std::int64_t max) {
  return CLI::Validator([max](std::string& s) { return latte::cli::int_list_problem(s, max); }, "");
}

// A weight type by name in any case ("q4_k"), made the canonical name
// ("Q4_K"); an unknown one is refused with the names make-model takes.
const CLI::Validator kWeightType(
    [](std::string& s) -> std::string {
      std::string canonical;
      const std::string problem = latte::cli::weight_type_problem(s, &canonical);
      if (problem.empty()) s = canonical;
      return problem;
    },
    "");

// --no-mmap and --mmap, the same for every command that loads a model
// (the default: read where the file fits in the memory available).
void load_flags(CLI::App* cmd, bool& no_mmap, bool& mmap) {
  auto* read = cmd->add_flag("--no-mmap", no_mmap,
                             "Read the model into memory even where it does not fit with room to spare (the "
                             "default reads it where it does, else maps it)");
  auto* map = cmd->add_flag("--mmap", mmap,
                            "Map the model instead of reading it: instant load, pages shared with other processes, "
                            "slower decode (the matrices keep the file's layout)");
  read->excludes(map);
}

}  // namespace

int main(int argc, char** raw_argv) {
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
  // --help shows each option's default (the subcommands inherit this).
  app.option_defaults()->always_capture_default();
  // Options that must not be given an empty value (CLI11 passes "" without
  // running validators), with what is wrong with one.
  std::vector<std::pair<CLI::Option*, const char*>> nonempty;
  const auto path_option = [&](CLI::Option* o) {
    nonempty.emplace_back(o, "an empty path names no file");
    return o;
  };
  const auto list_option = [&](CLI::Option* o) {
    nonempty.emplace_back(o, "nothing given");
    return o;
  };

  bool info_models = false;
  std::string info_file, info_model;
  auto* info = app.add_subcommand("info", "Describe a GGUF model file, or the public MLA models' cache needs");
  info->add_flag("--models", info_models, "Cache accounting for the public MLA models: latent versus MHA K/V");
  path_option(info->add_option("-m,--model", info_model, "A GGUF model file (or give it as FILE)"));
  path_option(info->add_option("FILE", info_file, "A GGUF model file"));

  latte::cli::DemoOptions demo_opts;
  auto* demo = app.add_subcommand("demo", "Run one MLA layer (DeepSeek-V2-Lite shapes, random weights) in both forms");
  demo->add_option("--tokens", demo_opts.n_prefill, "Prefill tokens")->check(integer_in(1, 4096));
  demo->add_option("--steps", demo_opts.n_decode, "Decode steps")->check(integer_in(0, 4096));

  latte::cli::EvalOptions eval_opts;
  auto* eval = app.add_subcommand("eval", "Write the logits of every position of a token sequence");
  path_option(eval->add_option("-m,--model", eval_opts.model, "GGUF model file")->required());
  list_option(eval->add_option("--tokens", eval_opts.tokens, "Token ids, comma-separated")
                  ->required()
                  ->check(int_list(INT32_MAX)));
  path_option(eval->add_option("--logits-out", eval_opts.logits_out,
                               "Output: float32 [n_tokens, n_vocab], row-major (replaced whole, through a temporary "
                               "beside it)")
                  ->required());
  eval->add_option("--cache-type", eval_opts.cache, "Latent cache storage")->check(CLI::IsMember({"f32", "f16", "int8", "int4"}));
  eval->add_option("--threads", eval_opts.threads, "Threads (0: all cores)")->check(integer_in(0, kMaxThreads));
  load_flags(eval, eval_opts.no_mmap, eval_opts.mmap);
  eval->add_option("--prefill-chunk", eval_opts.prefill_chunk, "Tokens per prefill chunk")->check(integer_in(1, 1LL << 20));

  latte::cli::BenchOptions bench_opts;
  auto* bench = app.add_subcommand("bench", "Prefill and decode speed at several context depths");
  path_option(bench->add_option("-m,--model", bench_opts.model, "GGUF model file")->required());
  list_option(bench->add_option("--depths", bench_opts.depths, "Context depths, tokens already in the cache (0,4096,16384)")
                  ->check(int_list(std::int64_t{1} << 24)));
  bench->add_option("--cache-type", bench_opts.cache, "Latent cache storage (all: each, with --shift)")
      ->check(CLI::IsMember({"f32", "f16", "int8", "int4", "all"}));
  auto* bench_versus =
      bench->add_option("--versus-cache", bench_opts.versus,
                        "A second cache type, filled beside the first to each depth: single decode steps of the two "
                        "alternate, and each depth reports both medians (f32, f16, int8, int4)")
          ->check(CLI::IsMember({"f32", "f16", "int8", "int4"}));
  auto* bench_shift = bench->add_flag(
      "--shift", bench_opts.shift,
      "Time a context shift of half of each depth (on a cache filled by writing rows) against a prefill of the "
      "tokens it keeps, alternated, medians over -r");
  bench->add_option("--reprefill-max", bench_opts.reprefill_max,
                    "With --shift: the longest re-prefill measured (tokens; longer ones are skipped)")
      ->check(integer_in(0, 1LL << 24))
      ->needs(bench_shift);
  bench->add_option("--threads", bench_opts.threads, "Threads (0: all cores)")->check(integer_in(0, kMaxThreads));
  load_flags(bench, bench_opts.no_mmap, bench_opts.mmap);
  bench->add_option("-p,--n-prompt", bench_opts.n_prompt, "Prompt tokens for the prefill measurement")->check(integer_in(0, 1LL << 20));
  bench->add_option("-n,--n-gen", bench_opts.n_gen, "Tokens for the decode measurement")->check(integer_in(0, 1LL << 20));
  bench->add_option("-r,--repetitions", bench_opts.repetitions, "Repetitions (the best is reported)")->check(integer_in(1, 100));
  bench->add_option("--form", bench_opts.form, "Prefill form: auto (the cost model), naive or absorbed")
      ->check(CLI::IsMember({"auto", "naive", "absorbed"}));
  bench->add_option("--prefill-chunk", bench_opts.prefill_chunk, "Tokens per prefill chunk")->check(integer_in(1, 1LL << 20));
  bench->add_flag("--json", bench_opts.json, "JSON output");
  list_option(bench->add_option("--batch", bench_opts.batch,
                                "Sequence counts (1,2,4,8): aggregate decode of that many sequences at each depth, "
                                "stepped together")
                  ->excludes(bench_shift)
                  ->excludes(bench_versus));
  bench_versus->excludes(bench_shift);

  latte::cli::RunOptions run_opts;
  auto* run = app.add_subcommand("run", "Generate text from a prompt, streamed to stdout");
  auto* run_model = run->add_option("-m,--model", run_opts.model, "GGUF model file (default: $LATTE_MODEL, else the shipped model in ../share/latte/ beside this program)");
  auto* run_prompt = run->add_option("-p,--prompt", run_opts.prompt, "Prompt text");
  auto* run_file = path_option(run->add_option("-f,--file", run_opts.prompt_file, "Read the prompt text from a file"));
  run_file->excludes(run_prompt);
  auto* run_ids = list_option(run->add_option("--prompt-ids", run_opts.prompt_ids, "Prompt as token ids (1,2,3) instead of text")
                                  ->check(int_list(INT32_MAX)));
  run_ids->excludes(run_prompt);
  run_ids->excludes(run_file);
  run->add_flag("--print-ids", run_opts.print_ids, "Print the generated token ids instead of text");
  path_option(run->add_option("--session", run_opts.session_file,
                              "Resume from this session file if it exists (reusing the prompt's longest cached prefix, "
                              "or with -i the conversation), and save the session to it after each reply (a regular "
                              "file: a symbolic link is followed, anything else refused)"));
  run->add_flag("--verbose-prompt", run_opts.verbose_prompt,
                "Show each prompt as the model reads it (chat markers and BOS included) on stderr");
  run->add_flag("--ignore-eos", run_opts.ignore_eos, "Keep generating past end-of-sequence tokens");
  // Structured output (docs/structured-output.md): one constraint at most.
  auto* run_grammar = run->add_option("--grammar", run_opts.grammar, "A GBNF grammar (llama.cpp's syntax) the output follows, from rule root");
  auto* run_grammar_file = path_option(run->add_option("--grammar-file", run_opts.grammar_file, "The GBNF grammar from a file"));
  auto* run_schema = run->add_option("--json-schema", run_opts.json_schema,
                                     "A JSON Schema the output validates against: a file, or the schema itself when it "
                                     "starts with '{'");
  auto* run_json = run->add_flag("--json", run_opts.json, "The output is one JSON object (any)");
  run_grammar->excludes(run_grammar_file)->excludes(run_schema)->excludes(run_json);
  run_grammar_file->excludes(run_schema)->excludes(run_json);
  run_schema->excludes(run_json);
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
  run->add_flag("-i,--interactive", run_opts.interactive,
                "Read prompts (turns with --chat) from stdin, one per line (with line editing and history on a "
                "terminal)");
  run->add_option("--temp", run_opts.temperature, "Temperature (0: greedy)")->check(real_in(0, 100, false));
  run->add_option("--top-k", run_opts.top_k, "Top-k (0: off)")->check(integer_in(0, 1LL << 24));
  run->add_option("--top-p", run_opts.top_p, "Top-p (1: off)")->check(real_in(0, 1, true));
  run->add_option("--min-p", run_opts.min_p, "Min-p (0: off)")->check(real_in(0, 1, false));
  run->add_option("--repeat-penalty", run_opts.repeat_penalty, "Repetition penalty (1: off)")->check(real_in(0, 100, true));
  run->add_option("--repeat-last-n", run_opts.repeat_last_n, "Tokens the penalty looks back over")->check(integer_in(0, 1LL << 24));
  auto* run_seed = run->add_option("--seed", run_opts.seed,
                                   "Sampling seed: the same seed, prompt and settings give the same text (default: "
                                   "a random one, printed on stderr as 'seed: N' to repeat the run with)")
                       ->check(kSeed)
                       ->default_str("");
  run->add_option("--cache-type", run_opts.cache, "Latent cache storage")->check(CLI::IsMember({"f32", "f16", "int8", "int4"}));
  run->add_option("--threads", run_opts.threads, "Threads (0: all cores)")->check(integer_in(0, kMaxThreads));
  load_flags(run, run_opts.no_mmap, run_opts.mmap);
  auto* run_ctx = run->add_option("-c,--ctx", run_opts.n_ctx,
                                  "Context size in tokens (default: 4096, or the model's trained context if smaller; "
                                  "0: the model's)")
                      ->check(integer_in(0, 1LL << 24))
                      ->default_str("");
  auto* run_no_shift = run->add_flag("--no-context-shift", run_opts.no_context_shift,
                                     "Stop generating (with -i: start a new conversation) when the context is full, "
                                     "instead of dropping the oldest half after the kept start");
  auto* run_keep = run->add_option("--keep", run_opts.keep,
                                   "Tokens a context shift keeps at the start, fewer than --ctx (default: the system "
                                   "turn with --chat, else BOS)")
                       ->check(integer_in(0, 1LL << 24))
                       ->excludes(run_no_shift)
                       ->default_str("");

#ifdef LATTE_HAVE_SERVER
  // `latte serve`: the OpenAI-compatible server (tools/server/; built where
  // cpp-httplib and nlohmann-json are found).
  latte::server::ServeOptions serve_opts;
  auto* serve = app.add_subcommand("serve", "Serve the model over OpenAI's HTTP API, with a chat page at /");
  auto* serve_model = serve->add_option("-m,--model", serve_opts.model,
                                        "GGUF model file (default: $LATTE_MODEL, else the shipped model)");
  path_option(serve_model);
  serve->add_option("--host", serve_opts.host, "Address to listen on (loopback by default; 0.0.0.0: every interface)");
  serve->add_option("--port", serve_opts.port, "Port (0: any free one, said on stderr and in --port-file)")
      ->check(integer_in(0, 65535));
  path_option(serve->add_option("--port-file", serve_opts.port_file, "Write the port listened on to this file"));
  serve->add_option("--parallel", serve_opts.parallel, "Conversations generated at once (slots, one session each)")
      ->check(integer_in(1, 256));
  serve->add_option("--queue", serve_opts.queue, "Requests that may wait for a slot; past them: 503")
      ->check(integer_in(0, 4096));
  serve->add_option("-c,--ctx", serve_opts.n_ctx,
                    "Context per slot in tokens (default: 4096, or the model's trained context if smaller; 0: the "
                    "model's)")
      ->check(integer_in(0, 1LL << 24))
      ->default_str("");
  serve->add_option("--cache-type", serve_opts.cache, "Latent cache storage")->check(CLI::IsMember({"f32", "f16", "int8", "int4"}));
  serve->add_option("--threads", serve_opts.threads, "Threads (0: all cores)")->check(integer_in(0, kMaxThreads));
  serve->add_option("--prefill-chunk", serve_opts.prefill_chunk,
                    "Prompt tokens computed per step: long prompts go in chunks between the others' tokens")
      ->check(integer_in(1, 1 << 16));
  serve->add_option("--api-key", serve_opts.api_key,
                    "Require 'Authorization: Bearer KEY' on every endpoint but /health (default: $LATTE_API_KEY; "
                    "none when neither is set)");
  serve->add_option("--alias", serve_opts.alias, "The model's id in the API (default: its general.name)");
  serve->add_option("--max-body", serve_opts.max_body, "Largest request body in bytes (larger: 413)")
      ->check(integer_in(1024, 1LL << 30));
  load_flags(serve, serve_opts.no_mmap, serve_opts.mmap);
#endif

  latte::cli::PerplexityOptions ppl_opts;
  auto* ppl = app.add_subcommand("perplexity", "Perplexity over token windows or a text file");
  path_option(ppl->add_option("-m,--model", ppl_opts.model, "GGUF model file")->required());
  auto* ppl_src = ppl->add_option_group("input");
  path_option(ppl_src->add_option("--windows", ppl_opts.windows_file, "Token-id windows, one per line (1,2,3)"));
  path_option(ppl_src->add_option(
      "-f,--file", ppl_opts.text_file, "A text file (tokenized, with BOS where the model adds one, cut into --ctx windows)"));
  ppl_src->require_option(1);
  ppl->add_option("-c,--ctx", ppl_opts.n_ctx, "Window length for -f")->check(integer_in(2, 1LL << 20));
  ppl->add_option("--cache-type", ppl_opts.cache, "Latent cache storage")->check(CLI::IsMember({"f32", "f16", "int8", "int4"}));
  ppl->add_option("--form", ppl_opts.form, "Prefill form")->check(CLI::IsMember({"auto", "naive", "absorbed"}));
  ppl->add_flag("--decode", ppl_opts.decode, "Feed the tokens one by one (the decode kernel for every position)");
  ppl->add_flag("--llama-cpp", ppl_opts.llama_cpp,
                "With -f, llama.cpp's method: whole --ctx chunks (at least 2), each starting with BOS where the model "
                "adds one, only the tokens after each chunk's first half scored");
  ppl->add_option("--threads", ppl_opts.threads, "Threads (0: all cores)")->check(integer_in(0, kMaxThreads));
  load_flags(ppl, ppl_opts.no_mmap, ppl_opts.mmap);
  ppl->add_option("--prefill-chunk", ppl_opts.prefill_chunk, "Tokens per prefill chunk")->check(integer_in(1, 1LL << 20));
  ppl->add_flag("--json", ppl_opts.json, "JSON output");
  auto* ppl_shift = ppl->add_flag("--shift", ppl_opts.shift,
                                  "With -f, the whole text through one session of --ctx tokens, fed in pieces of "
                                  "--ctx/8 tokens, shifted (the first --keep kept, half the rest dropped) whenever "
                                  "the next piece does not fit: every token after the first scored");
  auto* ppl_keep = ppl->add_option("--keep", ppl_opts.keep,
                                   "With --shift: tokens kept at the start (default: BOS where the model adds one)")
                       ->check(integer_in(0, 1LL << 20))
                       ->needs(ppl_shift)
                       ->default_str("");
  ppl->add_flag("--reprefill", ppl_opts.reprefill,
                "With --shift: keep and drop the same tokens, but prefill the kept ones afresh instead of shifting "
                "(what a runtime without a shift does)")
      ->needs(ppl_shift);

  latte::cli::MakeModelOptions mm_opts;
  auto* mm = app.add_subcommand("make-model", "Write a random-weight model with real shapes (for benchmarks)");
  std::string preset_help = "Shapes:";
  std::vector<std::string> preset_names;
  for (const auto& [name, what] : latte::cli::make_model_presets()) {
    preset_help += std::string(preset_names.empty() ? " " : "; ") + name + " (" + what + ")";
    preset_names.push_back(name);
  }
  mm->add_option("--preset", mm_opts.preset, preset_help)->check(CLI::IsMember(preset_names));
  mm->add_option("--type", mm_opts.type,
                 std::string("Weight type of every matrix, in any case: ") + latte::cli::weight_type_names())
      ->transform(kWeightType);
  mm->add_option("--layers", mm_opts.layers, "Layers")->check(integer_in(1, 256));
  mm->add_option("--vocab", mm_opts.vocab, "Vocabulary size")->check(integer_in(258, 1LL << 20));
  mm->add_option("--seed", mm_opts.seed, "Random seed (the same seed, the same weights)")->check(kSeed);
  path_option(mm->add_option("--tokenizer-json", mm_opts.tokenizer_json,
                             "Carry the vocabulary of this Hugging Face tokenizer.json (byte-level BPE: vocab, merges, "
                             "added tokens); --vocab then pads it to at least that many tokens"));
  mm->add_option("--pre", mm_opts.pre, "With --tokenizer-json: its pre-tokenizer (deepseek-v3, deepseek-llm, qwen2, ...)");
  path_option(mm->add_option("-o,--out", mm_opts.out,
                             "Output GGUF file (replaced whole; only a regular file is replaced: a device or FIFO is "
                             "refused, a symbolic link is followed and its target replaced)")
                  ->required());

  // An unknown command: CLI11 would only say that one is required.
  const auto commands = app.get_subcommands([](const CLI::App*) { return true; });
  if (argc >= 2 && argv[1][0] != '-' &&
      std::none_of(commands.begin(), commands.end(), [&](const CLI::App* c) { return c->check_name(argv[1]); })) {
    std::fprintf(stderr, "latte: unknown command '%s' (commands:", argv[1]);
    for (const CLI::App* c : commands) std::fprintf(stderr, " %s", c->get_name().c_str());
    std::fprintf(stderr, "; latte --help)\n");
    return 2;
  }
  // Exit status 2 for every usage error, CLI11's own included (its codes
  // are 100 and up); 0 for --help and --version.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const auto parsed = app.get_subcommands();
  const std::string command = parsed.empty() ? std::string() : parsed.front()->get_name();
  const auto usage_error = [&](const std::string& message) {
    std::fprintf(stderr, "latte %s: %s\n", command.c_str(), message.c_str());
    return 2;
  };
  for (const auto& [opt, why] : nonempty)
    for (const std::string& v : opt->results())
      if (v.empty()) {
        return usage_error(opt->get_name(opt->get_positional()) + ": " + why);
      }
  if (run_model->count() > 0 && run_opts.model.empty())
    return usage_error("-m was given an empty path (leave -m out for the shipped model)");
  try {
    // A bad LATTE_ISA fails here, with its message, before anything loads.
    if (latte_kernels() == nullptr) throw std::runtime_error(latte_last_error());
    if (*info) {
      if (!info_model.empty() && !info_file.empty()) return usage_error("give the model as FILE or -m FILE, not both");
      const std::string& file = info_model.empty() ? info_file : info_model;
      if (info_models) {
        if (!file.empty()) return usage_error("give a FILE or --models, not both");
        latte::cli::print_model_cache_table(stdout);
        return 0;
      }
      if (file.empty()) return usage_error("give a GGUF FILE (or -m FILE), or --models");
      return latte::cli::run_info_file(file);
    }
    if (*demo) return latte::cli::run_demo(demo_opts);
    if (*eval) return latte::cli::run_eval(eval_opts);
    if (*bench) {
      if (!bench_opts.shift && bench_opts.cache == "all") return usage_error("--cache-type all applies to --shift only");
      if (!bench_opts.shift && bench_opts.n_prompt == 0 && bench_opts.n_gen == 0)
        return usage_error("-p and -n are both 0, so there is nothing to measure");
      if (!bench_opts.batch.empty()) return latte::cli::run_bench_batch(bench_opts);
      return bench_opts.shift ? latte::cli::run_bench_shift(bench_opts) : latte::cli::run_bench(bench_opts);
    }
    if (*run) {
      if (run_opts.prompt.empty() && run_opts.prompt_file.empty() && run_opts.prompt_ids.empty() && !run_opts.interactive)
        return usage_error("give a prompt (-p TEXT, -f FILE or --prompt-ids) or -i");
      run_opts.seed_given = run_seed->count() > 0;
      // --keep against an explicit --ctx here; against the default one once
      // the model says what it is (run_generate).
      if (run_keep->count() > 0 && run_ctx->count() > 0 && run_opts.n_ctx > 0 && run_opts.keep >= run_opts.n_ctx)
        return usage_error("--keep " + std::to_string(run_opts.keep) + " keeps the whole context of --ctx " +
                           std::to_string(run_opts.n_ctx) + " (a shift keeps fewer tokens than the context holds)");
      return latte::cli::run_generate(run_opts);
    }
    if (*ppl) {
      if (ppl_opts.llama_cpp && !ppl_opts.windows_file.empty())
        return usage_error("--llama-cpp applies to -f (text), not to --windows");
      if (ppl_opts.shift && !ppl_opts.windows_file.empty())
        return usage_error("--shift applies to -f (text), not to --windows");
      if (ppl_opts.shift && ppl_opts.llama_cpp)
        return usage_error("--shift and --llama-cpp are two different methods: pick one");
      if (ppl_keep->count() > 0 && ppl_opts.keep + std::max<std::int64_t>(1, ppl_opts.n_ctx / 8) > ppl_opts.n_ctx)
        return usage_error("--keep " + std::to_string(ppl_opts.keep) + " leaves no room in a context of " +
                           std::to_string(ppl_opts.n_ctx) + " for pieces of " +
                           latte::cli::count_of(std::max<std::int64_t>(1, ppl_opts.n_ctx / 8), "token"));
      if (ppl_opts.llama_cpp && ppl_opts.n_ctx < 3)
        return usage_error("--llama-cpp scores the tokens after each chunk's first half: -c " +
                           std::to_string(ppl_opts.n_ctx) + " leaves none (it needs 3 or more)");
      return latte::cli::run_perplexity(ppl_opts);
    }
    if (*mm) {
      mm_opts.vocab_given = mm->get_option("--vocab")->count() > 0;
      return latte::cli::run_make_model(mm_opts);
    }
#ifdef LATTE_HAVE_SERVER
    if (*serve) {
      if (serve_opts.model.empty()) serve_opts.model = latte::cli::default_model_or_explain();
      return latte::server::run_serve(serve_opts);
    }
#endif

  } catch (const latte::cli::UsageError& e) {
    return usage_error(e.what());
  } catch (const latte::api::Exception& e) {  // the API's errors and the commands' own (fail)
    std::fprintf(stderr, "latte: %s: %s\n", latte_status_string(e.status()), e.what());
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
