// Byte-level BPE pre-tokenizers: an ordered list of PCRE2 regexes (UTF + UCP).
// Each regex is run over every piece the previous ones produced, and both its
// matches and the gaps between them become pieces (llama.cpp's
// unicode_regex_split semantics). Internal to runtime/tokenizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace latte::detail {

class Regex;  // a compiled PCRE2 pattern

struct PreTokenizer {
  // name: deepseek-llm, deepseek-v3, qwen2 (alias deepseek-r1-qwen), gpt-2,
  // default ("" is default). Unknown: Error(unsupported).
  static std::shared_ptr<const PreTokenizer> create(const std::string& name);

  // `text` must be valid UTF-8. Returns the byte lengths of the pieces, in
  // order; they sum to text.size().
  std::vector<std::size_t> split(std::string_view text) const;

  std::vector<std::shared_ptr<const Regex>> regexes;
};

// Valid UTF-8 copy of `text`: each byte that does not start a well-formed
// sequence (bad lead byte, truncated, overlong, surrogate, > U+10FFFF) becomes
// U+FFFD.
std::string sanitize_utf8(std::string_view text);

// Length of the well-formed UTF-8 sequence at the start of `s`, or 0.
std::size_t utf8_valid_prefix_len(std::string_view s);

// Appends code point `cp` (<= U+10FFFF) as UTF-8.
void append_utf8(std::string& out, std::uint32_t cp);

}  // namespace latte::detail
