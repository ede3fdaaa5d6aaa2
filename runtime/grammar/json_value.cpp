#include "runtime/grammar/json_value.h"

#include <cstdlib>

#include "runtime/error.h"
#include "runtime/tokenizer/pretokenizer.h"

namespace latte::grammar {

namespace {

constexpr int kMaxDepth = 256;

class Reader {
 public:
  Reader(std::string_view s, const std::string& what) : s_(s), what_(what) {}

  JsonValue document() {
    ws();
    JsonValue v = value(0);
    ws();
    if (i_ < s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    std::size_t line = 1, col = 1;
    for (std::size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') line++, col = 1;
      else if ((static_cast<unsigned char>(s_[k]) & 0xC0) != 0x80) ++col;
    }
    throw Error(Status::invalid_argument, what_ + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + msg);
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }

  JsonValue value(int depth) {
    if (depth > kMaxDepth) fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (i_ >= s_.size()) fail("expected a value, found the end of the text");
    JsonValue v;
    const char c = s_[i_];
    if (c == '{') {
      v.type = JsonValue::Type::object;
      ++i_;
      ws();
      if (eat("}")) return v;
      while (true) {
        ws();
        if (i_ >= s_.size() || s_[i_] != '"') fail("expected a member name in double quotes");
        std::string key = string();
        ws();
        if (!eat(":")) fail("expected ':' after a member name");
        ws();
        JsonValue member = value(depth + 1);
        v.members.push_back({std::move(key), std::move(member)});
        ws();
        if (eat("}")) return v;
        if (!eat(",")) fail("expected ',' or '}' in an object");
      }
    }
    if (c == '[') {
      v.type = JsonValue::Type::array;
      ++i_;
      ws();
      if (eat("]")) return v;
      while (true) {
        ws();
        v.items.push_back(value(depth + 1));
        ws();
        if (eat("]")) return v;
        if (!eat(",")) fail("expected ',' or ']' in an array");
      }
    }
    if (c == '"') {
      v.type = JsonValue::Type::string;
      v.text = string();
      return v;
    }
    if (eat("true")) {
      v.type = JsonValue::Type::boolean;
      v.boolean = true;
      return v;
    }
    if (eat("false")) {
      v.type = JsonValue::Type::boolean;
      return v;
    }
    if (eat("null")) return v;
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    fail(std::string("expected a value, found '") + c + "'");
  }

  JsonValue number() {
    const std::size_t start = i_;
    auto digits = [&] {
      const std::size_t d = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ - d;
    };
    eat("-");
    if (eat("0")) {
    } else if (digits() == 0) {
      fail("malformed number");
    }
    if (eat(".") && digits() == 0) fail("malformed number: digits must follow '.'");
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (!eat("+")) eat("-");
      if (digits() == 0) fail("malformed number: digits must follow the exponent");
    }
    JsonValue v;
    v.type = JsonValue::Type::number;
    v.text = std::string(s_.substr(start, i_ - start));
    v.number = std::strtod(v.text.c_str(), nullptr);
    return v;
  }

  unsigned hex4() {
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      if (i_ >= s_.size()) fail("unterminated \\u escape");
      const char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
      else fail("expected 4 hex digits after \\u");
    }
    return v;
  }

  std::string string() {
    ++i_;  // the opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        ++i_;
        return out;
      }
      if (c < 0x20) fail("a control character inside a string (escape it)");
      if (c != '\\') {
        out += static_cast<char>(c);
        ++i_;
        continue;
      }
      ++i_;
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (!eat("\\u")) fail("a high surrogate without its low half");
            const unsigned lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("a high surrogate without its low half");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("a lone low surrogate");
          }
          latte::detail::append_utf8(out, cp);
          break;
        }
        default: fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  std::string_view s_;
  const std::string& what_;
  std::size_t i_ = 0;
};

}  // namespace

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20) {
      static const char* hex = "0123456789abcdef";
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string JsonValue::dump() const {
  switch (type) {
    case Type::null: return "null";
    case Type::boolean: return boolean ? "true" : "false";
    case Type::number: return text;
    case Type::string: return json_quote(text);
    case Type::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += ',';
        out += items[i].dump();
      }
      return out + "]";
    }
    case Type::object: {
      std::string out = "{";
      for (std::size_t i = 0; i < members.size(); ++i) {
        if (i) out += ',';
        out += json_quote(members[i].first);
        out += ':';
        out += members[i].second.dump();
      }
      return out + "}";
    }
  }
  return "null";
}

JsonValue parse_json(std::string_view text, const std::string& what) { return Reader(text, what).document(); }

}  // namespace latte::grammar
