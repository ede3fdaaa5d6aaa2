#include "runtime/tokenizer/pretokenizer.h"

#include <pcre2.h>

#include <cstdint>
#include <string>

#include "runtime/error.h"

namespace latte::detail {

// ---------------------------------------------------------------- regexes
//
// The regex lists are the facts of llama.cpp's src/llama-vocab.cpp
// (llm_tokenizer_bpe), which in turn come from the models' tokenizer.json.
// Non-ASCII characters are written as \x{...} code points so that no editor or
// normalizer can change them (several of the deepseek-llm letters are
// singletons that NFC would rewrite, e.g. U+1FBE, U+2126, U+212A).

namespace {

// deepseek-llm (DeepSeek-V2): explicit list of cased letters, not \p{L}.
constexpr const char* kDeepseekLlmLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D})"
    R"(\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3})"
    R"(\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D})"
    R"(\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184})"
    R"(\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D})"
    R"(\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF})"
    R"(\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F})"
    R"(\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";

const std::vector<std::string>& deepseek_llm_regexes() {
  static const std::vector<std::string> r = {
      R"([\r\n])",
      kDeepseekLlmLetters,
      // ASCII punctuation !-/ :-~ (":-~" also spans @, [-`, letters, {-~),
      // full-width ！-／ ：-～, quotes U+2018-U+201F, U+3000-U+3002.
      R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)",
      R"(\s+$)",
      // CJK U+4E00-U+9FA5, U+0800-U+4E00 (sic), Hangul syllables U+AC00-U+D7FF.
      R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)",
      R"(\p{N}+)",
  };
  return r;
}

const std::vector<std::string>& deepseek_v3_regexes() {
  static const std::vector<std::string> r = {
      R"(\p{N}{1,3})",
      // CJK U+4E00-U+9FA5, hiragana U+3040-U+309F, katakana U+30A0-U+30FF.
      R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
      R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re",
  };
  return r;
}

const std::vector<std::string>& qwen2_regexes() {
  static const std::vector<std::string> r = {
      R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
  };
  return r;
}

constexpr const char* kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

const std::vector<std::string>& gpt2_regexes() {
  static const std::vector<std::string> r = {kGpt2Regex};
  return r;
}

// llama.cpp's fallback when tokenizer.ggml.pre is absent or "default".
const std::vector<std::string>& default_regexes() {
  static const std::vector<std::string> r = {
      R"([\p{P}\$\+<=>\^~\|]+)",
      kGpt2Regex,
      R"(\p{N}+)",
      R"([0-9][0-9][0-9])",
  };
  return r;
}

}  // namespace

// ---------------------------------------------------------------- Regex

class Regex {
 public:
  explicit Regex(const std::string& pattern) : pattern_(pattern) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
    if (!code_) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(err, buf, sizeof(buf));
      throw Error(Status::internal, "tokenizer: cannot compile pre-tokenizer regex at offset " +
                                        std::to_string(err_off) + ": " +
                                        reinterpret_cast<const char*>(buf));
    }
    // JIT where the platform has it; the interpreter otherwise.
    jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends to `out` the pieces of subject[0, len): matches and gaps.
  void split(const char* subject, std::size_t len, pcre2_match_data* md,
             std::vector<std::size_t>& out) const {
    std::size_t pos = 0;       // where the next search starts
    std::size_t emitted = 0;   // end of the last piece pushed
    const auto* s = reinterpret_cast<PCRE2_SPTR>(subject);
    while (pos < len) {
      int rc = pcre2_match(code_, s, len, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && jit_) {
        // e.g. JIT stack exhausted on a pathological input: interpreter.
        rc = pcre2_match(code_, s, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
      }
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR buf[256];
        pcre2_get_error_message(rc, buf, sizeof(buf));
        throw Error(Status::internal, std::string("tokenizer: pre-tokenizer regex failed: ") +
                                          reinterpret_cast<const char*>(buf));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const std::size_t b = ov[0], e = ov[1];
      if (e == b) {  // empty match (none of our patterns has one): step one character
        pos = b + 1;
        while (pos < len && (static_cast<unsigned char>(subject[pos]) & 0xC0) == 0x80) ++pos;
        continue;
      }
      if (b > emitted) out.push_back(b - emitted);
      out.push_back(e - b);
      emitted = e;
      pos = e;
    }
    if (emitted < len) out.push_back(len - emitted);
  }

  pcre2_code* code() const { return code_; }

 private:
  std::string pattern_;
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
};

// ---------------------------------------------------------------- PreTokenizer

std::shared_ptr<const PreTokenizer> PreTokenizer::create(const std::string& name) {
  const std::vector<std::string>* list = nullptr;
  if (name == "deepseek-llm") {
    list = &deepseek_llm_regexes();
  } else if (name == "deepseek-v3") {
    list = &deepseek_v3_regexes();
  } else if (name == "qwen2" || name == "deepseek-r1-qwen") {
    list = &qwen2_regexes();
  } else if (name == "gpt-2" || name == "gpt2") {
    list = &gpt2_regexes();
  } else if (name.empty() || name == "default") {
    list = &default_regexes();
  } else {
    throw Error(Status::unsupported,
                "tokenizer: unknown pre-tokenizer '" + name +
                    "' (tokenizer.ggml.pre); supported: deepseek-llm, deepseek-v3, qwen2, "
                    "deepseek-r1-qwen, gpt-2, default (or absent)");
  }
  auto p = std::make_shared<PreTokenizer>();
  for (const auto& pat : *list) p->regexes.push_back(std::make_shared<const Regex>(pat));
  return p;
}

std::vector<std::size_t> PreTokenizer::split(std::string_view text) const {
  std::vector<std::size_t> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text.size());
  std::vector<std::size_t> next;
  for (const auto& re : regexes) {
    struct MdFree {
      void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
    };
    std::unique_ptr<pcre2_match_data, MdFree> md(pcre2_match_data_create_from_pattern(re->code(), nullptr));
    if (!md) throw Error(Status::out_of_memory, "tokenizer: cannot allocate regex match data");
    next.clear();
    std::size_t off = 0;
    for (std::size_t len : pieces) {
      re->split(text.data() + off, len, md.get(), next);
      off += len;
    }
    pieces.swap(next);
  }
  return pieces;
}

// ---------------------------------------------------------------- UTF-8

std::size_t utf8_valid_prefix_len(std::string_view s) {
  if (s.empty()) return 0;
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) return 1;
  std::size_t n;
  std::uint32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    cp = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (std::size_t i = 1; i < n; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
  return n;
}

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t n = utf8_valid_prefix_len(text.substr(i));
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.data() + i, n);
      i += n;
    }
  }
  return out;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace latte::detail
