// Latte: a thin C++ wrapper over the C API (latte.h). Errors throw
// latte::api::Exception carrying the status and the message.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "latte/latte.h"

namespace latte::api {

class Exception : public std::runtime_error {
 public:
  Exception(latte_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  latte_status status() const { return status_; }

 private:
  latte_status status_;
};

inline void check(latte_status s) {
  if (s != LATTE_OK) throw Exception(s, latte_last_error());
}

class Model {
 public:
  explicit Model(const std::string& path) { check(latte_model_load(path.c_str(), &m_)); }
  Model(const std::string& path, const latte_model_options& options) {
    check(latte_model_load_with_options(path.c_str(), &options, &m_));
  }
  ~Model() { latte_model_free(m_); }
  Model(Model&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
  Model& operator=(Model&& o) noexcept {
    if (this != &o) {
      latte_model_free(m_);
      m_ = std::exchange(o.m_, nullptr);
    }
    return *this;
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  int32_t n_vocab() const { return latte_model_n_vocab(m_); }
  int64_t n_ctx_train() const { return latte_model_n_ctx_train(m_); }
  std::string architecture() const { return latte_model_architecture(m_); }
  latte_model* handle() const { return m_; }

 private:
  latte_model* m_ = nullptr;
};

class Session {
 public:
  explicit Session(const Model& model, const latte_session_options& opts = latte_session_default_options()) {
    check(latte_session_create(model.handle(), &opts, &s_));
    n_vocab_ = model.n_vocab();
  }
  ~Session() { latte_session_free(s_); }
  Session(Session&& o) noexcept : s_(std::exchange(o.s_, nullptr)), n_vocab_(std::exchange(o.n_vocab_, 0)) {}
  Session& operator=(Session&& o) noexcept {
    if (this != &o) {
      latte_session_free(s_);
      s_ = std::exchange(o.s_, nullptr);
      n_vocab_ = std::exchange(o.n_vocab_, 0);
    }
    return *this;
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void prefill(std::span<const int32_t> tokens) { check(latte_session_prefill(s_, tokens.data(), tokens.size())); }
  void decode(int32_t token) { check(latte_session_decode(s_, token)); }
  // Logits of every token (n_tokens x n_vocab, the model's vocabulary).
  std::vector<float> eval_all(std::span<const int32_t> tokens) {
    std::vector<float> out(tokens.size() * static_cast<std::size_t>(n_vocab_));
    check(latte_session_eval_all(s_, tokens.data(), tokens.size(), out.data()));
    return out;
  }
  // The last token's logits (n_vocab); empty before the first token.
  std::span<const float> logits() const {
    const float* p = latte_session_logits(s_);
    return p ? std::span<const float>(p, static_cast<std::size_t>(n_vocab_)) : std::span<const float>();
  }
  int64_t n_past() const { return latte_session_n_past(s_); }
  int64_t n_ctx() const { return latte_session_n_ctx(s_); }
  void reset() { check(latte_session_reset(s_)); }

 private:
  latte_session* s_ = nullptr;
  int32_t n_vocab_ = 0;  // the model's, so the spans above are always its size
};

}  // namespace latte::api
