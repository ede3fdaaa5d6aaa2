#include "runtime/tokenizer/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <queue>

#include "runtime/error.h"
#include "runtime/tokenizer/pretokenizer.h"

namespace latte {

namespace {

constexpr const char* kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// Decodes one code point of (assumed mostly valid) UTF-8; invalid -> the byte's
// value with length 1.
std::uint32_t next_codepoint(std::string_view s, std::size_t& i) {
  const std::size_t n = detail::utf8_valid_prefix_len(s.substr(i));
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (n <= 1) {
    ++i;
    return b0;
  }
  std::uint32_t cp = b0 & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

// SentencePiece/llama.cpp symbol length: from the lead byte's high bits only.
std::size_t lead_byte_len(unsigned char b) {
  static constexpr std::size_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[b >> 4];
}

struct Gpt2ByteMap {
  std::uint32_t byte_to_cp[256];
  std::string byte_to_utf8[256];
  std::unordered_map<std::uint32_t, unsigned char> cp_to_byte;
  Gpt2ByteMap() {
    bool direct[256] = {};
    for (int b = 0x21; b <= 0x7E; ++b) direct[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
    std::uint32_t n = 0;
    for (int b = 0; b < 256; ++b) {
      byte_to_cp[b] = direct[b] ? static_cast<std::uint32_t>(b) : 256 + n++;
      detail::append_utf8(byte_to_utf8[b], byte_to_cp[b]);
      cp_to_byte[byte_to_cp[b]] = static_cast<unsigned char>(b);
    }
  }
};

const Gpt2ByteMap& gpt2_map() {
  static const Gpt2ByteMap m;
  return m;
}

// "<0xXX>" -> XX, or -1.
int parse_hex_byte_token(const std::string& t) {
  if (t.size() != 6 || t[0] != '<' || t[1] != '0' || t[2] != 'x' || t[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (true) {
    const std::size_t j = s.find(from, i);
    if (j == std::string_view::npos) break;
    out.append(s.substr(i, j - i));
    out.append(to);
    i = j + from.size();
  }
  out.append(s.substr(i));
  return out;
}

std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// Texts of end-of-turn tokens that llama.cpp also treats as end of generation.
bool is_eog_text(const std::string& t) {
  static const char* const texts[] = {
      "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>",
      "<|end_of_text|>", "<EOT>", ("<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"),
  };
  for (const char* x : texts)
    if (t == x) return true;
  return false;
}

}  // namespace

std::uint32_t gpt2_byte_to_codepoint(unsigned char byte) { return gpt2_map().byte_to_cp[byte]; }

std::string hex_byte_token(unsigned char byte) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "<0x%02X>", byte);
  return buf;
}

// ---------------------------------------------------------------- lifetime

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::Tokenizer(const Tokenizer&) = default;
Tokenizer& Tokenizer::operator=(const Tokenizer&) = default;
Tokenizer::~Tokenizer() = default;

// ---------------------------------------------------------------- create

Tokenizer Tokenizer::create(const VocabSpec& spec) {
  auto bad = [](const std::string& msg) { return Error(Status::bad_file, "tokenizer: " + msg); };

  Tokenizer t;
  if (spec.model == "gpt2") {
    t.kind_ = Kind::bpe;
  } else if (spec.model == "llama") {
    t.kind_ = Kind::spm;
  } else {
    throw Error(Status::unsupported, "tokenizer: model '" + spec.model +
                                         "' (tokenizer.ggml.model) is not supported; Latte reads "
                                         "'gpt2' (byte-level BPE) and 'llama' (SentencePiece)");
  }

  const std::size_t n = spec.tokens.size();
  if (n == 0) throw bad("the vocabulary (tokenizer.ggml.tokens) is empty");
  if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw bad("the vocabulary is too large");
  if (!spec.token_types.empty() && spec.token_types.size() != n)
    throw bad("token_type has " + std::to_string(spec.token_types.size()) + " entries for " +
              std::to_string(n) + " tokens");
  if (!spec.scores.empty() && spec.scores.size() != n)
    throw bad("scores has " + std::to_string(spec.scores.size()) + " entries for " +
              std::to_string(n) + " tokens");
  if (t.kind_ == Kind::spm && spec.scores.empty())
    throw bad("a 'llama' (SentencePiece) vocabulary needs tokenizer.ggml.scores");

  t.tokens_ = spec.tokens;
  t.types_.assign(n, TokenType::normal);
  t.scores_.assign(n, 0.0f);
  t.token_ids_.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    if (!spec.token_types.empty()) {
      const std::int32_t ty = spec.token_types[i];
      if (ty < 0 || ty > 6)
        throw bad("token " + std::to_string(i) + " has token type " + std::to_string(ty) +
                  " (valid: 0..6)");
      t.types_[i] = static_cast<TokenType>(ty);
    }
    if (!spec.scores.empty()) {
      if (std::isnan(spec.scores[i])) throw bad("token " + std::to_string(i) + " has a NaN score");
      t.scores_[i] = spec.scores[i];
    }
    if (t.tokens_[i].empty()) continue;  // never matched; decodes to ""
    const auto [it, inserted] = t.token_ids_.emplace(t.tokens_[i], static_cast<std::int32_t>(i));
    if (!inserted)
      throw bad("duplicate token '" + printable(t.tokens_[i]) + "' at ids " +
                std::to_string(it->second) + " and " + std::to_string(i));
  }

  auto check_special = [&](std::int32_t id, const char* what) {
    if (id < -1 || id >= static_cast<std::int32_t>(n))
      throw bad(std::string(what) + " " + std::to_string(id) + " is out of range (vocabulary of " +
                std::to_string(n) + " tokens)");
    return id;
  };
  t.bos_id_ = check_special(spec.bos_id, "bos_token_id");
  t.eos_id_ = check_special(spec.eos_id, "eos_token_id");
  t.unk_id_ = check_special(spec.unk_id, "unknown_token_id");
  t.pad_id_ = check_special(spec.pad_id, "padding_token_id");
  for (std::int32_t id : spec.eot_ids) {
    if (id < 0 || id >= static_cast<std::int32_t>(n))
      throw bad("end-of-turn token id " + std::to_string(id) + " is out of range (vocabulary of " +
                std::to_string(n) + " tokens)");
  }
  t.add_bos_ = spec.add_bos;
  if (t.add_bos_ && t.bos_id_ < 0)
    throw bad("add_bos_token is true but there is no bos_token_id");
  t.add_space_prefix_ = spec.add_space_prefix;
  t.chat_template_ = spec.chat_template;

  if (t.kind_ == Kind::bpe) {
    t.pre_ = spec.pre;
    t.pre_tokenizer_ = detail::PreTokenizer::create(spec.pre);
    t.merge_ranks_.reserve(spec.merges.size() * 2);
    for (std::size_t r = 0; r < spec.merges.size(); ++r) {
      const std::string& m = spec.merges[r];
      const std::size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
      if (sp == std::string::npos || sp + 1 >= m.size())
        throw bad("merge " + std::to_string(r) + " '" + printable(m) +
                  "' is not of the form 'left right'");
      const std::string left = m.substr(0, sp), right = m.substr(sp + 1);
      for (const std::string* part : {&left, &right}) {
        if (!t.token_ids_.count(*part))
          throw bad("merge " + std::to_string(r) + " '" + printable(m) + "' names '" +
                    printable(*part) + "', which is not in the vocabulary");
      }
      if (!t.token_ids_.count(left + right))
        throw bad("merge " + std::to_string(r) + " '" + printable(m) + "' makes '" +
                  printable(left + right) + "', which is not in the vocabulary");
      t.merge_ranks_.emplace(m, static_cast<std::int32_t>(r));  // first (lowest) rank wins
    }
  }

  // Byte tokens.
  for (int b = 0; b < 256; ++b) {
    t.byte_tokens_[b] = -1;
    if (t.kind_ == Kind::bpe) {
      const auto it = t.token_ids_.find(gpt2_map().byte_to_utf8[b]);
      if (it != t.token_ids_.end()) t.byte_tokens_[b] = it->second;
    } else {
      auto it = t.token_ids_.find(hex_byte_token(static_cast<unsigned char>(b)));
      if (it == t.token_ids_.end()) it = t.token_ids_.find(std::string(1, static_cast<char>(b)));
      if (it != t.token_ids_.end()) t.byte_tokens_[b] = it->second;
    }
  }

  // Pieces: what each token decodes to.
  t.pieces_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& text = t.tokens_[i];
    std::string& piece = t.pieces_[i];
    switch (t.types_[i]) {
      case TokenType::control:
      case TokenType::unknown:
      case TokenType::user_defined:
        piece = text;
        continue;
      case TokenType::byte: {
        const int b = parse_hex_byte_token(text);
        if (b >= 0) {
          piece.assign(1, static_cast<char>(b));
          continue;
        }
        break;  // not <0xXX>: decode as a normal token
      }
      default:
        break;
    }
    if (t.kind_ == Kind::spm) {
      piece = replace_all(text, kSpmSpace, " ");
    } else {
      // Map each code point back to its byte; code points outside the GPT-2
      // alphabet (not produced by byte-level BPE) are kept as they are.
      const auto& map = gpt2_map();
      std::size_t k = 0;
      while (k < text.size()) {
        const std::size_t start = k;
        const std::uint32_t cp = next_codepoint(text, k);
        const auto it = map.cp_to_byte.find(cp);
        if (it != map.cp_to_byte.end() && detail::utf8_valid_prefix_len(std::string_view(text).substr(start)) > 0)
          piece += static_cast<char>(it->second);
        else
          piece.append(text, start, k - start);
      }
    }
  }

