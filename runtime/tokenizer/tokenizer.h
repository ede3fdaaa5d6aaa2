// Tokenizers built from GGUF tokenizer metadata (mla-spec.md section 3):
//
//  - byte-level BPE (`tokenizer.ggml.model` = "gpt2"): text is split by the
//    pre-tokenizer regexes of `tokenizer.ggml.pre` (PCRE2, UTF + UCP), each
//    word's bytes are mapped to GPT-2's byte->unicode alphabet and merged by
//    merge rank (lowest rank first, leftmost on ties);
//  - SentencePiece-style BPE ("llama", MiniCPM3): spaces become U+2581, a
//    leading space is added, adjacent pieces are merged by highest score,
//    characters with no piece fall back to <0xXX> byte tokens. As in
//    SentencePiece, merges make only normal, user-defined and unused pieces:
//    text that spells a control, unknown or byte token ("<s>", "<0x41>")
//    stays text (llama.cpp would merge it into that token). A space in a
//    vocabulary without a "▁" piece falls back to the byte <0x20>, so it
//    decodes as a space (llama.cpp: the bytes of "▁", decoded as "▁").
//
// Control (type 3) and unknown (type 2) tokens are found verbatim in the text
// only when parse_special is true; user-defined tokens (type 4) always are, as
// in llama.cpp. They are never split. Longer special tokens are matched first.
//
// How VocabSpec maps to GGUF keys (the GGUF reader fills it):
//   model          tokenizer.ggml.model        ("gpt2" | "llama")
//   pre            tokenizer.ggml.pre          (gpt2 only; absent -> "")
//   tokens         tokenizer.ggml.tokens
//   token_types    tokenizer.ggml.token_type   (absent -> empty: all normal)
//   scores         tokenizer.ggml.scores       (required for "llama")
//   merges         tokenizer.ggml.merges       (required for "gpt2"; "a b")
//   bos_id ...     tokenizer.ggml.bos_token_id, eos_token_id,
//                  unknown_token_id, padding_token_id (absent -> -1)
//   eot_ids        tokenizer.ggml.eot_token_id, eom_token_id (those present)
//   add_bos        tokenizer.ggml.add_bos_token (absent: llama.cpp's default is
//                  false for gpt2 and true for llama)
//   add_space_prefix tokenizer.ggml.add_space_prefix (llama only; absent: true)
//   chat_template  tokenizer.chat_template
//
// Errors are latte::Error: Status::bad_file for an inconsistent spec
// (create), unsupported for an unknown model or pre-tokenizer, and
// invalid_argument for bad calls (ids out of range, BOS asked but absent).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace latte {

// tokenizer.ggml.token_type values.
enum class TokenType : std::int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

struct VocabSpec {
  std::string model;  // "gpt2" (byte-level BPE) or "llama" (SentencePiece BPE)
  std::string pre;    // gpt2 pre-tokenizer: deepseek-llm, deepseek-v3, qwen2, gpt-2, default, ""
  std::vector<std::string> tokens;
  std::vector<std::int32_t> token_types;  // empty, or one per token (0..6)
  std::vector<float> scores;              // empty, or one per token
  std::vector<std::string> merges;        // "left right", rank = index
  std::int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  std::vector<std::int32_t> eot_ids;      // extra end-of-generation ids
  bool add_bos = true;
  bool add_space_prefix = true;           // llama (SentencePiece) only
  std::string chat_template;
};

struct DecodeOptions {
  // Hide control and unknown tokens (BOS, EOS, <|...|> markers). User-defined
  // tokens are always shown.
  bool hide_control = false;
};

namespace detail {
struct PreTokenizer;
}

class Tokenizer {
 public:
  enum class Kind { bpe, spm };

  // Validates the spec: non-empty vocab, no duplicate tokens, array sizes,
  // token types 0..6, special ids in range, merges well formed and naming
  // existing tokens (both parts and their concatenation), scores for "llama",
  // a known pre-tokenizer for "gpt2".
  static Tokenizer create(const VocabSpec& spec);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  Tokenizer(const Tokenizer&);
  Tokenizer& operator=(const Tokenizer&);
  ~Tokenizer();

  // Text to ids. add_bos prepends BOS (Error if the vocab has none).
  // Invalid UTF-8 in gpt2 input is read as U+FFFD per bad byte (as llama.cpp);
  // in llama (SentencePiece) input a bad byte becomes its <0xXX> token.
  std::vector<std::int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;

  // Byte range [begin, end) of a text.
  struct TextRange {
    std::size_t begin = 0, end = 0;
  };
  // As encode(text, add_bos, true), except that a control token's text
  // becomes that token only inside one of special_ranges (a chat template's
  // markers): elsewhere (a message's content) it stays text, so a user
  // cannot forge an end of turn. User-defined tokens are parsed everywhere,
  // as by encode.
  std::vector<std::int32_t> encode_with_special_ranges(std::string_view text, bool add_bos,
                                                       std::span<const TextRange> special_ranges) const;

