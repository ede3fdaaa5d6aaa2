#include "runtime/tokenizer/chat.h"

#include <algorithm>

#include "runtime/error.h"

namespace latte {

namespace {

// DeepSeek's full-width markers, spelled out in UTF-8 (｜ U+FF5C, ▁ U+2581).
const std::string kDsUser = "<\xEF\xBD\x9C" "User\xEF\xBD\x9C>";
const std::string kDsAssistant = "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>";
const std::string kImStart = "<|im_start|>";
const std::string kImEnd = "<|im_end|>";

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

bool is_special(const Tokenizer& tok, std::int32_t id) {
  if (id < 0) return false;
  const TokenType t = tok.token_type(id);
  return t == TokenType::control || t == TokenType::user_defined;
}

bool has_special(const Tokenizer& tok, const std::string& text) { return is_special(tok, tok.find_token(text)); }

// Bytes of the UTF-8 character starting at s[i] (1 to 4), or 0 where
// s[i] does not start a valid, complete one.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((b(k) & 0xC0) != 0x80) return 0;
  // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
  if ((n == 2 && c < 0xC2) || (n == 3 && c == 0xE0 && b(1) < 0xA0) || (n == 3 && c == 0xED && b(1) >= 0xA0) ||
      (n == 4 && c == 0xF0 && b(1) < 0x90) || (n == 4 && (c > 0xF4 || (c == 0xF4 && b(1) >= 0x90))))
    return 0;
  return n;
}

// The template's first 60 bytes (whole characters), for an error message:
// one line of printable text whatever the file holds, every other byte
// escaped as C writes it (\n, \0, \x1b; a byte that is not UTF-8 as \xNN),
// so that a NUL or a terminal control does not cut or garble the message.
std::string opening(std::string_view tmpl) {
  constexpr std::size_t kMax = 60;
  std::string s;
  std::size_t i = 0;
  while (i < tmpl.size()) {
    const std::size_t n = utf8_length(tmpl, i);
    if (i + std::max<std::size_t>(n, 1) > kMax) break;
    const unsigned char c = static_cast<unsigned char>(tmpl[i]);
    if (n > 1) {
      s.append(tmpl.substr(i, n));
    } else if (n == 1 && c >= 0x20 && c != 0x7F) {
      if (c == '"' || c == '\\') s += '\\';
      s += static_cast<char>(c);
    } else {
      switch (c) {
        case '\0': s += "\\0"; break;
        case '\n': s += "\\n"; break;
        case '\r': s += "\\r"; break;
        case '\t': s += "\\t"; break;
        default: {
          static const char kHex[] = "0123456789abcdef";
          s += "\\x";
          s += kHex[c >> 4];
          s += kHex[c & 15];
        }
      }
    }
    i += std::max<std::size_t>(n, 1);
  }
  if (i < tmpl.size()) s += "...";
  return s;
}

}  // namespace

std::string_view chat_format_name(ChatFormat format) {
  switch (format) {
    case ChatFormat::deepseek2: return "deepseek2";
    case ChatFormat::deepseek3: return "deepseek3";
    case ChatFormat::chatml: return "chatml";
  }
  return "?";
}

std::optional<ChatFormat> parse_chat_format(std::string_view name) {
  for (ChatFormat f : {ChatFormat::deepseek2, ChatFormat::deepseek3, ChatFormat::chatml})
    if (chat_format_name(f) == name) return f;
  return std::nullopt;
}

ChatFormat detect_chat_format(const Tokenizer& tok, std::string_view architecture) {
  const std::string& tmpl = tok.chat_template();
  if (!tmpl.empty()) {
    // Each family's Jinja writes its markers as string literals.
    if (contains(tmpl, kImStart)) return ChatFormat::chatml;
    if (contains(tmpl, kDsUser) && contains(tmpl, kDsAssistant)) return ChatFormat::deepseek3;
    if (contains(tmpl, "'User: '") && contains(tmpl, "'Assistant:")) return ChatFormat::deepseek2;
    throw Error(Status::unsupported, "chat: the model's chat template (tokenizer.chat_template: \"" + opening(tmpl) +
                                         "\") is not one Latte recognizes (deepseek2, deepseek3, chatml); "
                                         "name the format with --chat-format");
  }
  if (has_special(tok, kImStart) && has_special(tok, kImEnd)) return ChatFormat::chatml;
  if (has_special(tok, kDsUser) && has_special(tok, kDsAssistant)) return ChatFormat::deepseek3;
  if (architecture == "deepseek2") return ChatFormat::deepseek2;
  throw Error(Status::unsupported, "chat: the model has no chat template (tokenizer.chat_template) and no chat tokens "
                                   "Latte recognizes; name the format with --chat-format");
}

