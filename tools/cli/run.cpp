// `latte run`: text in, text out. Streams the continuation to stdout as it is
// generated; prompt and decode speed go to stderr at the end. With --chat the
// prompt is one user turn in the model's chat format (latte_chat_tokenize);
// with -i each line read from stdin is a turn (the conversation stays in the
// cache). A full context is shifted (the start kept, the oldest half of the
// rest dropped) unless --no-context-shift.
#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "latte/latte.hpp"
#include "tools/cli/commands.h"
#include "tools/cli/line_input.h"
#include "tools/cli/console.h"
#include "tools/paths.h"
#include "tools/cli/utf8_stream.h"

namespace latte::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A seed no two runs share: the OS's entropy, mixed with the clock where
// std::random_device is a fixed sequence (older MinGW).
std::uint64_t random_seed() {
  std::random_device rd;
  std::uint64_t seed = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  seed ^= static_cast<std::uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count()) *
          0x9E3779B97F4A7C15ULL;
  return seed;
}

// What the user sees of stdout and stderr: a note on stderr starts a line of
// its own even where the text before it (stdout's, when both go to one
// place; or the prompt, read without a terminal to end its line) left one
// open.
struct Screen {
  bool shared = stdout_shares_stderr();
  bool open_line = false;
  // Generated text, written to stdout.
  void text(std::string_view t) {
    if (t.empty()) return;
    std::fwrite(t.data(), 1, t.size(), stdout);
    std::fflush(stdout);
    if (shared) open_line = t.back() != '\n';
  }
  // The end of a text: its newline, flushed at once (stdout is buffered in
  // a pipe, so it would otherwise reach a log after what stderr says next).
  void end_text() {
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (shared) open_line = false;
  }
  // A line on stderr, printf-style, without its newline.
  __attribute__((format(gnu_printf, 2, 3))) void note(const char* format, ...) {
    if (open_line) std::fputc('\n', stderr);
    va_list args;
    va_start(args, format);
    std::vfprintf(stderr, format, args);
    va_end(args);
    std::fputc('\n', stderr);
    std::fflush(stderr);
    open_line = false;
  }
};

// Whether generation should stop: Ctrl-C, or a termination request.
bool stop_asked() { return ctrl_c_pending() || termination_pending(); }

struct Stats {
  std::int64_t prompt_tokens = 0, gen_tokens = 0;
  double prompt_s = 0, gen_s = 0;
  // The last turn: its tokens fed to the model, the tokens the session held
  // before them (reused rather than computed again), and those generated.
  std::int64_t turn_fed = 0, turn_reused = 0, turn_generated = 0;
  // The last turn stopped short because the context filled: said after its
  // text, not left silent, where a short answer would read as the model's.
  std::string stopped;
  // The end-of-generation token that closed the last reply, when it went
  // into the context; -1 when the reply was cut short.
  std::int32_t closed_by = -1;
  bool interrupted = false;  // by Ctrl-C, at least once
};

// Makes room for n_new tokens by a context shift (make_room.cpp), saying
// so on stderr; nothing where shifting is off or they fit.
struct Shifter {
  bool on = true;
  std::int64_t keep = 0;
  Screen* screen = nullptr;
  // Whether n_new tokens can be made to fit.
  bool can_fit(const api::Session& s, std::int64_t n_new) const {
    return s.n_past() + n_new <= s.n_ctx() || (on && n_new <= s.n_ctx() - std::min(keep, s.n_past()));
  }
  void make_room(api::Session& s, std::int64_t n_new) const {
    if (!on || s.n_past() + n_new <= s.n_ctx()) return;
    const std::int64_t dropped = cli::make_room(s, n_new, keep);
    screen->note("[context full: kept %lld, dropped %lld]", static_cast<long long>(s.n_past()),
                 static_cast<long long>(dropped));
  }
};