  // Ids to text: the concatenation of the tokens' pieces (may hold incomplete
  // UTF-8 where the ids cut a character). For "llama" the space that the
  // encoder adds in front of the text is removed from the first piece when
  // only control tokens (BOS) precede it, so decode(encode(s)) == s.
  std::string decode(std::span<const std::int32_t> ids, DecodeOptions opt = {}) const;

  // The bytes one token stands for (for streaming: may be part of a UTF-8
  // character; feed it to Utf8StreamDecoder). Control/unknown tokens give their
  // text, or "" when hide_control.
  std::string token_to_piece(std::int32_t id, bool hide_control = false) const;

  // Raw vocab entry (e.g. "Ġworld", "▁Hello", "<0x0A>").
  const std::string& token_text(std::int32_t id) const;
  TokenType token_type(std::int32_t id) const;
  // Id of a vocab entry by its raw text; -1 when absent.
  std::int32_t find_token(std::string_view text) const;

  // EOS, the eot_ids, and control or user-defined tokens with well-known
  // end-of-turn texts (<|endoftext|>, <|im_end|>, <｜end▁of▁sentence｜>,
  // <|eot_id|>, <|eom_id|>, <|end|>, <end_of_turn>, <|end_of_text|>, <EOT>).
  bool is_end_of_generation(std::int32_t id) const;
  std::span<const std::int32_t> end_of_generation_ids() const { return eog_ids_; }

  std::int32_t n_vocab() const { return static_cast<std::int32_t>(tokens_.size()); }
  std::int32_t bos_id() const { return bos_id_; }
  std::int32_t eos_id() const { return eos_id_; }
  std::int32_t unk_id() const { return unk_id_; }
  std::int32_t pad_id() const { return pad_id_; }
  bool add_bos_by_default() const { return add_bos_; }
  Kind kind() const { return kind_; }
  const std::string& pre() const { return pre_; }
  const std::string& chat_template() const { return chat_template_; }

  // gpt2 only: the words the pre-tokenizer cuts `text` into (raw UTF-8, before
  // byte mapping; no special-token handling). For tests and debugging.
  std::vector<std::string> pre_tokenize(std::string_view text) const;

 private:
  Tokenizer() = default;

  // special_ranges: null, control tokens anywhere (when parse_special).
  std::vector<std::int32_t> encode_impl(std::string_view text, bool add_bos, bool parse_special,
                                        const std::span<const TextRange>* special_ranges) const;
  void encode_bpe_fragment(std::string_view text, std::vector<std::int32_t>& out) const;
  void encode_bpe_word(const std::string& encoded_word, std::vector<std::int32_t>& out) const;
  void encode_spm_fragment(std::string_view text, std::vector<std::int32_t>& out) const;
  void push_byte_token(unsigned char byte, std::vector<std::int32_t>& out) const;
  std::int32_t spm_text_piece(std::string_view text) const;
  void check_id(std::int32_t id) const;

  Kind kind_ = Kind::bpe;
  std::string pre_;
  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  std::vector<float> scores_;
  std::vector<std::string> pieces_;  // decoded bytes per token (control: its text)
  // Looked up by string_view without building a std::string (the encoders
  // look up every candidate merge).
  struct TextHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using TextMap = std::unordered_map<std::string, std::int32_t, TextHash, std::equal_to<>>;
  TextMap token_ids_;
  TextMap merge_ranks_;  // "left right" -> rank
  std::vector<std::int32_t> special_ids_;  // control/user-defined/unknown, longest text first
  std::vector<std::int32_t> eog_ids_;      // sorted
  std::int32_t byte_tokens_[256];          // token of each byte (gpt2: mapped char; llama: <0xXX>), -1 none
  std::int32_t bos_id_ = -1, eos_id_ = -1, unk_id_ = -1, pad_id_ = -1;
  bool add_bos_ = true;
  bool add_space_prefix_ = true;
  std::string chat_template_;
  std::shared_ptr<const detail::PreTokenizer> pre_tokenizer_;  // gpt2 only; immutable, shared by copies
};

// Streaming decoder: feed token pieces, get back only complete, valid UTF-8.
// An incomplete trailing sequence is held until the next push; bytes that
// cannot start or continue a valid sequence come out as U+FFFD.
class Utf8StreamDecoder {
 public:
  std::string push(std::string_view bytes);
  // Whatever is still held, as U+FFFD (one per incomplete sequence); resets.
  std::string flush();
  bool pending() const { return !held_.empty(); }

 private:
  std::string held_;
};

// GPT-2's byte <-> unicode alphabet (bytes_to_unicode): the code point a byte
// is written as in byte-level BPE vocabs. Exposed for tests and tools.
std::uint32_t gpt2_byte_to_codepoint(unsigned char byte);

// SentencePiece's name for a byte token: "<0xXX>", upper-case hex.
std::string hex_byte_token(unsigned char byte);

}  // namespace latte
