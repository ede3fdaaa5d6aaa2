#include "runtime/sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "runtime/error.h"
#include "runtime/grammar/token_constraint.h"

namespace latte {

namespace {

Error bad_config(const std::string& msg) { return Error(Status::invalid_argument, "sampler: " + msg); }

// Most likely first; ties: lower id first.
bool more_likely(const TokenProb& a, const TokenProb& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

void check_logits(std::span<const float> logits) {
  if (logits.empty()) throw Error(Status::invalid_argument, "sampler: empty logits");
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i]) || logits[i] == std::numeric_limits<float>::infinity())
      throw Error(Status::invalid_argument,
                  "sampler: logit " + std::to_string(i) + " is " + (std::isnan(logits[i]) ? "NaN" : "+inf"));
  }
}

// Softmax of the candidates' logits / temperature into p, in double, from
// the differences to the largest logit: logit / temperature itself can
// overflow float (and a tiny temperature would then give NaN, not greedy).
void softmax(std::vector<TokenProb>& c, double temperature = 1.0) {
  float m = -std::numeric_limits<float>::infinity();
  for (const auto& t : c) m = std::max(m, t.logit);
  double sum = 0.0;
  std::vector<double> e(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) {
    e[i] = std::exp((static_cast<double>(c[i].logit) - m) / temperature);
    sum += e[i];
  }
  for (std::size_t i = 0; i < c.size(); ++i) c[i].p = static_cast<float>(e[i] / sum);
}

// Adds each bias to its token's logit, the sum clamped to the finite range
// (a bias of -inf, or a logit already -inf, gives -inf: banned).
void apply_logit_bias(std::span<float> logits, std::span<const LogitBias> biases) {
  constexpr float kMax = std::numeric_limits<float>::max();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (const LogitBias& b : biases) {
    if (static_cast<std::size_t>(b.token) >= logits.size())
      throw Error(Status::invalid_argument, "sampler: a logit bias names token " + std::to_string(b.token) +
                                                ", outside the " + std::to_string(logits.size()) + " logits");
    float& l = logits[static_cast<std::size_t>(b.token)];
    if (l == -kInf || b.bias == -kInf) l = -kInf;
    else l = std::clamp(l + b.bias, -kMax, kMax);
  }
}

}  // namespace

void SamplerConfig::validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f)
    throw bad_config("temperature must be a finite number >= 0 (0 = greedy), got " + std::to_string(temperature));
  if (top_k < 0) throw bad_config("top_k must be >= 0 (0 = off), got " + std::to_string(top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f))
    throw bad_config("top_p must be in (0, 1] (1 = off), got " + std::to_string(top_p));
  if (!(min_p >= 0.0f && min_p <= 1.0f))
    throw bad_config("min_p must be in [0, 1] (0 = off), got " + std::to_string(min_p));
  if (!std::isfinite(repeat_penalty) || repeat_penalty <= 0.0f)
    throw bad_config("repeat_penalty must be a finite number > 0 (1 = off), got " + std::to_string(repeat_penalty));
  if (repeat_last_n < 0)
    throw bad_config("repeat_last_n must be >= 0 (0 = off), got " + std::to_string(repeat_last_n));
}

double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

void apply_repetition_penalty(std::span<float> logits, std::span<const std::int32_t> recent, float penalty) {
  if (penalty == 1.0f || recent.empty()) return;
  std::vector<std::int32_t> ids(recent.begin(), recent.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (std::int32_t id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= logits.size()) continue;
    // Clamped to the finite range: a tiny penalty would otherwise turn a
    // positive logit into +inf (then inf - inf = NaN in the softmax and the
    // min-p test), a large one a negative logit into -inf (masked, as if
    // the model had ruled the token out). -inf stays -inf.
    constexpr float kMax = std::numeric_limits<float>::max();
    float& l = logits[id];
    if (l > 0.0f)
      l = std::min(l / penalty, kMax);
    else if (l != -std::numeric_limits<float>::infinity())
      l = std::max(l * penalty, -kMax);
  }
}

Sampler::Sampler(const SamplerConfig& config) : config_(config) {
  config_.validate();
  rng_.seed(config_.seed);
}

Sampler::Sampler(const Sampler& o)
    : config_(o.config_), rng_(o.rng_), history_(o.history_), bias_(o.bias_),
      constraint_(o.constraint_ ? std::make_unique<grammar::TokenConstraint>(*o.constraint_) : nullptr) {}
Sampler& Sampler::operator=(const Sampler& o) {
  if (this != &o) *this = Sampler(o);
  return *this;
}
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;
Sampler::~Sampler() = default;

void Sampler::set_constraint(std::unique_ptr<grammar::TokenConstraint> constraint) {
  constraint_ = std::move(constraint);
  if (constraint_) constraint_->reset();
}

void Sampler::accept(std::int32_t token) {
  if (config_.repeat_last_n == 0) return;
  history_.push_back(token);
  if (history_.size() > static_cast<std::size_t>(config_.repeat_last_n))
    history_.erase(history_.begin(), history_.end() - config_.repeat_last_n);
}

