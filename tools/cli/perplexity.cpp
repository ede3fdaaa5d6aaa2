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
//                   first half scored (n_ctx - 1 - n_ctx/2 per chunk).
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "runtime/error.h"
#include "runtime/model/model.h"
#include "runtime/model/session.h"

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
  if (wins.empty()) throw Error(Status::invalid_argument, "'" + path + "' holds no window of 2 or more tokens");
  return wins;
}

}  // namespace

int run_perplexity(const PerplexityOptions& o) {
  auto model = load_model(o.model, o.no_mmap);
  const int V = model->params().n_vocab;
  std::vector<std::vector<std::int32_t>> wins;
  std::size_t first_scored = 0;  // logits row of each window where scoring starts
  if (!o.windows_file.empty()) {
    if (o.llama_cpp) throw Error(Status::invalid_argument, "--llama-cpp applies to -f (text), not to --windows");
    wins = read_windows(o.windows_file, V);
  } else {
    const Tokenizer* tok = model->tokenizer();
    if (!tok) throw Error(Status::unsupported, "'" + o.model + "' has no tokenizer: use --windows with token ids");
    const bool bos = tok->add_bos_by_default() && tok->bos_id() >= 0;
    const auto ids = tok->encode(read_text_file(o.text_file), bos, false);
    const auto n_ctx = static_cast<std::size_t>(o.n_ctx);
    if (o.llama_cpp) {
      // Each chunk scores n_ctx - 1 - n_ctx/2 tokens: none at all with -c 2,
      // which would print a NaN perplexity (and invalid JSON).
      if (n_ctx < 3)
        throw Error(Status::invalid_argument, "--llama-cpp scores the tokens after each chunk's first half: -c " +
                                                  std::to_string(n_ctx) + " leaves none (it needs 3 or more)");
      if (ids.size() < 2 * n_ctx)
        throw Error(Status::invalid_argument, "'" + o.text_file + "' gives " + std::to_string(ids.size()) +
                                                  " tokens; --llama-cpp needs at least 2 x --ctx = " +
                                                  std::to_string(2 * n_ctx) + " (whole chunks only, as llama.cpp)");
      for (std::size_t i = 0; i + n_ctx <= ids.size(); i += n_ctx) {
        wins.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(i),
                          ids.begin() + static_cast<std::ptrdiff_t>(i + n_ctx));
        if (bos) wins.back()[0] = tok->bos_id();
      }
      first_scored = n_ctx / 2;
    } else {
      for (std::size_t i = 0; i + 1 < ids.size(); i += n_ctx)
        wins.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(i),
                          ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), i + n_ctx)));
      if (wins.empty())
        throw Error(Status::invalid_argument, "'" + o.text_file + "' gives " + std::to_string(ids.size()) +
                                                  " token(s): nothing to predict (a window needs 2 or more)");
    }
  }
  std::size_t longest = 0;
  for (const auto& w : wins) longest = std::max(longest, w.size());
  warn_beyond_trained_context(*model, static_cast<std::int64_t>(longest), "the longest window");

  SessionOptions so;
  so.threads = o.threads;
  so.cache = *parse_latent_storage(o.cache);
  so.n_ctx = static_cast<std::int64_t>(longest);
  so.prefill_chunk = o.prefill_chunk;
  if (o.form == "naive") so.prefill_form = MlaForm::naive;
  else if (o.form == "absorbed") so.prefill_form = MlaForm::absorbed;
  Session s(model, so);
  double nll = 0, nll2 = 0;  // sums of the scored tokens' NLL and its square
  std::int64_t n = 0;
  std::vector<float> logits;
  for (const auto& w : wins) {
    s.reset();
    if (o.decode) {
      // Token by token: every position through the absorbed decode kernel.
      logits.resize(w.size() * static_cast<std::size_t>(V));
      for (std::size_t t = 0; t < w.size(); ++t) {
        s.decode(w[t]);
        std::memcpy(logits.data() + t * V, s.logits().data(), sizeof(float) * V);
      }
    } else {
      s.prefill(w, &logits);
    }
    for (std::size_t t = first_scored; t + 1 < w.size(); ++t) {
      const float* lg = logits.data() + t * V;
      double mx = lg[0];
      for (int i = 1; i < V; ++i) mx = std::max(mx, double(lg[i]));
      double sum = 0;
      for (int i = 0; i < V; ++i) sum += std::exp(double(lg[i]) - mx);
      const double e = (mx + std::log(sum)) - lg[w[t + 1]];
      nll += e;
      nll2 += e * e;
      ++n;
    }
  }
  const double mean = nll / static_cast<double>(n);
  // The perplexity's standard error (llama.cpp's "+/-"): the NLL's sample
  // standard deviation over sqrt(n - 1), times the perplexity.
  const double var = nll2 / static_cast<double>(n) - mean * mean;
  const double err = n > 1 && var > 0 ? std::sqrt(var / static_cast<double>(n - 1)) * std::exp(mean) : 0.0;
  const char* method = o.llama_cpp ? "llama.cpp" : "every token";
  if (o.json)
    std::printf("{\"windows\": %zu, \"predicted\": %lld, \"mean_nll\": %.8f, \"perplexity\": %.6f, "
                "\"perplexity_error\": %.6f, \"method\": \"%s\", \"cache_type\": \"%s\", \"form\": \"%s\", "
                "\"decode\": %s}\n",
                wins.size(), static_cast<long long>(n), mean, std::exp(mean), err, method, o.cache.c_str(),
                o.form.c_str(), o.decode ? "true" : "false");
  else
    std::printf("%zu windows, %lld predicted tokens: mean NLL %.6f, perplexity %.4f +/- %.5f (scored: %s; cache %s, "
                "prefill form %s%s)\n",
                wins.size(), static_cast<long long>(n), mean, std::exp(mean), err, method, o.cache.c_str(),
                o.form.c_str(), o.decode ? ", token by token" : "");
  return 0;
}

}  // namespace latte::cli