  // Special tokens for verbatim matching: longest text first (ties by id).
  for (std::size_t i = 0; i < n; ++i) {
    const TokenType ty = t.types_[i];
    if ((ty == TokenType::control || ty == TokenType::user_defined || ty == TokenType::unknown) &&
        !t.tokens_[i].empty())
      t.special_ids_.push_back(static_cast<std::int32_t>(i));
  }
  std::stable_sort(t.special_ids_.begin(), t.special_ids_.end(), [&](std::int32_t a, std::int32_t b) {
    return t.tokens_[a].size() > t.tokens_[b].size();
  });

  // End of generation.
  if (t.eos_id_ >= 0) t.eog_ids_.push_back(t.eos_id_);
  for (std::int32_t id : spec.eot_ids) t.eog_ids_.push_back(id);
  for (std::size_t i = 0; i < n; ++i) {
    const TokenType ty = t.types_[i];
    if ((ty == TokenType::control || ty == TokenType::user_defined) && is_eog_text(t.tokens_[i]))
      t.eog_ids_.push_back(static_cast<std::int32_t>(i));
  }
  std::sort(t.eog_ids_.begin(), t.eog_ids_.end());
  t.eog_ids_.erase(std::unique(t.eog_ids_.begin(), t.eog_ids_.end()), t.eog_ids_.end());
  return t;
}

// ---------------------------------------------------------------- accessors

void Tokenizer::check_id(std::int32_t id) const {
  if (id < 0 || id >= n_vocab())
    throw Error(Status::invalid_argument, "tokenizer: token id " + std::to_string(id) +
                                              " is out of range (vocabulary of " +
                                              std::to_string(n_vocab()) + " tokens)");
}

const std::string& Tokenizer::token_text(std::int32_t id) const {
  check_id(id);
  return tokens_[id];
}

TokenType Tokenizer::token_type(std::int32_t id) const {
  check_id(id);
  return types_[id];
}

std::int32_t Tokenizer::find_token(std::string_view text) const {
  const auto it = token_ids_.find(text);
  return it == token_ids_.end() ? -1 : it->second;
}

bool Tokenizer::is_end_of_generation(std::int32_t id) const {
  return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

// ---------------------------------------------------------------- encode

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  return encode_impl(text, add_bos, parse_special, nullptr);
}

std::vector<std::int32_t> Tokenizer::encode_with_special_ranges(std::string_view text, bool add_bos,
                                                                std::span<const TextRange> special_ranges) const {
  return encode_impl(text, add_bos, true, &special_ranges);
}

std::vector<std::int32_t> Tokenizer::encode_impl(std::string_view text, bool add_bos, bool parse_special,
                                                 const std::span<const TextRange>* special_ranges) const {
  // Whether a control token's text at [b, e) may become that token: anywhere,
  // or (special_ranges) only inside one of the ranges.
  const auto allowed = [&](std::size_t b, std::size_t e) {
    if (special_ranges == nullptr) return true;
    for (const TextRange& r : *special_ranges)
      if (b >= r.begin && e <= r.end) return true;
    return false;
  };
  std::vector<std::int32_t> out;
  if (add_bos) {
    if (bos_id_ < 0)
      throw Error(Status::invalid_argument, "tokenizer: BOS requested but the vocabulary has no BOS token");
    out.push_back(bos_id_);
  }

  // Split out special tokens: fragments are either a token id or a text range.
  struct Fragment {
    std::int32_t id;  // -1: text
    std::size_t off, len;
  };
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (std::int32_t sid : special_ids_) {
    const TokenType ty = types_[sid];
    if (!parse_special && ty != TokenType::user_defined) continue;
    const std::string& st = tokens_[sid];
    next.clear();
    bool changed = false;
    for (const Fragment& f : frags) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view part = text.substr(f.off, f.len);
      std::size_t pos = 0;   // where the text not yet split off begins
      std::size_t from = 0;  // where the next search starts
      while (true) {
        const std::size_t m = part.find(st, from);
        if (m == std::string_view::npos) break;
        if (ty != TokenType::user_defined && !allowed(f.off + m, f.off + m + st.size())) {
          from = m + 1;  // content that spells a control token stays text
          continue;
        }
        changed = true;
        if (m > pos) next.push_back({-1, f.off + pos, m - pos});
        next.push_back({sid, 0, 0});
        pos = from = m + st.size();
      }
      if (pos < part.size()) next.push_back({-1, f.off + pos, part.size() - pos});
    }
    if (changed) frags.swap(next);
  }