void Sampler::set_logit_bias(std::span<const LogitBias> biases) {
  for (std::size_t i = 0; i < biases.size(); ++i) {
    const LogitBias& b = biases[i];
    if (b.token < 0)
      throw Error(Status::invalid_argument, "sampler: logit bias " + std::to_string(i) + " names token " +
                                                std::to_string(b.token) + ": token ids are >= 0");
    if (std::isnan(b.bias) || b.bias == std::numeric_limits<float>::infinity())
      throw Error(Status::invalid_argument, "sampler: logit bias " + std::to_string(i) + " (token " +
                                                std::to_string(b.token) + ") is " +
                                                (std::isnan(b.bias) ? "NaN" : "+inf") +
                                                ": a bias is finite, or -inf to ban the token");
  }
  bias_.assign(biases.begin(), biases.end());
}

void Sampler::reset() { reset(config_.seed); }

void Sampler::reset(std::uint64_t seed) {
  history_.clear();
  rng_.seed(seed);
  if (constraint_) constraint_->reset();
}

std::span<const std::int32_t> Sampler::history() const { return history_; }

std::vector<TokenProb> Sampler::candidates(std::span<const float> logits) const {
  check_logits(logits);
  std::vector<float> work(logits.begin(), logits.end());
  apply_logit_bias(work, bias_);
  apply_repetition_penalty(work, history_, config_.repeat_penalty);

  if (config_.temperature == 0.0f) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < work.size(); ++i)
      if (work[i] > work[best]) best = i;
    if (work[best] == -std::numeric_limits<float>::infinity())
      throw Error(Status::invalid_argument, "sampler: every logit is -inf");
    return {TokenProb{static_cast<std::int32_t>(best), work[best], 1.0f}};
  }

  std::vector<TokenProb> c;
  c.reserve(work.size());
  for (std::size_t i = 0; i < work.size(); ++i)
    if (work[i] != -std::numeric_limits<float>::infinity())
      c.push_back({static_cast<std::int32_t>(i), work[i], 0.0f});
  if (c.empty()) throw Error(Status::invalid_argument, "sampler: every logit is -inf");

  // top-k
  if (config_.top_k > 0 && static_cast<std::size_t>(config_.top_k) < c.size()) {
    std::nth_element(c.begin(), c.begin() + config_.top_k, c.end(), more_likely);
    c.resize(config_.top_k);
  }

  // top-p: smallest most-likely prefix with cumulative probability >= top_p.
  if (config_.top_p < 1.0f) {
    std::sort(c.begin(), c.end(), more_likely);
    softmax(c);
    double cum = 0.0;
    std::size_t keep = c.size();
    for (std::size_t i = 0; i < c.size(); ++i) {
      cum += c[i].p;
      if (cum >= config_.top_p) {
        keep = i + 1;
        break;
      }
    }
    c.resize(std::max<std::size_t>(keep, 1));
  }

  // min-p: p_i >= min_p * p_max  <=>  logit_i - logit_max >= log(min_p).
  if (config_.min_p > 0.0f) {
    float m = -std::numeric_limits<float>::infinity();
    for (const auto& t : c) m = std::max(m, t.logit);
    const double thr = std::log(static_cast<double>(config_.min_p));
    std::vector<TokenProb> kept;
    kept.reserve(c.size());
    for (const auto& t : c)
      if (t.logit == m || static_cast<double>(t.logit) - m >= thr) kept.push_back(t);  // the max always survives
    c.swap(kept);
  }

  std::sort(c.begin(), c.end(), more_likely);
  softmax(c, config_.temperature);
  for (auto& t : c) t.logit /= config_.temperature;  // may be +-inf for a tiny temperature; p is not
  return c;
}

std::int32_t Sampler::sample(std::span<const float> logits) {
  std::vector<TokenProb> c = candidates(logits);
  std::int32_t id = draw(c);
  if (constraint_ && !constraint_->allows(id)) {
    // The token drawn is checked alone (a few table lookups). Refused: the
    // draw again among the other candidates the grammar allows (the same
    // distribution restricted to them); only when it allows none of them
    // (or they are too many to check one by one) the full mask, and the
    // whole chain again on what it leaves.
    std::vector<TokenProb> ok;
    if (c.size() <= kMaxCandidatesChecked)
      for (const TokenProb& t : c)
        if (t.id != id && constraint_->allows(t.id)) ok.push_back(t);
    if (!ok.empty()) {
      double sum = 0;
      for (const TokenProb& t : ok) sum += t.p;
      for (TokenProb& t : ok) t.p = sum > 0 ? static_cast<float>(t.p / sum) : 1.0f / static_cast<float>(ok.size());
      id = draw(ok);
    } else {
      std::vector<float> masked(logits.begin(), logits.end());
      constraint_->mask(masked);
      try {
        c = candidates(masked);
      } catch (const Error&) {
        throw Error(Status::invalid_argument,
                    "sampler: every token the grammar allows here is banned (a -inf logit or logit bias)");
      }
      id = draw(c);
    }
  }
  if (constraint_) constraint_->accept(id);
  accept(id);
  return id;
}

std::int32_t Sampler::draw(const std::vector<TokenProb>& c) {
  std::int32_t id = c.front().id;
  if (config_.temperature != 0.0f && c.size() > 1) {
    const double u = uniform01(rng_);
    double cum = 0.0;
    id = c.back().id;  // rounding: u beyond the last cumulative sum
    for (const auto& t : c) {
      cum += t.p;
      if (u < cum) {
        id = t.id;
        break;
      }
    }
  }
  return id;
}

}  // namespace latte
