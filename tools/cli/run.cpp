// `latte run`: text in, text out. Streams the continuation to stdout as it is
// generated; prompt and decode speed go to stderr at the end. With --chat the
// prompt is one user turn in the model's chat format (runtime/tokenizer/chat.h);
// with -i each line read from stdin is a turn (the conversation stays in the
// cache). A full context is shifted (the start kept, the oldest half of the
// rest dropped) unless --no-context-shift.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "platform/console.h"
#include "platform/paths.h"
#include "runtime/error.h"
#include "runtime/model/model.h"
#include "runtime/session/session.h"
#include "runtime/sampler/sampler.h"
#include "runtime/tokenizer/chat.h"
#include "runtime/tokenizer/tokenizer.h"

namespace latte::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Stats {
  std::int64_t prompt_tokens = 0, gen_tokens = 0;
  double prompt_s = 0, gen_s = 0;
  // The last turn stopped short because the context filled: said after its
  // text, not left silent, where a short answer would read as the model's.
  std::string stopped;
  // The end-of-generation token that closed the last reply, when it went
  // into the context; -1 when the reply was cut short.
  std::int32_t closed_by = -1;
  bool interrupted = false;  // by Ctrl-C, at least once
};

// Makes room for n_new tokens by a context shift (Session::make_room), saying
// so on stderr; nothing where shifting is off or they fit.
struct Shifter {
  bool on = true;
  std::int64_t keep = 0;
  // Whether n_new tokens can be made to fit.
  bool can_fit(const Session& s, std::int64_t n_new) const {
    return s.n_past() + n_new <= s.n_ctx() || (on && n_new <= s.n_ctx() - std::min(keep, s.n_past()));
  }
  void make_room(Session& s, std::int64_t n_new) const {
    if (!on || s.n_past() + n_new <= s.n_ctx()) return;
    const std::int64_t dropped = s.make_room(n_new, keep);
    std::fprintf(stderr, "[context full: kept %lld, dropped %lld]\n", static_cast<long long>(s.n_past()),
                 static_cast<long long>(dropped));
  }
};

