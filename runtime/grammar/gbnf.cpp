#include "runtime/grammar/gbnf.h"

#include <algorithm>
#include <vector>

#include "runtime/error.h"

namespace latte::grammar {

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < src.size(); ++i)
      if (src[i] == '\n') line_starts_.push_back(i + 1);
  }

  RuleSet parse() {
    while (true) {
      skip_space(true);
      if (at_end()) break;
      parse_rule();
    }
    return std::move(rs_);
  }

 private:
  std::string loc(std::size_t at) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at) - 1;
    const std::size_t line = static_cast<std::size_t>(it - line_starts_.begin()) + 1;
    std::size_t col = 1;
    for (std::size_t i = *it; i < at && i < src_.size(); ++i)
      if ((static_cast<unsigned char>(src_[i]) & 0xC0) != 0x80) ++col;  // code points, not bytes
    return std::to_string(line) + ":" + std::to_string(col);
  }
  [[noreturn]] void fail(std::size_t at, const std::string& msg) const {
    throw Error(Status::invalid_argument, "grammar:" + loc(at) + ": " + msg);
  }
  std::string what_is_at(std::size_t at) const {
    if (at >= src_.size()) return "the end of the grammar";
    const char c = src_[at];
    if (c == '\n') return "the end of the line";
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x80) return "a character";
    return std::string("'") + c + "'";
  }

  bool at_end() const { return pos_ >= src_.size(); }
  char peek() const { return at_end() ? '\0' : src_[pos_]; }

  // Spaces, tabs, comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && src_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const std::size_t start = pos_;
    while (!at_end() && is_name_char(src_[pos_])) ++pos_;
    if (pos_ == start) fail(start, "expected a rule name, found " + what_is_at(start));
    return std::string(src_.substr(start, pos_ - start));
  }

  void parse_rule() {
    const std::size_t start = pos_;
    const std::string name = parse_name();
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") fail(pos_, "expected '::=' after rule name '" + name + "', found " + what_is_at(pos_));
    pos_ += 3;
    const std::uint32_t id = rs_.rule_id(name);
    if (rs_.defined[id]) fail(start, "rule '" + name + "' is defined twice");
    rs_.defined[id] = true;
    skip_space(true);
    auto alts = parse_alternatives(name, false);
    rs_.rules[id] = std::move(alts);
    skip_space(false);
    if (!at_end() && peek() != '\n') fail(pos_, "expected the end of the line after rule '" + name + "', found " + what_is_at(pos_));
  }

  std::vector<std::vector<Element>> parse_alternatives(const std::string& rule, bool nested) {
    std::vector<std::vector<Element>> alts;
    alts.push_back(parse_sequence(rule, nested));
    while (true) {
      skip_space(nested);
      if (!nested && peek() == '\n') {
        // A following line that starts with '|' continues the rule.
        const std::size_t save = pos_;
        skip_space(true);
        if (peek() != '|') {
          pos_ = save;
          break;
        }
      }
      if (peek() != '|') break;
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(rule, nested));
    }
    return alts;
  }

  std::vector<Element> parse_sequence(const std::string& rule, bool nested) {
    std::vector<Element> seq;
    std::size_t last_start = 0;  // where the last item's elements begin in seq
    bool have_last = false;
    while (true) {
      skip_space(nested);
      if (at_end()) break;
      const char c = peek();
      if (c == '|' || c == ')' || c == '\n') break;
      if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_last) fail(pos_, std::string("'") + c + "' follows nothing to repeat");
        parse_postfix(rule, seq, last_start);
        continue;
      }
      last_start = seq.size();
      have_last = true;
      if (c == '"') {
        const std::size_t start = pos_++;
        while (true) {
          if (at_end() || peek() == '\n') fail(start, "unterminated string literal");
          if (peek() == '"') {
            ++pos_;
            break;
          }
          const std::uint32_t cp = parse_char();
          CharSet cs;
          cs.ranges.push_back({cp, cp});
          cs.normalize(false);
          seq.push_back({ElementKind::chars, rs_.add_charset(std::move(cs))});
        }
        if (seq.size() == last_start) have_last = false;  // "": nothing to repeat
      } else if (c == '[') {
        seq.push_back({ElementKind::chars, rs_.add_charset(parse_class())});
      } else if (c == '.') {
        ++pos_;
        CharSet cs;
        cs.ranges.push_back({0, kMaxCodePoint});
        cs.normalize(false);
        seq.push_back({ElementKind::chars, rs_.add_charset(std::move(cs))});
      } else if (c == '(') {
        const std::size_t start = pos_++;
        if (++depth_ > kMaxGbnfNesting) fail(start, "groups nested deeper than " + std::to_string(kMaxGbnfNesting));
        skip_space(true);
        auto alts = parse_alternatives(rule, true);
        skip_space(true);
        if (peek() != ')') fail(pos_, "expected ')' to close the group opened at " + loc(start) + ", found " + what_is_at(pos_));
        ++pos_;
        --depth_;
        const std::uint32_t id = new_rule(rule);
        rs_.rules[id] = std::move(alts);
        seq.push_back({ElementKind::rule, id});
      } else if (is_name_char(c)) {
        const std::size_t start = pos_;
        const std::string name = parse_name();
        skip_space(false);
        if (src_.substr(pos_, 3) == "::=")
          fail(start, "expected the end of the line before the next rule '" + name + "' (a rule's alternatives continue on a new line only after '|' or inside ( ))");
        const std::uint32_t id = rs_.rule_id(name);
        if (rs_.first_use[id].empty()) rs_.first_use[id] = loc(start);
        seq.push_back({ElementKind::rule, id});
      } else {
        fail(pos_, "expected a rule name, a \"literal\", a [class], '.', '(' or the end of the rule, found " + what_is_at(pos_));
      }
    }
    return seq;
  }

  std::uint32_t new_rule(const std::string& parent) {
    // "#": a character no written name has, so a generated rule never takes a written one's name.
    const std::uint32_t id = rs_.rule_id(parent + "#" + std::to_string(++generated_));
    rs_.defined[id] = true;
    return id;
  }

  std::uint32_t parse_count() {
    const std::size_t start = pos_;
    std::uint64_t v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<std::uint64_t>(peek() - '0');
      if (v > kMaxRepetition) fail(start, "a repetition count above " + std::to_string(kMaxRepetition) + " is refused");
      ++pos_;
    }
    if (pos_ == start) fail(start, "expected a number in { }, found " + what_is_at(start));
    return static_cast<std::uint32_t>(v);
  }

  // Replaces seq[from..] (the last item) by its repetition.
  void parse_postfix(const std::string& rule, std::vector<Element>& seq, std::size_t from) {
    const std::size_t start = pos_;
    std::uint32_t lo = 0, hi = 0;
    bool unbounded = false;
    const char c = src_[pos_++];
    if (c == '*') unbounded = true;
    else if (c == '+') lo = 1, unbounded = true;
    else if (c == '?') hi = 1;
    else {  // {m}, {m,}, {m,n}
      skip_space(false);
      lo = hi = parse_count();
      skip_space(false);
      if (peek() == ',') {
        ++pos_;
        skip_space(false);
        if (peek() == '}') unbounded = true;
        else hi = parse_count();
        skip_space(false);
      }
      if (peek() != '}') fail(pos_, "expected '}' to close the repetition, found " + what_is_at(pos_));
      ++pos_;
      if (!unbounded && hi < lo) fail(start, "repetition {" + std::to_string(lo) + "," + std::to_string(hi) + "}: the maximum is below the minimum");
    }
    const std::vector<Element> item(seq.begin() + static_cast<std::ptrdiff_t>(from), seq.end());
    seq.resize(from);
    const std::size_t grown = item.size() * (static_cast<std::size_t>(lo) + (unbounded ? 1 : hi - lo));
    total_ += grown;
    if (total_ > kMaxGrammarElements) fail(start, "the repetitions expand to more than " + std::to_string(kMaxGrammarElements) + " elements: refused");
    for (std::uint32_t i = 0; i < lo; ++i) seq.insert(seq.end(), item.begin(), item.end());
    if (unbounded) {
      // R ::= item R | (empty): the matcher reuses its stack for each round.
      const std::uint32_t r = new_rule(rule);
      std::vector<Element> again = item;
      again.push_back({ElementKind::rule, r});
      rs_.rules[r] = {again, {}};
      seq.push_back({ElementKind::rule, r});
    } else if (hi > lo) {
      // O1 ::= item | (empty); Ok ::= item O(k-1) | (empty).
      std::uint32_t prev = 0;
      for (std::uint32_t k = 1; k <= hi - lo; ++k) {
        const std::uint32_t r = new_rule(rule);
        std::vector<Element> alt = item;
        if (k > 1) alt.push_back({ElementKind::rule, prev});
        rs_.rules[r] = {alt, {}};
        prev = r;
      }
      seq.push_back({ElementKind::rule, prev});
    }
  }

  std::uint32_t parse_hex(std::size_t digits, std::size_t start) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < digits; ++i) {
      const char c = peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) fail(pos_, "expected " + std::to_string(digits) + " hex digits in an escape, found " + what_is_at(pos_));
      v = v * 16 + static_cast<std::uint32_t>(d);
      ++pos_;
    }
    if (v > kMaxCodePoint) fail(start, "code point beyond U+10FFFF in an escape");
    return v;
  }

  // One character of a literal or class: an escape or a UTF-8 code point.
  std::uint32_t parse_char() {
    const std::size_t start = pos_;
    const auto b = static_cast<unsigned char>(src_[pos_]);
    if (b == '\\') {
      ++pos_;
      if (at_end()) fail(start, "unterminated escape");
      const char e = src_[pos_++];
      switch (e) {
        case 'n': return '\n';
        case 't': return '\t';
        case 'r': return '\r';
        case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/': return static_cast<unsigned char>(e);
        case 'x': return parse_hex(2, start);
        case 'u': return parse_hex(4, start);
        case 'U': return parse_hex(8, start);
        default: fail(start, std::string("unknown escape '\\") + e + "'");
      }
    }
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + static_cast<std::size_t>(len) > src_.size()) fail(start, "invalid UTF-8");
    std::uint32_t cp = len == 1 ? b : (b & (0x7F >> len));
    for (int i = 1; i < len; ++i) {
      const auto c = static_cast<unsigned char>(src_[pos_ + static_cast<std::size_t>(i)]);
      if ((c & 0xC0) != 0x80) fail(start, "invalid UTF-8");
      cp = (cp << 6) | (c & 0x3F);
    }
    pos_ += static_cast<std::size_t>(len);
    return cp;
  }

  CharSet parse_class() {
    const std::size_t start = pos_++;
    bool negate = false;
    if (peek() == '^') {
      negate = true;
      ++pos_;
    }
    CharSet cs;
    while (true) {
      if (at_end() || peek() == '\n') fail(start, "unterminated character class");
      if (peek() == ']') {
        ++pos_;
        break;
      }
      const std::size_t at = pos_;
      const std::uint32_t lo = parse_char();
      std::uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail(at, "character range with its end below its start");
      }
      cs.ranges.push_back({lo, hi});
    }
    cs.normalize(negate);
    return cs;
  }

  std::string_view src_;
  std::size_t pos_ = 0;
  std::vector<std::size_t> line_starts_;
  RuleSet rs_;
  int depth_ = 0;
  std::uint32_t generated_ = 0;
  std::size_t total_ = 0;
};

}  // namespace

Grammar parse_gbnf(std::string_view text, const std::string& root) {
  RuleSet rs = Parser(text).parse();
  return compile(std::move(rs), root);
}

}  // namespace latte::grammar
