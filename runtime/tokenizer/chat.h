// Chat formats: how a conversation becomes the text a chat model was trained
// on. The MLA models Latte runs use three families:
//
//   deepseek2  DeepSeek-V2 / V2-Lite Chat (and Latte's shipped model):
//                BOS, system + "\n\n", "User: " + user + "\n\n",
//                "Assistant: " + reply + EOS; generation opens "Assistant:"
//   deepseek3  DeepSeek-V3, V2.5, V2-0628: BOS, system (no separator),
//                "<｜User｜>" + user, "<｜Assistant｜>" + reply + EOS;
//                generation opens "<｜Assistant｜>"
//   chatml     MiniCPM3, PLM: "<|im_start|>" + role + "\n" + content +
//                "<|im_end|>\n"; generation opens "<|im_start|>assistant\n";
//                BOS as the tokenizer adds it by default
//
// The model file's Jinja template (tokenizer.chat_template) is not executed:
// it is recognized by the markers each family writes, as llama.cpp does. A
// template none of them matches is refused with its opening quoted (escaped:
// a NUL or control byte in it cannot cut or garble the message), rather than
// guessed at; --chat-format names a family instead.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/tokenizer.h"

namespace latte {

enum class ChatFormat { deepseek2, deepseek3, chatml };

// "deepseek2", "deepseek3", "chatml".
std::string_view chat_format_name(ChatFormat format);
// The format of that name; nullopt for any other.
std::optional<ChatFormat> parse_chat_format(std::string_view name);

// One chat turn: role is "system", "user" or "assistant".
struct ChatTurn {
  std::string role;
  std::string content;
};

// The family a model's chat template writes. With no template, the vocabulary
// decides (<|im_start|> and <|im_end|>: chatml; <｜User｜> and <｜Assistant｜>:
// deepseek3), then the architecture (deepseek2). Error (unsupported) naming
// the template's opening when nothing matches.
ChatFormat detect_chat_format(const Tokenizer& tok, std::string_view architecture);

// Formats conversations for one tokenizer. The constructor checks that the
// vocabulary has the format's marker tokens as special tokens (otherwise they
// would be encoded as plain text): Error (unsupported) naming the missing one.
class ChatFormatter {
 public:
  ChatFormatter(const Tokenizer& tok, ChatFormat format);

  ChatFormat format() const { return format_; }

  // The text of `turns`, then the assistant's opening when
  // add_generation_prompt. Encode it with parse_special = true, and with
  // add_bos() at the start of a conversation. Unknown roles: Error
  // (invalid_argument).
  // Tokenized as a whole with parse_special = true, a message's content that
  // spells a control token (an end of turn, a role marker) becomes that
  // token: for untrusted content, use encode.
  std::string format(std::span<const ChatTurn> turns, bool add_generation_prompt) const;

  // The tokens of `prefix` (template text, e.g. reply_end_after) and then of
  // format(turns, add_generation_prompt), BOS first when add_bos: the same
  // tokens as encoding that text with parse_special = true, except that
  // control tokens are recognized only in the template's own text, never in
  // a message's content (there their text stays text).
  std::vector<std::int32_t> encode(std::span<const ChatTurn> turns, bool add_generation_prompt, bool add_bos,
                                   std::string_view prefix = {}) const;

  // Whether a conversation starts with the BOS token.
  bool add_bos() const { return add_bos_; }

  // The text that ends an assistant reply in this format (deepseek: the EOS
  // token's text; chatml: "<|im_end|>\n").
  const std::string& reply_end() const { return reply_end_; }

  // What still has to follow a reply whose last token, already in the
  // context, is `last_token`, before the next turn: the rest of reply_end()
  // after that token's text ("\n" after chatml's <|im_end|>, nothing after
  // DeepSeek's EOS), or all of reply_end() when the reply was cut short
  // (last_token < 0, or not the token reply_end() starts with: compared by
  // id, so an ordinary "<" token that begins its text does not count).
  std::string reply_end_after(std::int32_t last_token) const;

 private:
  const Tokenizer* tok_;
  // prefix + format(), and the byte ranges of the template's own text in it
  // (the prefix included) when markers is not null.
  std::string format_marked(std::span<const ChatTurn> turns, bool add_generation_prompt, std::string_view prefix,
                            std::vector<Tokenizer::TextRange>* markers) const;

  ChatFormat format_;
  std::int32_t reply_end_token_ = -1;  // the special token reply_end_ starts with (-1: none)
  bool add_bos_;
  std::string eos_text_;
  std::string reply_end_;
};

}  // namespace latte