// Prefills `prompt`, then samples up to n tokens, streaming their text.
// Returns the generated ids (an end-of-generation token ends the loop and is
// fed to the session, so a following turn sees a closed turn).
// The first `cached` tokens of the prompt are in the session already (a
// loaded --session): only the rest is fed, but the sampler's penalty sees
// them all.
std::vector<std::int32_t> generate(Session& s, const Tokenizer& tok, Sampler& sampler,
                                   const std::vector<std::int32_t>& prompt, int n, const RunOptions& o, Stats& st,
                                   const Shifter& shifter, std::size_t cached = 0) {
  auto t0 = std::chrono::steady_clock::now();
  const auto feed = std::span(prompt).subspan(cached);
  if (!shifter.can_fit(s, static_cast<std::int64_t>(feed.size())))
    throw Error(Status::context_overflow, "the prompt (" + std::to_string(feed.size()) + " tokens) does not fit the context of " +
                                              std::to_string(s.n_ctx()) + " with " + std::to_string(s.n_past()) +
                                              " tokens already used (raise --ctx)");
  if (o.verbose_prompt) {
    const std::string text = tok.decode(prompt);
    std::fprintf(stderr, "[prompt, %zu tokens: %s]\n", prompt.size(), text.c_str());
  }
  shifter.make_room(s, static_cast<std::int64_t>(feed.size()));
  if (!feed.empty()) s.prefill(feed);
  st.prompt_s += seconds_since(t0);
  st.prompt_tokens += static_cast<std::int64_t>(feed.size());
  for (auto t : prompt) sampler.accept(t);

  Utf8StreamDecoder utf8;
  std::vector<std::int32_t> out;
  bool ended = false;  // by an end-of-generation token
  st.closed_by = -1;
  t0 = std::chrono::steady_clock::now();
  bool interrupted = false;
  for (int i = 0; i < n; ++i) {
    if (ctrl_c_pending()) {
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
    if (tok.is_end_of_generation(id) && !o.ignore_eos) {
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
      text = utf8.push(tok.token_to_piece(id, /*hide_control=*/true));
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (!room) break;
    shifter.make_room(s, 1);
    s.decode(id);
  }
  const std::string rest = utf8.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fflush(stdout);
  st.gen_s += seconds_since(t0);
  st.gen_tokens += static_cast<std::int64_t>(out.size());
  st.stopped.clear();
  st.interrupted = st.interrupted || interrupted;
  if (interrupted)
    st.stopped = "[interrupted after " + std::to_string(out.size()) + " of " + std::to_string(n) + " tokens]";
  else if (!ended && static_cast<std::int64_t>(out.size()) < n)
    st.stopped = "[stopped after " + std::to_string(out.size()) + " of " + std::to_string(n) +
                 " tokens: the context of " + std::to_string(s.n_ctx()) + " tokens is full (raise --ctx" +
                 (shifter.on ? std::string(")]") : std::string(", or drop --no-context-shift)]"));
  return out;
}

}  // namespace

int run_generate(const RunOptions& o) {
  // Ctrl-C stops the reply being generated (with -i: back to the prompt; at
  // the prompt: the end of input); a second one before the first is acted
  // on ends the program at once.
  const CtrlCScope ctrl_c;
  Sampler sampler(copy_sampling_fields<SamplerConfig>(o));  // checks its settings before the model loads
  const auto prompt_ids = o.prompt_ids.empty() ? std::vector<std::int32_t>{} : parse_token_list(o.prompt_ids, "--prompt-ids");
  // -f: the file's text, less the newline an editor ends its last line with.
  std::string prompt_text = o.prompt;
  if (!o.prompt_file.empty()) {
    prompt_text = read_text_file(o.prompt_file);
    if (prompt_text.ends_with('\n')) prompt_text.pop_back();
    if (prompt_text.ends_with('\r')) prompt_text.pop_back();
    if (prompt_text.empty()) throw Error(Status::invalid_argument, "-f: '" + o.prompt_file + "' holds no prompt text");
  }

  const std::string path = o.model.empty() ? default_model_path() : o.model;
  auto model = load_model(path, o.no_mmap);
  const Tokenizer* tok = model->tokenizer();
  if (!tok) throw Error(Status::unsupported, "'" + path + "' has no tokenizer (tokenizer.ggml.*): use `latte eval` with token ids");
  check_token_ids(prompt_ids, model->params().n_vocab, "--prompt-ids");
  const std::int64_t trained = model->params().context_length;
  SessionOptions so;
  so.threads = o.threads;
  if (o.n_ctx >= 0) so.n_ctx = o.n_ctx;  // else SessionOptions' default, capped at the trained context
  else if (trained > 0) so.n_ctx = std::min(so.n_ctx, trained);
  so.cache = *parse_latent_storage(o.cache);
  Session s(model, so);
  warn_beyond_trained_context(*model, s.n_ctx(), "--ctx");
  Stats st;
  // --session: a conversation (or a long prompt) resumed from a file, and
  // the session written back to it after each reply.
  std::error_code exists_error;  // an unreadable path is load_state's to report
  const bool resumed = !o.session_file.empty() && (std::filesystem::exists(path_from_utf8(o.session_file), exists_error) || exists_error);
  if (resumed) {
    s.load_state(o.session_file);
    if (s.n_past() > 0 && tok->is_end_of_generation(s.tokens().back())) st.closed_by = s.tokens().back();
  }
  const auto save_session = [&] {
    if (!o.session_file.empty()) s.save_state(o.session_file);
  };
  std::optional<ChatFormatter> chat;
  if (o.chat)
    chat.emplace(*tok, o.chat_format.empty() ? detect_chat_format(*tok, model_arch_name(model->params().arch))
                                             : *parse_chat_format(o.chat_format));

  // A shift keeps --keep tokens: by default what opens every conversation,
  // BOS and (--chat) the system turn.
  Shifter shifter;
  shifter.on = !o.no_context_shift;
  if (o.keep >= 0) shifter.keep = o.keep;
  else if (chat && !o.system_prompt.empty())
    shifter.keep = static_cast<std::int64_t>(
        chat->encode(std::vector<ChatTurn>{{"system", o.system_prompt}}, false, chat->add_bos()).size());
  else
    shifter.keep = (chat ? chat->add_bos() : tok->add_bos_by_default()) && tok->bos_id() >= 0 ? 1 : 0;

  // A conversation's first turn opens with the system turn (and BOS); a
  // later one first closes the reply before it, as far as its end token has
  // not already (a reply cut short by -n has no end token in the context).
  auto encode_turn = [&](const std::string& text, bool first) {
    if (!chat) return tok->encode(text, first && tok->add_bos_by_default(), /*parse_special=*/false);
    std::vector<ChatTurn> turns;
    if (first && !o.system_prompt.empty()) turns.push_back({"system", o.system_prompt});
    turns.push_back({"user", text});
    // Control tokens only from the template: a typed "<|im_end|>" stays text.
    return chat->encode(turns, true, first && chat->add_bos(), first ? std::string() : chat->reply_end_after(st.closed_by));
  };

  // The newline that ends a generated text is flushed at once: stdout is
  // buffered in a pipe, so it would otherwise reach a log (2>&1) after the
  // prompt or statistics that stderr prints next, leaving them on the
  // text's last line.
  const auto end_text = [&st] {
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (!st.stopped.empty()) std::fprintf(stderr, "%s\n", st.stopped.c_str());
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
      if (cached == prompt.size() && !(s.has_logits() && have.size() == prompt.size())) --cached;
      s.truncate(static_cast<std::int64_t>(cached));
      std::fprintf(stderr, "[session %s: %zu of the prompt's %zu tokens reused]\n", o.session_file.c_str(), cached,
                   prompt.size());
    }
    generate(s, *tok, sampler, prompt, o.n_predict, o, st, shifter, cached);
    end_text();
    save_session();
  } else {
    if (chat)
      std::fprintf(stderr, "interactive: one user turn per line (chat format %s), end with Ctrl-D\n",
                   std::string(chat_format_name(chat->format())).c_str());
    else
      std::fprintf(stderr, "interactive: one prompt per line, end with Ctrl-D\n");
    if (resumed)
      std::fprintf(stderr, "[session %s: %lld tokens resumed]\n", o.session_file.c_str(),
                   static_cast<long long>(s.n_past()));
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
          std::fprintf(stderr, "latte: context_overflow: the turn takes %zu tokens, more than the whole context of %lld: "
                               "refused (the conversation goes on)\n",
                       fresh.size(), static_cast<long long>(s.n_ctx()));
          return;
        }
        std::fprintf(stderr, "[the context of %lld tokens is full: starting a new conversation]\n",
                     static_cast<long long>(s.n_ctx()));
        s.reset();
        sampler.reset();  // the penalty's history was the old conversation's
        st.closed_by = -1;
        turn = std::move(fresh);
      }
      try {
        generate(s, *tok, sampler, turn, o.n_predict, o, st, shifter);
      } catch (const Error& e) {
        if (e.status() != Status::context_overflow) throw;
        std::fprintf(stderr, "latte: %s: %s\n", status_name(e.status()), e.what());
        return;
      }
      end_text();
      save_session();
    };
    if (have_prompt) take_turn(prompt_text, !prompt_ids.empty());  // -p or --prompt-ids: the first turn
    std::string line;
    while (true) {
      std::fprintf(stderr, "> ");
      // End of input, or Ctrl-C at the prompt: end the "> " line.
      const LineRead got = ctrl_c_pending() ? LineRead::end : read_line_bounded(std::cin, line);
      if (got == LineRead::too_long)
        throw Error(Status::invalid_argument, "-i: a line of input is longer than " +
                                                  std::to_string(kMaxInputTextBytes >> 20) + " MiB, the limit: refused");
      if (got == LineRead::end) {
        std::fputc('\n', stderr);
        break;
      }
      if (line.empty()) continue;
      take_turn(line, false);
    }
  }
  std::fprintf(stderr, "prompt: %lld tokens, %.1f tok/s | generated: %lld tokens, %.1f tok/s | cache %s, %lld/%lld tokens\n",
               static_cast<long long>(st.prompt_tokens), st.prompt_s > 0 ? st.prompt_tokens / st.prompt_s : 0.0,
               static_cast<long long>(st.gen_tokens), st.gen_s > 0 ? st.gen_tokens / st.gen_s : 0.0, o.cache.c_str(),
               static_cast<long long>(s.n_past()), static_cast<long long>(s.n_ctx()));
  return !o.interactive && st.interrupted ? 130 : 0;  // 128 + SIGINT, as the shell reports an interrupted program
}

}  // namespace latte::cli
