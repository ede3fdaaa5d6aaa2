// `latte perplexity`: mean negative log-likelihood of every next token.
//   --windows FILE  one window of token ids per line ("1,2,3"): each window is
//                   evaluated from an empty cache, tokens 1.. predicted from
//                   their prefix (so another runtime's numbers can be replayed
//                   exactly, e.g. the training code's in models/*.eval.json);
//   -f TEXT         the file's text, tokenized (with BOS where the model adds
//                   one), cut into windows of --ctx tokens, every next token
//                   scored;
//   --llama-cpp     with -f: llama.cpp's perplexity tool's method, so its
//                   numbers can be compared: whole --ctx chunks only (at least
//                   two; the rest dropped), each chunk's first token made BOS
//                   where the model adds one, and only the tokens after its
//                   first half scored (n_ctx - 1 - n_ctx/2 per chunk);
//   --shift         with -f: the whole text through one session of --ctx
//                   tokens in pieces of --ctx/8, the context shifted (the
//                   first --keep tokens kept, half the rest dropped) before a
//                   piece that does not fit; every token after the first
//                   scored. Against -f's independent windows this measures
//                   what the shift costs or gains in accuracy;
//   --reprefill     with --shift: the same tokens dropped and kept, but the
//                   kept ones prefilled afresh instead of shifted (what a
//                   runtime without a shift does): the difference is what
//                   the shifted rows' stale context costs.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "latte/latte.hpp"
#include "tools/cli/console.h"
#include "tools/cli/commands.h"
#include "tools/cli/progress.h"

