// Stateful libFuzzer target for the C API's sessions: the input is a session's
// options and a sequence of calls (prefill, decode, eval_all, truncate,
// reset, save, load, load of a damaged file, a step together with a second
// session, a fork, the state through memory and a damaged copy of it) with
// arguments that are often invalid, all against one small random model. After every call the promises
// of include/latte/latte.h are checked against a model of what the session
// must hold: the status the arguments call for; on error nothing consumed
// (tokens, n_past and logits bitwise as before); logits present exactly when
// the last call fed a token; a step's partner session likewise; a fork holds
// what its original does. At the end each session's logits are those of a
// fresh session fed the same tokens. Any broken promise traps.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "latte/latte.h"
#include "tools/random_model.h"

namespace {

latte_model* g_model = nullptr;
int g_vocab = 0;
std::string g_dir;

[[noreturn]] void broken(const char* what, int op, latte_status st) {
  std::fprintf(stderr, "session_fuzz: %s (op %d, status %s: %s)\n", what, op, latte_status_string(st),
               latte_last_error());
  __builtin_trap();
}

// The input, read from the front; zeros once it runs out.
struct Input {
  const std::uint8_t* p;
  std::size_t n;
  bool empty() const { return n == 0; }
  std::uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  std::uint16_t u16() { return static_cast<std::uint16_t>(byte() | byte() << 8); }
  // A token id: mostly valid, sometimes just outside the vocabulary.
  std::int32_t token() {
    const std::uint16_t v = u16();
    if ((v & 0xf) == 0xf) return (v >> 4) % 2 ? g_vocab + (v >> 5) % 4 : -1 - (v >> 5) % 4;
    return static_cast<std::int32_t>((v >> 4) % static_cast<unsigned>(g_vocab));
  }
};

struct Expected {
  std::vector<std::int32_t> tokens;
  bool has_logits = false;
};

std::vector<float> logits_of(const latte_session* s) {
  const float* l = latte_session_logits(s);
  return l ? std::vector<float>(l, l + g_vocab) : std::vector<float>();
}

// The session holds what `e` says, and (after an error) the logits it had.
void check_state(const latte_session* s, const Expected& e, int op, latte_status st) {
  if (latte_session_n_past(s) != static_cast<std::int64_t>(e.tokens.size())) broken("n_past", op, st);
  std::vector<std::int32_t> got(e.tokens.size() + 1);
  std::size_t n = 0;
  if (latte_session_tokens(s, got.data(), got.size(), &n) != LATTE_OK || n != e.tokens.size() ||
      !std::equal(e.tokens.begin(), e.tokens.end(), got.begin()))
    broken("tokens", op, st);
  if ((latte_session_logits(s) != nullptr) != e.has_logits) broken("logits present or not", op, st);
}

// The status a feed of `toks` must come back with.
latte_status feed_status(const std::vector<std::int32_t>& toks, const Expected& e, std::int64_t n_ctx) {
  if (toks.empty()) return LATTE_ERR_INVALID_ARGUMENT;
  for (std::int32_t t : toks)
    if (t < 0 || t >= g_vocab) return LATTE_ERR_INVALID_ARGUMENT;
  if (static_cast<std::int64_t>(e.tokens.size() + toks.size()) > n_ctx) return LATTE_ERR_CONTEXT_OVERFLOW;
  return LATTE_OK;
}

bool close(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  if (a.size() != b.size()) return false;
  float scale = 0;
  for (float v : b) scale = std::max(scale, std::fabs(v));
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - b[i]) <= tol * (1.f + scale))) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char dir[] = "/tmp/latte-session-fuzz-XXXXXX";
  if (!::mkdtemp(dir)) std::abort();
  g_dir = dir;
  latte::RandomModelSpec spec;  // deepseek2, 2 layers, d_model 64, vocab 300
  spec.q_lora_rank = 24;
  spec.n_experts = 4, spec.n_experts_used = 2, spec.n_experts_shared = 1, spec.ff_expert = 32;
  spec.n_leading_dense = 1;
  const std::string path = g_dir + "/model.gguf";
  latte::write_random_model(spec, path);
  if (latte_model_load(path.c_str(), &g_model) != LATTE_OK) std::abort();
  g_vocab = latte_model_n_vocab(g_model);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in{data, size};
  // Options: valid mostly, sometimes not.
  latte_session_options o = latte_session_default_options();
  o.threads = 1;
  const std::uint8_t ob = in.byte();
  o.cache_type = ob % 16 == 15 ? 4 + ob / 16 : ob % 4;
  o.n_ctx = in.byte() % 48;  // 0: the model's maximum (4096)
  o.prefill_chunk = 1 + in.byte() % 8;
  latte_session* s = nullptr;
  const latte_status created = latte_session_create(g_model, &o, &s);
  if (o.cache_type > LATTE_CACHE_INT4) {
    if (created != LATTE_ERR_INVALID_ARGUMENT || s != nullptr) broken("an unknown cache type", -1, created);
    return 0;
  }
  if (created != LATTE_OK) broken("session create", -1, created);
  const std::int64_t n_ctx = latte_session_n_ctx(s);
  // The partner of steps: the same options, its own tokens.
  latte_session* partner = nullptr;
  if (latte_session_create(g_model, &o, &partner) != LATTE_OK) broken("partner create", -1, LATTE_OK);
  Expected pe;
  const std::string file = g_dir + "/s.lsess";
  std::remove(file.c_str());
  bool saved = false;
  Expected saved_state;
  Expected e;

  for (int op_index = 0; !in.empty() && op_index < 64; ++op_index) {
    const int op = in.byte() % 12;
    const std::vector<float> before = logits_of(s);
    const std::vector<float> partner_before = logits_of(partner);
    latte_status st = LATTE_OK, want = LATTE_OK;
    switch (op) {
      case 0:    // prefill
      case 1: {  // eval_all
        std::vector<std::int32_t> toks(in.byte() % 12);
        for (auto& t : toks) t = in.token();
        want = feed_status(toks, e, n_ctx);
        if (op == 0) {
          st = latte_session_prefill(s, toks.data(), toks.size());
        } else {
          std::vector<float> all(std::max<std::size_t>(toks.size(), 1) * static_cast<std::size_t>(g_vocab));
          st = latte_session_eval_all(s, toks.data(), toks.size(), all.data());
          if (st == LATTE_OK &&
              std::memcmp(all.data() + (toks.size() - 1) * g_vocab, latte_session_logits(s), sizeof(float) * g_vocab))
            broken("eval_all's last row is not the session's logits", op, st);
        }
        if (want == LATTE_OK) {
          e.tokens.insert(e.tokens.end(), toks.begin(), toks.end());
          e.has_logits = true;
        }
        break;
      }
      case 2: {  // decode
        const std::int32_t t = in.token();
        want = feed_status({t}, e, n_ctx);
        st = latte_session_decode(s, t);
        if (want == LATTE_OK) {
          e.tokens.push_back(t);
          e.has_logits = true;
        }
        break;
      }
      case 3: {  // truncate
        const std::int64_t n = static_cast<std::int64_t>(in.byte() % (e.tokens.size() + 4)) - 1;
        const bool ok = n >= 0 && n <= static_cast<std::int64_t>(e.tokens.size());
        want = ok ? LATTE_OK : LATTE_ERR_INVALID_ARGUMENT;
        st = latte_session_truncate(s, n);
        if (ok) {
          if (n < static_cast<std::int64_t>(e.tokens.size())) e.has_logits = false;
          e.tokens.resize(static_cast<std::size_t>(n));
        }
        break;
      }
      case 4:  // reset
        st = latte_session_reset(s);
        e = Expected{};
        break;
      case 5: {  // save, to the file or to a path that cannot be written
        const int where = in.byte() % 4;
        const std::string path = where == 1 ? g_dir : where == 2 ? g_dir + "/none/s.lsess" : file;
        want = where == 1 || where == 2 ? LATTE_ERR_IO : LATTE_OK;
        st = latte_session_save(s, path.c_str());
        if (st == LATTE_OK) {
          saved = true;
          saved_state = e;
        }
        break;
      }
      case 6:  // load
        want = saved ? LATTE_OK : LATTE_ERR_IO;
        st = latte_session_load(s, file.c_str());
        if (st == LATTE_OK) e = saved_state;
        break;
      case 7: {  // load a damaged copy: refused, nothing changed
        if (!saved) continue;
        std::FILE* f = std::fopen(file.c_str(), "rb");
        std::vector<std::uint8_t> b;
        for (int c; (c = std::fgetc(f)) != EOF;) b.push_back(static_cast<std::uint8_t>(c));
        std::fclose(f);
        const std::size_t at = in.u16() % b.size();
        b[at] ^= static_cast<std::uint8_t>(1 + in.byte() % 255);
        const std::string bad = g_dir + "/bad.lsess";
        f = std::fopen(bad.c_str(), "wb");
        std::fwrite(b.data(), 1, b.size(), f);
        std::fclose(f);
        want = LATTE_ERR_BAD_FILE;
        st = latte_session_load(s, bad.c_str());
        break;
      }
      case 8: {  // NULL arguments
        st = latte_session_prefill(s, nullptr, 1 + in.byte() % 3);
        want = LATTE_ERR_INVALID_ARGUMENT;
        break;
      }
      case 9: {  // a step with the partner: this session's chunk, the partner's token (or none of it)
        std::vector<std::int32_t> toks(in.byte() % 12);
        for (auto& t : toks) t = in.token();
        const std::int32_t pt = in.token();
        const int shape = in.byte() % 4;  // 0, 1: both; 2: this one alone; 3: this one twice
        std::vector<latte_step_item> items{{s, toks.data(), toks.size()}};
        if (shape < 2) items.push_back({partner, &pt, 1});
        if (shape == 3) items.push_back(items.front());
        if (shape == 1) std::swap(items.front(), items.back());
        // The step checks item after item, each one's tokens, then its chunk
        // length, then its room; the first failure is the status.
        const auto item_status = [&](const std::vector<std::int32_t>& t, const Expected& x) {
          const latte_status f = feed_status(t, x, n_ctx);
          if (f == LATTE_ERR_INVALID_ARGUMENT) return f;
          if (t.size() > static_cast<std::size_t>(o.prefill_chunk)) return LATTE_ERR_INVALID_ARGUMENT;
          return f;
        };
        const latte_status mine = item_status(toks, e);
        const latte_status theirs = item_status({pt}, pe);
        if (shape == 0) want = mine != LATTE_OK ? mine : theirs;
        else if (shape == 1) want = theirs != LATTE_OK ? theirs : mine;
        else if (shape == 2) want = mine;
        else want = mine != LATTE_OK ? mine : LATTE_ERR_INVALID_ARGUMENT;  // item 1 is item 0's session again
        st = latte_session_step(items.data(), items.size());
        if (want == LATTE_OK) {
          e.tokens.insert(e.tokens.end(), toks.begin(), toks.end());
          e.has_logits = true;
          if (shape < 2) {
            pe.tokens.push_back(pt);
            pe.has_logits = true;
          }
        }
        break;
      }
      case 10: {  // a fork holds what this session holds, bit for bit
        latte_session* f = nullptr;
        st = latte_session_copy(s, &f);
        if (st != LATTE_OK) broken("copy", op, st);
        check_state(f, e, op, st);
        if (logits_of(f) != logits_of(s)) broken("a fork's logits differ", op, st);
        latte_session_free(f);
        break;
      }
      case 11: {  // the state through memory, back into the partner; or a damaged copy, refused
        std::vector<std::uint8_t> b(latte_session_state_size(s));
        std::size_t n = 0;
        st = latte_session_state_save_to(s, b.data(), b.size(), &n);
        if (st != LATTE_OK || n != b.size()) broken("state to memory", op, st);
        const bool damage = in.byte() % 2 == 1;
        if (damage) b[in.u16() % b.size()] ^= static_cast<std::uint8_t>(1 + in.byte() % 255);
        const std::vector<float> was = logits_of(partner);
        const latte_status loaded = latte_session_state_load_from(partner, b.data(), b.size());
        if (damage) {
          if (loaded != LATTE_ERR_BAD_FILE) broken("a damaged state was not refused as a bad file", op, loaded);
          check_state(partner, pe, op, loaded);
          if (logits_of(partner) != was) broken("a refused state changed the partner's logits", op, loaded);
        } else {
          if (loaded != LATTE_OK) broken("state from memory", op, loaded);
          pe = e;
          check_state(partner, pe, op, loaded);
          if (logits_of(partner) != logits_of(s)) broken("the state's logits differ", op, loaded);
        }
        break;
      }
    }
    if (st != want) broken("unexpected status", op, st);
    check_state(s, e, op, st);
    check_state(partner, pe, op, st);
    if (st != LATTE_OK && logits_of(s) != before) broken("a refused call changed the logits", op, st);
    if (st != LATTE_OK && logits_of(partner) != partner_before) broken("a refused step changed the partner", op, st);
  }

  // The logits are a fresh session's fed the same tokens (in one prefill:
  // other chunks round differently, hence a tolerance).
  for (const auto& [session, expected] : {std::pair{s, &e}, std::pair{partner, &pe}}) {
    if (!expected->has_logits) continue;
    latte_session* r = nullptr;
    if (latte_session_create(g_model, &o, &r) != LATTE_OK) broken("reference session", -1, LATTE_OK);
    const latte_status st = latte_session_prefill(r, expected->tokens.data(), expected->tokens.size());
    if (st != LATTE_OK) broken("reference prefill", -1, st);
    // int4's coarser rounding flips more where chunks round differently
    // (session_step_test.cpp's bound; docs/performance-log.md, "Issue 60").
    const float tol = o.cache_type == LATTE_CACHE_INT4 ? 8e-2f : o.cache_type == LATTE_CACHE_INT8 ? 2e-2f : 1e-3f;
    if (!close(logits_of(session), logits_of(r), tol)) broken("logits differ from a fresh session's", -1, st);
    latte_session_free(r);
  }
  latte_session_free(partner);
  latte_session_free(s);
  return 0;
}