// Prefills `prompt`, then samples up to n tokens, streaming their text.
// Returns the generated ids (an end-of-generation token ends the loop and is
// fed to the session, so a following turn sees a closed turn).
// The first `cached` tokens of the prompt are in the session already (a
// loaded --session): only the rest is fed, but the sampler's penalty sees
// them all.
std::vector<std::int32_t> generate(api::Session& s, const api::Model& model, api::Sampler& sampler,
                                   const std::vector<std::int32_t>& prompt, int n, const RunOptions& o, Stats& st,
                                   const Shifter& shifter, Screen& screen, std::size_t cached = 0) {
  auto t0 = std::chrono::steady_clock::now();
  const auto feed = api::Span<const std::int32_t>(prompt).subspan(cached);
  if (!shifter.can_fit(s, static_cast<std::int64_t>(feed.size())))
    fail(LATTE_ERR_CONTEXT_OVERFLOW, "the prompt (" + count_of(static_cast<long long>(feed.size()), "token") +
                                         ") does not fit the context of " + std::to_string(s.n_ctx()) + " with " +
                                         count_of(s.n_past(), "token") + " already used (raise --ctx)");
  if (o.verbose_prompt) {
    const std::string text = model.detokenize(prompt, /*hide_control=*/false);
    screen.note("[prompt, %zu %s: %s]", prompt.size(), prompt.size() == 1 ? "token" : "tokens", text.c_str());
  }
  shifter.make_room(s, static_cast<std::int64_t>(feed.size()));
  st.turn_reused = s.n_past();
  st.turn_fed = static_cast<std::int64_t>(feed.size());
  if (!feed.empty()) s.prefill(feed);
  st.prompt_s += seconds_since(t0);
  st.prompt_tokens += static_cast<std::int64_t>(feed.size());
  for (auto t : prompt) sampler.accept(t);

  Utf8Stream utf8;
  std::vector<std::int32_t> out;
  bool ended = false;  // by an end-of-generation token
  st.closed_by = -1;
  t0 = std::chrono::steady_clock::now();
  bool interrupted = false;
  for (int i = 0; i < n; ++i) {
    if (stop_asked()) {
      clear_ctrl_c();
      interrupted = true;
      break;
    }
    const std::int32_t id = sampler.sample(s.logits());
    out.push_back(id);
    // With the context full and no shift, the last position's logits still
    // give one more token; it cannot be decoded (a following turn would not
    // fit).
    const bool room = shifter.can_fit(s, 1);
    if (model.is_end_of_generation(id) && !o.ignore_eos) {
      if (room) {
        shifter.make_room(s, 1);
        s.decode(id);
        st.closed_by = id;
      }
      ended = true;
      break;
    }
    // Appended rather than `"," + std::to_string(id)`: GCC 12 warns
    // (-Wrestrict, a false positive) on that operator+ when inlined.
    std::string text;
    if (o.print_ids) {
      if (out.size() > 1) text += ',';
      text += std::to_string(id);
    } else {
      text = utf8.push(model.token_to_piece(id, /*hide_control=*/true));
    }
    screen.text(text);
    if (!room) break;
    shifter.make_room(s, 1);
    s.decode(id);
  }
  screen.text(utf8.flush());
  st.gen_s += seconds_since(t0);
  st.gen_tokens += static_cast<std::int64_t>(out.size());
  st.turn_generated = static_cast<std::int64_t>(out.size());
  st.stopped.clear();
  const bool terminated = interrupted && termination_pending();
  st.interrupted = st.interrupted || (interrupted && !terminated);
  if (terminated)
    st.stopped = std::string("[stopped by ") + termination_signal_name() + " after " + std::to_string(out.size()) +
                 " of " + count_of(n, "token") + "]";
  else if (interrupted)
    st.stopped = "[interrupted after " + std::to_string(out.size()) + " of " + count_of(n, "token") + "]";
  else if (!ended && static_cast<std::int64_t>(out.size()) < n)
    st.stopped = "[stopped after " + std::to_string(out.size()) + " of " + count_of(n, "token") +
                 ": the context of " + std::to_string(s.n_ctx()) + " tokens is full (raise --ctx" +
                 (shifter.on ? std::string(")]") : std::string(", or drop --no-context-shift)]"));
  return out;
}

}  // namespace

