#include "runtime/tokenizer/chat.h"


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

// The template's opening, one line, for an error message.
std::string opening(std::string_view tmpl) {
  std::string s;
  for (char c : tmpl.substr(0, 60)) s += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  if (tmpl.size() > 60) s += "...";
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
