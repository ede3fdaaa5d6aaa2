// Token sampler: logit bias, repetition penalty, then greedy (temperature 0)
// or top-k -> top-p -> min-p -> temperature -> a seeded draw.
//
// Semantics follow llama.cpp's default sampler chain:
//  - logit bias: a caller's (token, bias) pairs added to the logits first;
//    -inf bans a token;
//  - repetition penalty over the distinct tokens among the last
//    repeat_last_n accepted ones: a positive logit is divided by the penalty,
//    a negative (or zero) one multiplied;
//  - top-k keeps the k largest logits (0: off);
//  - top-p keeps the smallest set of most likely tokens whose probability
//    (softmax at temperature 1 over what top-k kept) sums to >= top_p (1: off);
//  - min-p keeps tokens with p >= min_p * p_max (0: off);
//  - temperature divides the surviving logits, then one token is drawn.
// At least one token always survives. Ties are broken by the lower token id.
//
// A grammar (set_constraint) decides which tokens may come at all: the token
// drawn is checked against it; when refused, the draw is made again among
// the other candidates it allows (their probabilities renormalized), and
// when it allows none of them (or there are more than
// kMaxCandidatesChecked) the logits of every token it refuses are set to
// -inf and the whole chain runs again. A refused token is never sampled,
// whatever the settings; checking the few candidates first is what keeps a
// large vocabulary cheap. sample() advances the grammar; accept() does not
// (it is for the prompt's tokens).
//
// Randomness: std::mt19937_64 seeded with `seed`; one 64-bit output per draw,
// turned into a uniform double in [0, 1) from its top 53 bits, so the same
// seed gives the same tokens with any standard library.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

namespace latte {

namespace grammar {
class TokenConstraint;
}

struct SamplerConfig {
  float temperature = 0.8f;     // >= 0; 0 = greedy (argmax after the penalty)
  std::int32_t top_k = 40;      // >= 0; 0 = off
  float top_p = 0.95f;          // (0, 1]; 1 = off
  float min_p = 0.05f;          // [0, 1]; 0 = off
  float repeat_penalty = 1.0f;  // > 0; 1 = off
  std::int32_t repeat_last_n = 64;  // >= 0; 0 = off
  std::uint64_t seed = 0x1a77e5eedULL;

  // Greedy decoding, no penalty.
  static SamplerConfig greedy() {
    SamplerConfig c;
    c.temperature = 0.0f;
    return c;
  }
  // Throws latte::Error(invalid_argument) naming the bad field.
  void validate() const;
};

// The seven sampling settings copied between SamplerConfig and any struct
// that names them the same (the C API's latte_sampler_options, the CLI's
// options).
template <class To, class From>
To copy_sampling_fields(const From& f) {
  To t{};
  t.temperature = f.temperature;
  t.top_k = f.top_k;
  t.top_p = f.top_p;
  t.min_p = f.min_p;
  t.repeat_penalty = f.repeat_penalty;
  t.repeat_last_n = f.repeat_last_n;
  t.seed = f.seed;
  return t;
}

// A bias added to one token's logit before sampling (-inf: never sampled).
struct LogitBias {
  std::int32_t token = 0;
  float bias = 0.f;
};

struct TokenProb {
  std::int32_t id;
  float logit;  // after penalty and temperature (+-inf where logit / temperature overflows float)
  float p;      // normalized over the candidates
};

// Applies the repetition penalty in place to the distinct ids of `recent`
// (ids outside the logits are ignored).
void apply_repetition_penalty(std::span<float> logits, std::span<const std::int32_t> recent, float penalty);

class Sampler {
 public:
  // Candidates checked one by one against a grammar before its full mask.
  static constexpr std::size_t kMaxCandidatesChecked = 64;

  explicit Sampler(const SamplerConfig& config);  // validates
  Sampler(const Sampler& o);
  Sampler& operator=(const Sampler& o);
  Sampler(Sampler&&) noexcept;
  Sampler& operator=(Sampler&&) noexcept;
  ~Sampler();

  // Picks the next token from one row of logits (n_vocab floats) and accepts
  // it into the penalty history. Error(invalid_argument) on empty or NaN logits.
  std::int32_t sample(std::span<const float> logits);

  // Adds a token to the penalty history (e.g. the prompt's tokens).
  void accept(std::int32_t token);

  // Biases added to the logits before anything else (the penalty included)
  // by every later sample() and candidates(); a token named twice gets the
  // sum, -inf bans it. Replaces the earlier set (empty: none). Error(
  // invalid_argument) for a negative token or a NaN or +inf bias, and at
  // sample time for a token outside the logits given.
  void set_logit_bias(std::span<const LogitBias> biases);
  std::span<const LogitBias> logit_bias() const { return bias_; }

  // The grammar every later sample() obeys (nullptr: none), from its start.
  void set_constraint(std::unique_ptr<grammar::TokenConstraint> constraint);
  grammar::TokenConstraint* constraint() const { return constraint_.get(); }

  // Clears the history, re-seeds (with `seed`, or the config's) and puts the
  // grammar back at its start.
  void reset();
  void reset(std::uint64_t seed);

  // The candidates a draw would choose from, most likely first, with their
  // probabilities (for greedy: the argmax alone, p = 1). Uses the current
  // history; draws nothing.
  std::vector<TokenProb> candidates(std::span<const float> logits) const;

  const SamplerConfig& config() const { return config_; }
  std::span<const std::int32_t> history() const;

 private:
  SamplerConfig config_;
  std::mt19937_64 rng_;
  std::vector<std::int32_t> history_;  // last repeat_last_n accepted tokens, oldest first
  std::vector<LogitBias> bias_;
  std::unique_ptr<grammar::TokenConstraint> constraint_;

  std::int32_t draw(const std::vector<TokenProb>& c);
};

// Uniform double in [0, 1) from the top 53 bits of one mt19937_64 output.
double uniform01(std::mt19937_64& rng);

}  // namespace latte