int run_generate(const RunOptions& o) {
  // Ctrl-C stops the reply being generated (with -i: back to the prompt; at
  // the prompt: the end of input); a second one before the first is acted
  // on ends the program at once. A termination request (SIGTERM, SIGHUP)
  // stops the reply too, saves the session, and ends the program.
  const CtrlCScope ctrl_c;
  latte_sampler_options sampling = latte_sampler_default_options();
  sampling.temperature = o.temperature;
  sampling.top_k = o.top_k;
  sampling.top_p = o.top_p;
  sampling.min_p = o.min_p;
  sampling.repeat_penalty = o.repeat_penalty;
  sampling.repeat_last_n = o.repeat_last_n;
  sampling.seed = o.seed_given ? o.seed : random_seed();
  api::Sampler sampler(sampling);  // checks its settings before the model loads
  // The constraint's text, read before the model loads (a missing file is
  // reported at once); set on the sampler once the model's vocabulary is there.
  std::string grammar_text = o.grammar, schema_text;
  if (!o.grammar_file.empty()) grammar_text = read_text_file(o.grammar_file);
  if (o.json) schema_text = R"({"type":"object"})";
  else if (!o.json_schema.empty())
    schema_text = o.json_schema.front() == '{' ? o.json_schema : read_text_file(o.json_schema);
  const auto prompt_ids = o.prompt_ids.empty() ? std::vector<std::int32_t>{} : parse_token_list(o.prompt_ids, "--prompt-ids");
  // -f: the file's text, less the newline an editor ends its last line with.
  std::string prompt_text = o.prompt;
  if (!o.prompt_file.empty()) {
    prompt_text = read_text_file(o.prompt_file);
    if (prompt_text.ends_with('\n')) prompt_text.pop_back();
    if (prompt_text.ends_with('\r')) prompt_text.pop_back();
    if (prompt_text.empty()) fail(LATTE_ERR_INVALID_ARGUMENT, "-f: '" + o.prompt_file + "' holds no prompt text");
  }

  const std::string path = o.model.empty() ? default_model_or_explain() : o.model;
  const api::Model model = open_model(path, o.no_mmap, o.mmap);
  if (!model.has_tokenizer())
    fail(LATTE_ERR_UNSUPPORTED, "'" + path + "' has no tokenizer (tokenizer.ggml.*): use `latte eval` with token ids");
  check_token_ids(prompt_ids, model.n_vocab(), "--prompt-ids");
  const std::int64_t trained = model.n_ctx_train();
  latte_session_options so = latte_session_default_options();
  so.threads = o.threads;
  if (o.n_ctx >= 0) so.n_ctx = o.n_ctx;  // else the API's default, capped at the trained context
  else if (trained > 0) so.n_ctx = std::min(so.n_ctx, trained);
  so.cache_type = cache_type_of(o.cache);
  api::Session s(model, so);
  // --keep against the context the model gave (main.cpp judged it against
  // an explicit --ctx before loading).
  if (o.keep >= s.n_ctx())
    throw UsageError("--keep " + std::to_string(o.keep) + " keeps the whole context of " + std::to_string(s.n_ctx()) +
                     " tokens (a shift keeps fewer tokens than the context holds; raise --ctx or lower --keep)");
  warn_beyond_trained_context(trained, s.n_ctx(), "--ctx");
  // Greedy decoding draws nothing: a seed only matters above temperature 0.
  if (!o.seed_given && sampling.temperature > 0)
    std::fprintf(stderr, "seed: %llu\n", static_cast<unsigned long long>(sampling.seed));
  // Each reply starts the grammar afresh (with -i, every turn's).
  const auto constrain = [&] {
    if (!grammar_text.empty()) sampler.set_grammar(model, grammar_text);
    else if (!schema_text.empty()) sampler.set_json_schema(model, schema_text);
  };
  constrain();
  Stats st;
  Screen screen;
  // --session: a conversation (or a long prompt) resumed from a file, and
  // the session written back to it after each reply.
  std::error_code exists_error;  // an unreadable path is load_state's to report
  const bool resumed = !o.session_file.empty() && (std::filesystem::exists(path_from_utf8(o.session_file), exists_error) || exists_error);
  if (resumed) {
    s.load(o.session_file);
    const std::vector<std::int32_t> had = s.tokens();
    if (!had.empty() && model.is_end_of_generation(had.back())) st.closed_by = had.back();
  }
  const auto save_session = [&] {
    if (!o.session_file.empty()) s.save(o.session_file);
  };
  // --chat: the format (--chat-format, else the one the model's template
  // writes), checked against the vocabulary here, and whether it opens a
  // conversation with BOS.
  const bool chat = o.chat;
  const std::string chat_format = !chat ? std::string() : o.chat_format.empty() ? model.chat_format() : o.chat_format;
  const bool chat_bos = chat && model.chat_apply({{"user", ""}}, false, chat_format).add_bos;

  // A shift keeps --keep tokens: by default what opens every conversation,
  // BOS and (--chat) the system turn.
  Shifter shifter;
  shifter.on = !o.no_context_shift;
  shifter.screen = &screen;
  if (o.keep >= 0) shifter.keep = o.keep;
  else if (chat && !o.system_prompt.empty())
    shifter.keep = static_cast<std::int64_t>(
        model.chat_tokenize({{"system", o.system_prompt}}, false, chat_bos ? 1 : 0, chat_format).size());
  else
    shifter.keep = (chat ? chat_bos : adds_bos(model)) && model.bos() >= 0 ? 1 : 0;

  // A conversation's first turn opens with the system turn (and BOS); a
  // later one first closes the reply before it, as far as its end token has
  // not already (a reply cut short by -n has no end token in the context).
  // The reply itself is never encoded again: its tokens are in the session
  // as the model generated them.
  auto encode_turn = [&](const std::string& text, bool first) {
    if (!chat) return model.tokenize(text, first ? -1 : 0, /*parse_special=*/false);
    // Control tokens only from the template: a typed "<|im_end|>" stays text.
    if (!first) return model.chat_tokenize_turn(st.closed_by, {{"user", text}}, true, chat_format);
    std::vector<api::Model::ChatMessage> turns;
    if (!o.system_prompt.empty()) turns.push_back({"system", o.system_prompt});
    turns.push_back({"user", text});
    return model.chat_tokenize(turns, true, chat_bos ? 1 : 0, chat_format);
  };

  // The end of a generated text, then why it stopped short, if it did.
  const auto end_text = [&] {
    screen.end_text();
    if (!st.stopped.empty()) screen.note("%s", st.stopped.c_str());
  };
  const bool have_prompt = !prompt_text.empty() || !prompt_ids.empty();
  const auto first_prompt = [&] { return prompt_ids.empty() ? encode_turn(prompt_text, true) : prompt_ids; };
  if (!o.interactive) {
    // A resumed session keeps the prompt's longest prefix it holds; at least
    // the prompt's last token is fed again, for the logits to sample from.
    const std::vector<std::int32_t> prompt = first_prompt();
    std::size_t cached = 0;
    if (resumed) {
      const auto have = s.tokens();
      // Past its unshifted prefix a shifted session's rows saw tokens the
      // prompt does not hold: not what the prompt's prefill would give.
      const auto reusable = static_cast<std::size_t>(s.n_unshifted());
      while (cached < prompt.size() && cached < reusable && have[cached] == prompt[cached]) ++cached;
      if (cached == prompt.size() && !(!s.logits().empty() && have.size() == prompt.size())) --cached;
      s.truncate(static_cast<std::int64_t>(cached));
      screen.note("[session %s: %zu of the prompt's %s reused]", o.session_file.c_str(), cached,
                  count_of(static_cast<long long>(prompt.size()), "token").c_str());
    }
    generate(s, model, sampler, prompt, o.n_predict, o, st, shifter, screen, cached);
    end_text();
    save_session();
  } else {
    LineInput input("> ");
    if (chat)
      screen.note("interactive: one user turn per line (chat format %s%s), end with Ctrl-D",
                  chat_format.c_str(), input.editing() ? "; line editing" : "");
    else
      screen.note("interactive: one prompt per line%s, end with Ctrl-D", input.editing() ? " (line editing)" : "");
    if (resumed)
      screen.note("[session %s: %s resumed]", o.session_file.c_str(), count_of(s.n_past(), "token").c_str());
    int turns = 0;
    // One turn (-p, or a line read): a conversation's first turn when the
    // session is empty. A turn the conversation has no room left for starts
    // a new one (the model's context is all it can see) rather than ending
    // the program, when it fits alone; one that cannot fit even alone is
    // refused, the conversation kept, and the next line read.
    const auto take_turn = [&](const std::string& text, bool ids) {
      const auto encode = [&](bool first) { return ids ? prompt_ids : encode_turn(text, first); };
      std::vector<std::int32_t> turn = encode(s.n_past() == 0);
      if (s.n_past() > 0 && !shifter.can_fit(s, static_cast<std::int64_t>(turn.size()))) {
        std::vector<std::int32_t> fresh = encode(true);
        if (static_cast<std::int64_t>(fresh.size()) > s.n_ctx()) {
          screen.note("latte: context overflow: the turn takes %zu tokens, more than the whole context of %lld: refused (the "
                      "conversation goes on)",
                      fresh.size(), static_cast<long long>(s.n_ctx()));
          return;
        }
        screen.note("[the context of %lld tokens is full: starting a new conversation]", static_cast<long long>(s.n_ctx()));
        s.reset();
        sampler.reset(sampling.seed);  // the penalty's history was the old conversation's
        st.closed_by = -1;
        turn = std::move(fresh);
      }
      try {
        constrain();
        generate(s, model, sampler, turn, o.n_predict, o, st, shifter, screen);
      } catch (const api::Exception& e) {
        if (e.status() != LATTE_ERR_CONTEXT_OVERFLOW) throw;
        screen.note("latte: %s: %s", latte_status_string(e.status()), e.what());
        return;
      }
      end_text();
      save_session();
      // What the turn cost: the new turn's tokens computed, the
      // conversation before it reused from the session.
      if (chat)
        screen.note("[turn %d: %lld prompt %s computed, %lld reused from the session, %lld generated]", ++turns,
                    static_cast<long long>(st.turn_fed), st.turn_fed == 1 ? "token" : "tokens",
                    static_cast<long long>(st.turn_reused), static_cast<long long>(st.turn_generated));
    };
    if (have_prompt) take_turn(prompt_text, !prompt_ids.empty());  // -p or --prompt-ids: the first turn
    std::string line;
    while (!termination_pending()) {
      // End of input, or Ctrl-C at the prompt: end the "> " line.
      LineRead got = LineRead::end;
      if (stop_asked()) std::fputs("> ", stderr);
      else got = input.read(line);
      // Read without a terminal (whose echo of Enter ends it), the prompt's
      // line stays open until the reply (or a note) follows it.
      screen.open_line = got == LineRead::line && !stdin_is_terminal();
      if (got == LineRead::too_long)
        fail(LATTE_ERR_INVALID_ARGUMENT, "-i: a line of input is longer than " +
                                             std::to_string(kMaxInputTextBytes >> 20) + " MiB, the limit: refused");
      if (got == LineRead::end) {
        std::fputc('\n', stderr);
        break;
      }
      if (line.empty()) continue;
      take_turn(line, false);
    }
  }
  std::fprintf(stderr, "prompt: %s, %.1f tok/s | generated: %s, %.1f tok/s | cache %s, %lld/%lld tokens\n",
               count_of(st.prompt_tokens, "token").c_str(), st.prompt_s > 0 ? st.prompt_tokens / st.prompt_s : 0.0,
               count_of(st.gen_tokens, "token").c_str(), st.gen_s > 0 ? st.gen_tokens / st.gen_s : 0.0, o.cache.c_str(),
               static_cast<long long>(s.n_past()), static_cast<long long>(s.n_ctx()));
  if (termination_pending()) return termination_exit_status();  // 128 + the signal, as the shell reports it
  return !o.interactive && st.interrupted ? 130 : 0;  // 128 + SIGINT, as the shell reports an interrupted program
}

}  // namespace latte::cli