ChatFormatter::ChatFormatter(const Tokenizer& tok, ChatFormat format) : tok_(&tok), format_(format) {
  const std::string name(chat_format_name(format));
  const auto require = [&](const std::string& text) {
    if (!has_special(tok, text))
      throw Error(Status::unsupported, "chat: format " + name + " needs the special token " + text +
                                           ", which the model's vocabulary " +
                                           (tok.find_token(text) < 0 ? "lacks" : "has only as a normal token"));
  };
  eos_text_ = tok.eos_id() >= 0 ? tok.token_text(tok.eos_id()) : "";
  switch (format) {
    case ChatFormat::deepseek2:
      add_bos_ = tok.bos_id() >= 0;
      reply_end_ = eos_text_;
      break;
    case ChatFormat::deepseek3:
      require(kDsUser);
      require(kDsAssistant);
      add_bos_ = tok.bos_id() >= 0;
      reply_end_ = eos_text_;
      break;
    case ChatFormat::chatml:
      require(kImStart);
      require(kImEnd);
      add_bos_ = tok.add_bos_by_default() && tok.bos_id() >= 0;
      reply_end_ = kImEnd + "\n";
      break;
  }
  reply_end_token_ = format == ChatFormat::chatml ? tok.find_token(kImEnd) : tok.eos_id();
}

std::string ChatFormatter::format(std::span<const ChatTurn> turns, bool add_generation_prompt) const {
  return format_marked(turns, add_generation_prompt, {}, nullptr);
}

std::string ChatFormatter::format_marked(std::span<const ChatTurn> turns, bool add_generation_prompt,
                                         std::string_view prefix, std::vector<Tokenizer::TextRange>* markers) const {
  std::string s;
  // The template's own text (markers, separators, the reply's end, the
  // prefix) and the messages' content; only the former may hold control
  // tokens.
  const auto marker = [&](std::string_view text) {
    if (markers != nullptr && !text.empty()) markers->push_back({s.size(), s.size() + text.size()});
    s += text;
  };
  const auto content = [&](const std::string& text) { s += text; };
  marker(prefix);
  for (const ChatTurn& t : turns) {
    if (t.role != "system" && t.role != "user" && t.role != "assistant")
      throw Error(Status::invalid_argument,
                  "chat: unknown role '" + t.role + "' (expected system, user or assistant)");
    switch (format_) {
      case ChatFormat::deepseek2:
        if (t.role == "system") {
          content(t.content);
          marker("\n\n");
        } else if (t.role == "user") {
          marker("User: ");
          content(t.content);
          marker("\n\n");
        } else {
          marker("Assistant: ");
          content(t.content);
          marker(reply_end_);
        }
        break;
      case ChatFormat::deepseek3:
        if (t.role == "system") {
          content(t.content);
        } else if (t.role == "user") {
          marker(kDsUser);
          content(t.content);
        } else {
          marker(kDsAssistant);
          content(t.content);
          marker(reply_end_);
        }
        break;
      case ChatFormat::chatml:
        marker(kImStart + t.role + "\n");
        content(t.content);
        marker(reply_end_);
        break;
    }
  }
  if (add_generation_prompt) {
    switch (format_) {
      case ChatFormat::deepseek2: marker("Assistant:"); break;
      case ChatFormat::deepseek3: marker(kDsAssistant); break;
      case ChatFormat::chatml: marker(kImStart + "assistant\n"); break;
    }
  }
  return s;
}

std::vector<std::int32_t> ChatFormatter::encode(std::span<const ChatTurn> turns, bool add_generation_prompt,
                                                bool add_bos, std::string_view prefix) const {
  std::vector<Tokenizer::TextRange> markers;
  const std::string text = format_marked(turns, add_generation_prompt, prefix, &markers);
  return tok_->encode_with_special_ranges(text, add_bos, markers);
}

std::string ChatFormatter::reply_end_after(std::int32_t last_token) const {
  // By id: a reply cut short right after an ordinary "<" or "<|" token ends
  // with a prefix of the ending's text, not with its token.
  if (last_token < 0 || last_token != reply_end_token_) return reply_end_;
  return reply_end_.substr(tok_->token_text(last_token).size());
}

}  // namespace latte