namespace latte::cli {

namespace {

std::vector<std::vector<std::int32_t>> read_windows(const std::string& path, std::int32_t n_vocab) {
  std::istringstream in(read_text_file(path));  // bounded: see kMaxInputTextBytes
  std::vector<std::vector<std::int32_t>> wins;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    auto w = parse_token_list(line, where.c_str());
    check_token_ids(w, n_vocab, where);
    if (w.size() >= 2) wins.push_back(std::move(w));
  }
  if (wins.empty()) fail(LATTE_ERR_INVALID_ARGUMENT, "'" + path + "' holds no window of 2 or more tokens");
  return wins;
}

// Whether Ctrl-C or a termination request asks the scoring to stop.
bool stop_asked() { return ctrl_c_pending() || termination_pending(); }

// The exit status after a stop: 130 for Ctrl-C, 128 + the signal for a
// termination request.
int stop_status() { return termination_pending() ? termination_exit_status() : 130; }

// "the windows done so far" as the result line says it: how far scoring got.
std::string stopped_note(std::size_t done, std::size_t total, const char* unit) {
  const std::string by = termination_pending() ? std::string("stopped by ") + termination_signal_name() : "interrupted";
  return "partial (" + by + " after " + std::to_string(done) + " of " + std::to_string(total) + " " + unit + ")";
}

// The running perplexity of n scored tokens with NLL sum nll, for progress.
double running_ppl(double nll, std::int64_t n) { return n > 0 ? std::exp(nll / static_cast<double>(n)) : 0.0; }

// Mean NLL sums of one scored token: logits lg (V) predicting `next`.
void score(const float* lg, int V, std::int32_t next, double& nll, double& nll2, std::int64_t& n) {
  double mx = lg[0];
  for (int i = 1; i < V; ++i) mx = std::max(mx, double(lg[i]));
  double sum = 0;
  for (int i = 0; i < V; ++i) sum += std::exp(double(lg[i]) - mx);
  const double e = (mx + std::log(sum)) - lg[next];
  nll += e;
  nll2 += e * e;
  ++n;
}

// --shift: one session over the whole text, shifted as it fills.
int run_perplexity_shifted(const PerplexityOptions& o, const api::Model& model, const std::vector<std::int32_t>& ids,
                           std::int64_t bos_keep) {
  const int V = model.n_vocab();
  const std::int64_t keep = o.keep >= 0 ? o.keep : bos_keep;
  const std::int64_t piece = std::max<std::int64_t>(1, o.n_ctx / 8);
  if (keep + piece > o.n_ctx)
    throw UsageError("--keep " + std::to_string(keep) + " leaves no room in a context of " + std::to_string(o.n_ctx) +
                     " for pieces of " + count_of(piece, "token"));
  if (ids.size() < 2)
    fail(LATTE_ERR_INVALID_ARGUMENT, "'" + o.text_file + "' gives " + std::to_string(ids.size()) +
                                              " token(s): nothing to predict");
  warn_beyond_trained_context(model.n_ctx_train(), o.n_ctx, "--ctx");
  latte_session_options so = latte_session_default_options();
  so.threads = o.threads;
  so.cache_type = cache_type_of(o.cache);
  so.n_ctx = o.n_ctx;
  so.prefill_chunk = o.prefill_chunk;
  so.prefill_form = prefill_form_of(o.form);
  api::Session s(model, so);
  double nll = 0, nll2 = 0;
  std::int64_t n = 0, shifts = 0, dropped = 0;
  std::vector<float> logits, last;
  ProgressLine progress;
  std::size_t fed = 0;  // tokens of the text fed, in whole pieces
  bool stopped = false;
  for (std::size_t at = 0; at < ids.size(); at += static_cast<std::size_t>(piece)) {
    if (stop_asked()) {
      stopped = true;
      break;
    }
    char line[96];
    const auto head = static_cast<std::size_t>(
        std::snprintf(line, sizeof line, "perplexity: %zu / %zu tokens", at, ids.size()));
    if (n > 0) std::snprintf(line + head, sizeof line - head, ", perplexity %.4f", running_ppl(nll, n));
    progress.show(line);
    const std::size_t len = std::min<std::size_t>(static_cast<std::size_t>(piece), ids.size() - at);
    const api::Span<const std::int32_t> w(ids.data() + at, len);
    if (o.reprefill && s.n_past() + static_cast<std::int64_t>(len) > s.n_ctx()) {
      // The same tokens kept, their cache computed afresh (no stale rows).
      const std::int64_t k = std::min(keep, s.n_past()), d = std::max((s.n_past() - k) / 2, s.n_past() + static_cast<std::int64_t>(len) - s.n_ctx());
      const std::vector<std::int32_t> had = s.tokens();
      std::vector<std::int32_t> kept(had.begin(), had.begin() + k);
      kept.insert(kept.end(), had.begin() + k + d, had.end());
      s.reset();
      if (!kept.empty()) s.prefill(kept);
      ++shifts;
      dropped += d;
    } else if (const std::int64_t d = make_room(s, static_cast<std::int64_t>(len), keep); d > 0) {
      ++shifts;
      dropped += d;
    }
    if (o.decode) {
      logits.resize(len * static_cast<std::size_t>(V));
      for (std::size_t t = 0; t < len; ++t) {
        s.decode(w[t]);
        std::memcpy(logits.data() + t * V, s.logits().data(), sizeof(float) * V);
      }
    } else {
      logits = s.eval_all(w);
    }
    if (at > 0) score(last.data(), V, w[0], nll, nll2, n);  // the previous piece's last token predicts this one's first
    for (std::size_t t = 0; t + 1 < len; ++t) score(logits.data() + t * V, V, w[t + 1], nll, nll2, n);
    last.assign(logits.end() - V, logits.end());
    fed = at + len;
  }
  progress.clear();
  if (stopped && n == 0) {
    std::fprintf(stderr, "perplexity: %s: no token scored yet\n", stopped_note(fed, ids.size(), "tokens").c_str());
    return stop_status();
  }
  const std::string partial = stopped ? stopped_note(fed, ids.size(), "tokens") : std::string();
  const double mean = nll / static_cast<double>(n);
  const double var = nll2 / static_cast<double>(n) - mean * mean;
  const double err = n > 1 && var > 0 ? std::sqrt(var / static_cast<double>(n - 1)) * std::exp(mean) : 0.0;
  if (o.json)
    std::printf("{\"predicted\": %lld, \"mean_nll\": %.8f, \"perplexity\": %.6f, \"perplexity_error\": %.6f, "
                "\"method\": \"%s\", \"n_ctx\": %lld, \"keep\": %lld, \"shifts\": %lld, \"dropped\": %lld, "
                "\"cache_type\": \"%s\", \"form\": \"%s\", \"decode\": %s, \"partial\": %s, \"tokens_fed\": %zu, "
                "\"tokens_total\": %zu}\n",
                static_cast<long long>(n), mean, std::exp(mean), err, o.reprefill ? "shifted_reprefill" : "shifted",
                static_cast<long long>(o.n_ctx), static_cast<long long>(keep), static_cast<long long>(shifts), static_cast<long long>(dropped),
                o.cache.c_str(), o.form.c_str(), o.decode ? "true" : "false", stopped ? "true" : "false", fed, ids.size());
  else
    std::printf("%s%s%lld predicted %s through a context of %lld, %lld %s (first %lld kept, %lld dropped): mean NLL "
                "%.6f, perplexity %.4f +/- %.5f (cache %s, prefill form %s%s)\n",
                partial.c_str(), stopped ? ": " : "", static_cast<long long>(n), n == 1 ? "token" : "tokens",
                static_cast<long long>(o.n_ctx), static_cast<long long>(shifts),
                o.reprefill ? (shifts == 1 ? "re-prefill of the kept tokens" : "re-prefills of the kept tokens")
                            : (shifts == 1 ? "shift" : "shifts"),
                static_cast<long long>(keep), static_cast<long long>(dropped), mean, std::exp(mean), err,
                o.cache.c_str(), o.form.c_str(), o.decode ? ", token by token" : "");
  return stopped ? stop_status() : 0;
}

}  // namespace

