// `latte perplexity`: mean negative log-likelihood of every next token.
//   --windows FILE  one window of token ids per line ("1,2,3"): each window is
//                   evaluated from an empty cache, tokens 1.. predicted from
//                   their prefix (so another runtime's numbers can be replayed
//                   exactly, e.g. the training code's in models/*.eval.json);
//   -f TEXT         the file's text, tokenized with BOS, cut into windows of
//                   --ctx tokens.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/cli/commands.h"
#include "runtime/error.h"
#include "runtime/model/session.h"

namespace latte::cli {

namespace {

std::vector<std::vector<std::int32_t>> read_windows(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(Status::io_error, "cannot open '" + path + "': " + std::strerror(errno));
  std::vector<std::vector<std::int32_t>> wins;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    auto w = parse_token_list(line, (path + ":" + std::to_string(lineno)).c_str());
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
  if (!o.windows_file.empty()) {
    wins = read_windows(o.windows_file);
  } else {
    const Tokenizer* tok = model->tokenizer();
    if (!tok) throw Error(Status::unsupported, "'" + o.model + "' has no tokenizer: use --windows with token ids");
    std::ifstream in(o.text_file, std::ios::binary);
    if (!in) throw Error(Status::io_error, "cannot open '" + o.text_file + "': " + std::strerror(errno));
    std::stringstream ss;
    ss << in.rdbuf();
    const auto ids = tok->encode(ss.str(), tok->bos_id() >= 0, false);
    for (std::size_t i = 0; i + 1 < ids.size(); i += static_cast<std::size_t>(o.n_ctx))
      wins.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(i),
                        ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), i + o.n_ctx)));
  }
  std::size_t longest = 0;
  for (const auto& w : wins) longest = std::max(longest, w.size());

  SessionOptions so;
  so.threads = o.threads;
  so.cache = *parse_latent_storage(o.cache);
  so.n_ctx = static_cast<std::int64_t>(longest);
  so.prefill_chunk = o.prefill_chunk;
  so.prefill_form = o.form == "naive" ? FormChoice::naive : o.form == "absorbed" ? FormChoice::absorbed : FormChoice::cost_model;
  Session s(model, so);
  double nll = 0;
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
    for (std::size_t t = 0; t + 1 < w.size(); ++t) {
      const float* lg = logits.data() + t * V;
      double mx = lg[0];
      for (int i = 1; i < V; ++i) mx = std::max(mx, double(lg[i]));
      double sum = 0;
      for (int i = 0; i < V; ++i) sum += std::exp(double(lg[i]) - mx);
      nll += (mx + std::log(sum)) - lg[w[t + 1]];
      ++n;
    }
  }
  const double mean = nll / static_cast<double>(n);
  if (o.json)
    std::printf("{\"windows\": %zu, \"predicted\": %lld, \"mean_nll\": %.8f, \"perplexity\": %.6f, \"cache_type\": \"%s\", "
                "\"form\": \"%s\", \"decode\": %s}\n",
                wins.size(), static_cast<long long>(n), mean, std::exp(mean), o.cache.c_str(), o.form.c_str(),
                o.decode ? "true" : "false");
  else
    std::printf("%zu windows, %lld predicted tokens: mean NLL %.6f, perplexity %.4f (cache %s, prefill form %s%s)\n",
                wins.size(), static_cast<long long>(n), mean, std::exp(mean), o.cache.c_str(), o.form.c_str(),
                o.decode ? ", token by token" : "");
  return 0;
}

}  // namespace latte::cli