  bool prev_special = true;  // SentencePiece: a space goes in front of text that starts the input or follows a special token
  for (const Fragment& f : frags) {
    if (f.id >= 0) {
      out.push_back(f.id);
      prev_special = true;
      continue;
    }
    const std::string_view part = text.substr(f.off, f.len);
    if (kind_ == Kind::bpe) {
      encode_bpe_fragment(part, out);
    } else {
      std::string s;
      if (add_space_prefix_ && prev_special) s = " ";
      s.append(part);
      encode_spm_fragment(replace_all(s, " ", kSpmSpace), out);
    }
    prev_special = false;
  }
  return out;
}

std::vector<std::string> Tokenizer::pre_tokenize(std::string_view text) const {
  if (kind_ != Kind::bpe)
    throw Error(Status::invalid_argument, "tokenizer: pre_tokenize is for byte-level BPE (gpt2) vocabularies");
  const std::string clean = detail::sanitize_utf8(text);
  std::vector<std::string> words;
  std::size_t off = 0;
  for (std::size_t len : pre_tokenizer_->split(clean)) {
    words.emplace_back(clean, off, len);
    off += len;
  }
  return words;
}

void Tokenizer::encode_bpe_fragment(std::string_view text, std::vector<std::int32_t>& out) const {
  const std::string clean = detail::sanitize_utf8(text);
  const auto& map = gpt2_map();
  std::string encoded;
  std::size_t off = 0;
  for (std::size_t len : pre_tokenizer_->split(clean)) {
    encoded.clear();
    for (std::size_t i = off; i < off + len; ++i) encoded += map.byte_to_utf8[static_cast<unsigned char>(clean[i])];
    off += len;
    encode_bpe_word(encoded, out);
  }
}