int run_perplexity(const PerplexityOptions& o) {
  // Ctrl-C (or a termination request) stops the scoring: the windows done
  // so far are reported, marked partial.
  const CtrlCScope ctrl_c;
  const api::Model model = open_model(o.model, o.no_mmap, o.mmap);
  const int V = model.n_vocab();
  std::vector<std::vector<std::int32_t>> wins;
  std::size_t first_scored = 0;  // logits row of each window where scoring starts
  if (!o.windows_file.empty()) {
    if (o.llama_cpp) throw UsageError("--llama-cpp applies to -f (text), not to --windows");
    wins = read_windows(o.windows_file, V);
  } else {
    if (!model.has_tokenizer()) fail(LATTE_ERR_UNSUPPORTED, "'" + o.model + "' has no tokenizer: use --windows with token ids");
    const bool bos = adds_bos(model);
    const auto ids = model.tokenize(read_text_file(o.text_file), bos ? 1 : 0, /*parse_special=*/false);
    const auto n_ctx = static_cast<std::size_t>(o.n_ctx);
    if (o.shift) {
      if (o.llama_cpp) throw UsageError("--shift and --llama-cpp are two different methods: pick one");
      return run_perplexity_shifted(o, model, ids, bos ? 1 : 0);
    }
    if (o.llama_cpp) {
      // Each chunk scores n_ctx - 1 - n_ctx/2 tokens: none at all with -c 2,
      // which would print a NaN perplexity (and invalid JSON).
      if (n_ctx < 3)
        throw UsageError("--llama-cpp scores the tokens after each chunk's first half: -c " + std::to_string(n_ctx) +
                         " leaves none (it needs 3 or more)");
      if (ids.size() < 2 * n_ctx)
        fail(LATTE_ERR_INVALID_ARGUMENT, "'" + o.text_file + "' gives " + std::to_string(ids.size()) +
                                                  " tokens; --llama-cpp needs at least 2 x --ctx = " +
                                                  std::to_string(2 * n_ctx) + " (whole chunks only, as llama.cpp)");
      for (std::size_t i = 0; i + n_ctx <= ids.size(); i += n_ctx) {
        wins.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(i),
                          ids.begin() + static_cast<std::ptrdiff_t>(i + n_ctx));
        if (bos) wins.back()[0] = model.bos();
      }
      first_scored = n_ctx / 2;
    } else {
      for (std::size_t i = 0; i + 1 < ids.size(); i += n_ctx)
        wins.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(i),
                          ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), i + n_ctx)));
      if (wins.empty())
        fail(LATTE_ERR_INVALID_ARGUMENT, "'" + o.text_file + "' gives " + std::to_string(ids.size()) +
                                                  " token(s): nothing to predict (a window needs 2 or more)");
    }
  }
  std::size_t longest = 0;
  for (const auto& w : wins) longest = std::max(longest, w.size());
  warn_beyond_trained_context(model.n_ctx_train(), static_cast<std::int64_t>(longest), "the longest window");

  latte_session_options so = latte_session_default_options();
  so.threads = o.threads;
  so.cache_type = cache_type_of(o.cache);
  so.n_ctx = static_cast<std::int64_t>(longest);
  so.prefill_chunk = o.prefill_chunk;
  so.prefill_form = prefill_form_of(o.form);
  api::Session s(model, so);
  double nll = 0, nll2 = 0;  // sums of the scored tokens' NLL and its square
  std::int64_t n = 0;
  std::vector<float> logits;
  ProgressLine progress;
  std::size_t done = 0;  // whole windows scored
  bool stopped = false;
  for (const auto& w : wins) {
    char line[96];
    const auto head = static_cast<std::size_t>(
        std::snprintf(line, sizeof line, "perplexity: window %zu / %zu", done + 1, wins.size()));
    if (n > 0) std::snprintf(line + head, sizeof line - head, ", perplexity %.4f", running_ppl(nll, n));
    progress.show(line);
    s.reset();
    if (o.decode) {
      // Token by token: every position through the absorbed decode kernel
      // (a stop asked for meanwhile drops the window).
      logits.resize(w.size() * static_cast<std::size_t>(V));
      for (std::size_t t = 0; t < w.size() && !stop_asked(); ++t) {
        s.decode(w[t]);
        std::memcpy(logits.data() + t * V, s.logits().data(), sizeof(float) * V);
      }
    } else if (!stop_asked()) {
      logits = s.eval_all(w);
    }
    if (stop_asked()) {
      stopped = true;
      break;
    }
    for (std::size_t t = first_scored; t + 1 < w.size(); ++t) score(logits.data() + t * V, V, w[t + 1], nll, nll2, n);
    ++done;
  }
  progress.clear();
  if (stopped && n == 0) {
    std::fprintf(stderr, "perplexity: %s: no window scored yet\n", stopped_note(done, wins.size(), "windows").c_str());
    return stop_status();
  }
  const std::string partial = stopped ? stopped_note(done, wins.size(), "windows") : std::string();
  const double mean = nll / static_cast<double>(n);
  // The perplexity's standard error (llama.cpp's "+/-"): the NLL's sample
  // standard deviation over sqrt(n - 1), times the perplexity.
  const double var = nll2 / static_cast<double>(n) - mean * mean;
  const double err = n > 1 && var > 0 ? std::sqrt(var / static_cast<double>(n - 1)) * std::exp(mean) : 0.0;
  const char* method = o.llama_cpp ? "llama.cpp" : "every token";
  if (o.json)
    std::printf("{\"windows\": %zu, \"predicted\": %lld, \"mean_nll\": %.8f, \"perplexity\": %.6f, "
                "\"perplexity_error\": %.6f, \"method\": \"%s\", \"cache_type\": \"%s\", \"form\": \"%s\", "
                "\"decode\": %s, \"partial\": %s, \"windows_total\": %zu}\n",
                done, static_cast<long long>(n), mean, std::exp(mean), err, method, o.cache.c_str(), o.form.c_str(),
                o.decode ? "true" : "false", stopped ? "true" : "false", wins.size());
  else
    std::printf("%s%s%zu %s, %lld predicted %s: mean NLL %.6f, perplexity %.4f +/- %.5f (scored: %s; cache %s, "
                "prefill form %s%s)\n",
                partial.c_str(), stopped ? ": " : "", done, done == 1 ? "window" : "windows", static_cast<long long>(n),
                n == 1 ? "token" : "tokens", mean, std::exp(mean), err, method, o.cache.c_str(), o.form.c_str(),
                o.decode ? ", token by token" : "");
  return stopped ? stop_status() : 0;
}

}  // namespace latte::cli