namespace {

struct Symbol {
  std::int32_t prev, next;
  std::uint32_t start, len;  // bytes in the word; len 0: merged away
};

// Merges adjacent symbols best pair first (BPE: lowest merge rank; SentencePiece:
// highest score), as `queue` orders them. try_pair(l) queues the pair starting at
// symbol l if it merges; entries made stale by earlier merges are skipped.
template <class Queue, class TryPair>
void merge_symbols(std::vector<Symbol>& sym, Queue& queue, TryPair& try_pair) {
  for (std::int32_t i = 0; i + 1 < static_cast<std::int32_t>(sym.size()); ++i) try_pair(i);
  while (!queue.empty()) {
    const auto p = queue.top();
    queue.pop();
    Symbol& L = sym[p.left];
    if (L.len != p.left_len || L.next < 0) continue;
    Symbol& R = sym[L.next];
    if (R.len != p.right_len) continue;
    L.len += R.len;
    R.len = 0;
    L.next = R.next;
    if (L.next >= 0) sym[L.next].prev = p.left;
    try_pair(L.prev);
    try_pair(p.left);
  }
}

}  // namespace

void Tokenizer::encode_bpe_word(const std::string& word, std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  // Symbols start as the word's characters (one per original byte).
  std::vector<Symbol> sym;
  for (std::size_t i = 0; i < word.size();) {
    const std::size_t l = std::min(word.size() - i, lead_byte_len(static_cast<unsigned char>(word[i])));
    const auto idx = static_cast<std::int32_t>(sym.size());
    sym.push_back({idx - 1, idx + 1, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(l)});
    i += l;
  }
  sym.back().next = -1;

  struct Pair {
    std::int32_t rank, left;
    std::uint32_t left_len, right_len;
  };
  auto worse = [](const Pair& a, const Pair& b) {  // priority_queue: top = lowest rank, then leftmost
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> queue(worse);
  std::string key;
  auto try_pair = [&](std::int32_t l) {
    if (l < 0) return;
    const std::int32_t r = sym[l].next;
    if (r < 0) return;
    key.assign(word, sym[l].start, sym[l].len);
    key += ' ';
    key.append(word, sym[r].start, sym[r].len);
    const auto it = merge_ranks_.find(key);
    if (it == merge_ranks_.end()) return;
    queue.push({it->second, l, sym[l].len, sym[r].len});
  };
  merge_symbols(sym, queue, try_pair);

  for (std::int32_t i = 0; i >= 0; i = sym[i].next) {
    const std::string_view piece = std::string_view(word).substr(sym[i].start, sym[i].len);
    const auto it = token_ids_.find(piece);
    if (it != token_ids_.end()) {
      out.push_back(it->second);
      continue;
    }
    // Not a token (only possible when the vocab lacks a byte): byte by byte.
    for (std::size_t k = 0; k < piece.size();) {
      const std::size_t l = std::min(piece.size() - k, lead_byte_len(static_cast<unsigned char>(piece[k])));
      const auto jt = token_ids_.find(piece.substr(k, l));
      if (jt != token_ids_.end())
        out.push_back(jt->second);
      else if (unk_id_ >= 0)
        out.push_back(unk_id_);
      // else: dropped, as llama.cpp does
      k += l;
    }
  }
}

void Tokenizer::push_byte_token(unsigned char byte, std::vector<std::int32_t>& out) const {
  if (byte_tokens_[byte] >= 0) {
    out.push_back(byte_tokens_[byte]);
  } else if (unk_id_ >= 0) {
    out.push_back(unk_id_);
  } else {
    throw Error(Status::invalid_argument, "tokenizer: cannot encode byte " + hex_byte_token(byte) +
                                              ": the vocabulary has no byte token for it and no unknown token");
  }
}

// SentencePiece builds text only from normal, user-defined and unused pieces:
// control, unknown and byte pieces are reserved, so a prompt that spells
// "<s>" or "<0x41>" gets those characters, not BOS or 'A' (llama.cpp looks up
// every type here).
std::int32_t Tokenizer::spm_text_piece(std::string_view text) const {
  const std::int32_t id = find_token(text);
  if (id < 0) return -1;
  const TokenType ty = types_[id];
  return ty == TokenType::control || ty == TokenType::unknown || ty == TokenType::byte ? -1 : id;
}

void Tokenizer::encode_spm_fragment(std::string_view text, std::vector<std::int32_t>& out) const {
  if (text.empty()) return;
  // Symbols: UTF-8 characters; a byte that starts no valid character is a
  // symbol of its own (it can only become a byte token). llama.cpp goes by the
  // lead byte alone, which lets a bad byte swallow the next character.
  std::vector<Symbol> sym;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t l = std::max<std::size_t>(1, detail::utf8_valid_prefix_len(text.substr(i)));
    const auto idx = static_cast<std::int32_t>(sym.size());
    sym.push_back({idx - 1, idx + 1, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(l)});
    i += l;
  }
  sym.back().next = -1;

  struct Pair {
    float score;
    std::int32_t left;
    std::uint32_t left_len, right_len;
  };
  auto worse = [](const Pair& a, const Pair& b) {  // top = highest score, then leftmost
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> queue(worse);
  auto try_pair = [&](std::int32_t l) {
    if (l < 0) return;
    const std::int32_t r = sym[l].next;
    if (r < 0) return;
    const std::int32_t id = spm_text_piece(text.substr(sym[l].start, sym[l].len + sym[r].len));
    if (id < 0) return;
    queue.push({scores_[id], l, sym[l].len, sym[r].len});
  };
  merge_symbols(sym, queue, try_pair);

  for (std::int32_t i = 0; i >= 0; i = sym[i].next) {
    const std::string_view piece = text.substr(sym[i].start, sym[i].len);
    const std::int32_t id = spm_text_piece(piece);
    if (id >= 0) {
      out.push_back(id);
    } else if (piece == kSpmSpace) {
      // A space with no "▁" piece: the space's own byte, so that decoding
      // (which turns "▁" in pieces, not in bytes, back into spaces) gives the
      // space back; llama.cpp emits the bytes of "▁" and decodes "▁".
      push_byte_token(' ', out);
    } else {
      for (unsigned char c : piece) push_byte_token(c, out);  // byte fallback
    }
  }
}

// ---------------------------------------------------------------- decode

std::string Tokenizer::token_to_piece(std::int32_t id, bool hide_control) const {
  check_id(id);
  if (hide_control && (types_[id] == TokenType::control || types_[id] == TokenType::unknown)) return {};
  return pieces_[id];
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, DecodeOptions opt) const {
  std::string out;
  bool at_start = true;  // only control tokens so far
  for (std::int32_t id : ids) {
    check_id(id);
    const TokenType ty = types_[id];
    const bool is_control = ty == TokenType::control || ty == TokenType::unknown;
    if (!(opt.hide_control && is_control)) {
      const std::string& p = pieces_[id];
      if (kind_ == Kind::spm && add_space_prefix_ && at_start && !is_control && !p.empty() && p[0] == ' ')
        out.append(p, 1, std::string::npos);
      else
        out += p;
    }
    if (!is_control) at_start = false;
  }
  return out;
}

// ---------------------------------------------------------------- streaming

std::string Utf8StreamDecoder::push(std::string_view bytes) {
  held_.append(bytes);
  std::string out;
  std::size_t i = 0;
  while (i < held_.size()) {
    const std::string_view rest = std::string_view(held_).substr(i);
    const std::size_t n = detail::utf8_valid_prefix_len(rest);
    if (n > 0) {
      out.append(rest.substr(0, n));
      i += n;
      continue;
    }
    // Not valid here: either an incomplete (so far valid) sequence at the end,
    // which is held, or an invalid byte, which becomes U+FFFD.
    const auto b0 = static_cast<unsigned char>(rest[0]);
    const std::size_t need = b0 >= 0xC2 && b0 <= 0xDF ? 2 : b0 >= 0xE0 && b0 <= 0xEF ? 3 : b0 >= 0xF0 && b0 <= 0xF4 ? 4 : 0;
    if (need > rest.size()) {
      // Valid so far? Try completing with the smallest continuation bytes.
      bool ok = true;
      for (std::size_t k = 1; k < rest.size(); ++k)
        if ((static_cast<unsigned char>(rest[k]) & 0xC0) != 0x80) ok = false;
      if (ok) {
        // Check the second byte's range constraints (overlong / surrogate / > U+10FFFF).
        if (rest.size() >= 2) {
          const auto b1 = static_cast<unsigned char>(rest[1]);
          if ((b0 == 0xE0 && b1 < 0xA0) || (b0 == 0xED && b1 > 0x9F) || (b0 == 0xF0 && b1 < 0x90) ||
              (b0 == 0xF4 && b1 > 0x8F))
            ok = false;
        }
      }
      if (ok) break;  // hold the tail
    }
    out += "\xEF\xBF\xBD";
    i += 1;
  }
  held_.erase(0, i);
  return out;
}

std::string Utf8StreamDecoder::flush() {
  std::string out = held_.empty() ? std::string() : std::string("\xEF\xBF\xBD");
  held_.clear();
  return out;
}

}  // namespace latte
