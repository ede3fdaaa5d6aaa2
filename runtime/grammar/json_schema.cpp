#include "runtime/grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "runtime/error.h"
#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/json_value.h"

namespace latte::grammar {

namespace {

using T = JsonValue::Type;

constexpr std::int64_t kMaxBound = 1000000000000000;  // 10^15: 16 digits, the integer rule's limit
constexpr std::int64_t kMaxCount = 10000;            // lengths and item counts (kMaxRepetition)
constexpr int kMaxSchemaDepth = 64;

// The rules every schema may use, by name.
const std::map<std::string, std::string>& primitives() {
  static const std::map<std::string, std::string> p = {
      {"space", R"(| " " | "\n" [ \t]{0,20})"},
      {"boolean", R"(("true" | "false") space)"},
      {"null", R"("null" space)"},
      {"integer", R"(("-"? ([0-9] | [1-9] [0-9]{0,15})) space)"},
      {"number", R"(("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? space)"},
      {"char", R"([^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))"},
      {"string", R"("\"" char* "\"" space)"},
      {"value", R"(object | array | string | number | boolean | null)"},
      {"object", R"("{" space (string ":" space value ("," space string ":" space value)*)? "}" space)"},
      {"array", R"("[" space (value ("," space value)*)? "]" space)"},
      {"date", R"([0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [1-2] [0-9] | "3" [0-1]))"},
      {"time", R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))"},
      {"date-time", R"(date "T" time)"},
      {"uuid", R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})"},
      {"key-char", R"([^"\\\x7F\x00-\x1F])"},
  };
  return p;
}
// What each primitive uses.
const std::map<std::string, std::vector<std::string>>& primitive_deps() {
  static const std::map<std::string, std::vector<std::string>> d = {
      {"boolean", {"space"}}, {"null", {"space"}}, {"integer", {"space"}}, {"number", {"space"}},
      {"string", {"char", "space"}}, {"value", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", {"string", "space", "value"}}, {"array", {"value", "space"}}, {"date-time", {"date", "time"}},
  };
  return d;
}

const std::set<std::string>& annotations() {
  static const std::set<std::string> a = {"title",      "description", "$schema",  "$id",      "$comment",
                                          "default",    "examples",    "deprecated", "readOnly", "writeOnly"};
  return a;
}
const std::set<std::string>& honoured() {
  static const std::set<std::string> h = {
      "type",     "properties", "required",  "additionalProperties", "enum",      "const",     "items",
      "minItems", "maxItems",   "anyOf",     "oneOf",                "$ref",      "minLength", "maxLength",
      "format",   "minimum",    "maximum",   "exclusiveMinimum",     "exclusiveMaximum", "$defs", "definitions"};
  return h;
}

// A GBNF literal of some bytes (UTF-8 passes through).
std::string literal(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) {
      static const char* hex = "0123456789ABCDEF";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string hex8(std::uint32_t cp) {
  static const char* hex = "0123456789ABCDEF";
  std::string s = "\\U";
  for (int k = 7; k >= 0; --k) s += hex[(cp >> (4 * k)) & 15];
  return s;
}

std::vector<std::uint32_t> code_points(std::string_view s) {
  std::vector<std::uint32_t> out;
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    std::uint32_t cp = len == 1 ? b : (b & (0x7F >> len));
    for (int k = 1; k < len && i + static_cast<std::size_t>(k) < s.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]) & 0x3F);
    out.push_back(cp);
    i += static_cast<std::size_t>(len);
  }
  return out;
}

// Alternatives matching the decimal strings of length L in [a, b] (same length).
std::string same_length_range(const std::string& a, const std::string& b) {
  const std::size_t L = a.size();
  if (a == b) return literal(a);
  if (L == 1) return std::string("[") + a[0] + "-" + b[0] + "]";
  if (a[0] == b[0]) return literal(a.substr(0, 1)) + " (" + same_length_range(a.substr(1), b.substr(1)) + ")";
  const bool low_all0 = a.find_first_not_of('0', 1) == std::string::npos;
  const bool high_all9 = b.find_first_not_of('9', 1) == std::string::npos;
  std::vector<std::string> alts;
  char start = a[0], end = b[0];
  const std::string rest = "[0-9]{" + std::to_string(L - 1) + "}";
  if (!low_all0) {
    alts.push_back(literal(a.substr(0, 1)) + " (" + same_length_range(a.substr(1), std::string(L - 1, '9')) + ")");
    ++start;
  }
  if (!high_all9) --end;
  if (start <= end) alts.push_back(std::string("[") + start + "-" + end + "] " + rest);
  if (!high_all9) alts.push_back(literal(b.substr(0, 1)) + " (" + same_length_range(std::string(L - 1, '0'), b.substr(1)) + ")");
  std::string out;
  for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

// Alternatives matching the decimal integers in [lo, hi] (no sign, no leading
// zeros); hi unset: up to 16 digits.
std::string uint_range(std::int64_t lo, std::optional<std::int64_t> hi) {
  const std::string los = std::to_string(lo);
  const std::size_t max_len = hi ? std::to_string(*hi).size() : 16;
  std::vector<std::string> alts;
  for (std::size_t L = los.size(); L <= max_len; ++L) {
    std::string a = los;
    if (L != los.size()) {  // the smallest of L digits, 10...0 (not "1" + std::string: a false
      a.assign(L, '0');     // -Wrestrict from mingw g++ 12)
      a[0] = '1';
    }
    const std::string b = hi && L == max_len ? std::to_string(*hi) : std::string(L, '9');
    alts.push_back(std::string("(").append(same_length_range(a, b)).append(")"));
  }
  std::string out;
  for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

class Converter {
 public:
  explicit Converter(const JsonValue& root) : root_(root) {}

  std::string run() {
    const std::string e = visit(root_, "#", 0);
    std::string out = "root ::= " + e + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    for (const auto& name : prims_) out += name + " ::= " + primitives().at(name) + "\n";
    return out;
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& msg) {
    throw Error(Status::invalid_argument, "json schema: at " + path + ": " + msg);
  }

  std::string prim(const std::string& name) {
    if (prims_.insert(name).second) {
      auto it = primitive_deps().find(name);
      if (it != primitive_deps().end())
        for (const auto& d : it->second) prim(d);
    }
    return name;
  }
  std::string new_rule(const std::string& hint) {
    std::string base;
    for (char c : hint)
      base += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    if (base.empty() || base.size() > 40) base = "r";
    std::string name = "s-" + base;
    for (int k = 2; names_.count(name); ++k) name = "s-" + base + "-" + std::to_string(k);
    names_.insert(name);
    rules_.push_back({name, ""});
    return name;
  }
  void define(const std::string& name, const std::string& body) {
    for (auto& r : rules_)
      if (r.first == name) r.second = body;
  }

  std::optional<std::int64_t> count(const JsonValue& s, const char* key, const std::string& path) {
    const JsonValue* v = s.find(key);
    if (!v) return std::nullopt;
    // Judged before any cast: a double past int64's range does not convert
    // (the grammar fuzzer's maxItems 1.1e22 did, undefined behaviour).
    if (!v->is(T::number) || !(v->number >= 0) || v->number != std::floor(v->number))
      fail(path, std::string("'") + key + "' must be a non-negative integer");
    if (v->number > kMaxCount) fail(path, std::string("'") + key + "' above " + std::to_string(kMaxCount) + " is not supported");
    return static_cast<std::int64_t>(v->number);
  }

  const JsonValue& resolve(const std::string& ref, const std::string& path) {
    if (ref.rfind("#", 0) != 0) fail(path, "'$ref' to '" + ref + "': only references inside the schema (\"#/...\") are supported");
    const JsonValue* v = &root_;
    std::size_t i = 1;
    while (i < ref.size()) {
      if (ref[i] != '/') fail(path, "'$ref' '" + ref + "' is not a JSON pointer");
      std::size_t j = ref.find('/', i + 1);
      if (j == std::string::npos) j = ref.size();
      std::string key = ref.substr(i + 1, j - i - 1);
      // JSON pointer escapes: ~1 is '/', ~0 is '~' (decoded in one pass).
      std::string decoded;
      for (std::size_t k = 0; k < key.size(); ++k) {
        if (key[k] == '~' && k + 1 < key.size() && (key[k + 1] == '0' || key[k + 1] == '1')) {
          decoded += key[k + 1] == '1' ? '/' : '~';
          ++k;
        } else {
          decoded += key[k];
        }
      }
      key = std::move(decoded);
      const JsonValue* next = nullptr;
      if (v->is(T::object)) next = v->find(key);
      else if (v->is(T::array) && !key.empty() && key.find_first_not_of("0123456789") == std::string::npos &&
               std::stoull(key) < v->items.size())
        next = &v->items[std::stoull(key)];
      if (!next) fail(path, "'$ref' '" + ref + "' names nothing in the schema");
      v = next;
      i = j;
    }
    return *v;
  }

  std::string visit(const JsonValue& s, const std::string& path, int depth) {
    if (depth > kMaxSchemaDepth) fail(path, "subschemas nested deeper than " + std::to_string(kMaxSchemaDepth));
    if (s.is(T::boolean)) {
      if (!s.boolean) fail(path, "the schema false admits no value");
      return prim("value");
    }
    if (!s.is(T::object)) fail(path, "a schema must be an object or a boolean");
    for (const auto& [k, v] : s.members)
      if (!honoured().count(k) && !annotations().count(k)) fail(path, "'" + k + "' is not supported");
    auto constraining = [&](std::initializer_list<const char*> except) {
      for (const auto& m : s.members) {
        const std::string& k = m.first;
        if (annotations().count(k) || k == "$defs" || k == "definitions") continue;
        if (std::find_if(except.begin(), except.end(), [&](const char* e) { return k == e; }) == except.end()) return k;
      }
      return std::string();
    };

    if (const JsonValue* ref = s.find("$ref")) {
      if (!ref->is(T::string)) fail(path, "'$ref' must be a string");
      if (auto other = constraining({"$ref"}); !other.empty()) fail(path, "'" + other + "' beside '$ref' is not supported");
      if (auto it = refs_.find(ref->text); it != refs_.end()) return it->second;
      const std::string name = new_rule(ref->text.substr(ref->text.rfind('/') + 1));
      refs_[ref->text] = name;  // before visiting: a recursive reference finds it
      define(name, visit(resolve(ref->text, path), ref->text, depth + 1));
      return name;
    }
    if (const JsonValue* c = s.find("const")) {
      if (auto other = constraining({"const", "type"}); !other.empty()) fail(path, "'" + other + "' beside 'const' is not supported");
      return literal(c->dump()) + " " + prim("space");
    }
    if (const JsonValue* e = s.find("enum")) {
      if (!e->is(T::array) || e->items.empty()) fail(path, "'enum' must be a non-empty array");
      if (auto other = constraining({"enum", "type"}); !other.empty()) fail(path, "'" + other + "' beside 'enum' is not supported");
      std::string out = "(";
      for (std::size_t i = 0; i < e->items.size(); ++i) out += (i ? " | " : "") + literal(e->items[i].dump());
      return out + ") " + prim("space");
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (const JsonValue* a = s.find(key)) {
        if (!a->is(T::array) || a->items.empty()) fail(path, std::string("'") + key + "' must be a non-empty array");
        if (auto other = constraining({key}); !other.empty())
          fail(path, "'" + other + "' beside '" + key + "' is not supported");
        std::string out = "(";
        for (std::size_t i = 0; i < a->items.size(); ++i)
          out += (i ? " | " : "") + visit(a->items[i], path + "/" + key + "/" + std::to_string(i), depth + 1);
        return out + ")";
      }
    }

    std::vector<std::string> types;
    if (const JsonValue* t = s.find("type")) {
      if (t->is(T::string)) types.push_back(t->text);
      else if (t->is(T::array) && !t->items.empty())
        for (const auto& x : t->items) {
          if (!x.is(T::string)) fail(path, "'type' must be a string or an array of strings");
          types.push_back(x.text);
        }
      else fail(path, "'type' must be a string or a non-empty array of strings");
    } else if (s.find("properties") || s.find("additionalProperties") || s.find("required")) {
      types = {"object"};
    } else if (s.find("items") || s.find("minItems") || s.find("maxItems")) {
      types = {"array"};
    } else if (s.find("minLength") || s.find("maxLength") || s.find("format")) {
      types = {"string"};
    } else if (s.find("minimum") || s.find("maximum") || s.find("exclusiveMinimum") || s.find("exclusiveMaximum")) {
      types = {"number"};
    } else {
      return prim("value");
    }
    std::string out;
    for (std::size_t i = 0; i < types.size(); ++i) {
      const std::string& t = types[i];
      std::string e;
      if (t == "string") e = string_of(s, path);
      else if (t == "integer") e = integer_of(s, path);
      else if (t == "number") e = number_of(s, path);
      else if (t == "boolean") e = prim("boolean");
      else if (t == "null") e = prim("null");
      else if (t == "object") e = object_of(s, path, depth);
      else if (t == "array") e = array_of(s, path, depth);
      else fail(path, "unknown type '" + t + "'");
      out += (i ? " | " : "") + e;
    }
    return types.size() > 1 ? "(" + out + ")" : out;
  }

  std::string string_of(const JsonValue& s, const std::string& path) {
    const auto lo = count(s, "minLength", path), hi = count(s, "maxLength", path);
    if (lo && hi && *hi < *lo) fail(path, "'maxLength' is below 'minLength'");
    if (const JsonValue* f = s.find("format")) {
      if (!f->is(T::string)) fail(path, "'format' must be a string");
      if (f->text != "date" && f->text != "time" && f->text != "date-time" && f->text != "uuid")
        fail(path, "format '" + f->text + "' is not supported (date, time, date-time, uuid are)");
      if (lo || hi) fail(path, "'minLength'/'maxLength' beside 'format' is not supported");
      return "\"\\\"\" " + prim(f->text) + " \"\\\"\" " + prim("space");
    }
    if (!lo && !hi) return prim("string");
    prim("char");
    std::string rep = "{" + std::to_string(lo.value_or(0)) + "," + (hi ? std::to_string(*hi) : "") + "}";
    return "\"\\\"\" char" + rep + " \"\\\"\" " + prim("space");
  }

  std::optional<std::int64_t> bound(const JsonValue& s, const char* key, const std::string& path) {
    const JsonValue* v = s.find(key);
    if (!v) return std::nullopt;
    if (!v->is(T::number)) fail(path, std::string("'") + key + "' must be a number");
    if (v->number < -static_cast<double>(kMaxBound) || v->number > static_cast<double>(kMaxBound))
      fail(path, std::string("'") + key + "' beyond +-10^15 is not supported");
    return static_cast<std::int64_t>(v->number);
  }

  std::string integer_of(const JsonValue& s, const std::string& path) {
    // Integer bounds: a fractional bound rounds inward.
    std::optional<std::int64_t> lo, hi;
    auto ceil_of = [&](const char* key, std::int64_t add) -> std::optional<std::int64_t> {
      const JsonValue* v = s.find(key);
      if (!v) return std::nullopt;
      bound(s, key, path);
      const double d = v->number;
      auto c = static_cast<std::int64_t>(d);
      if (static_cast<double>(c) < d) ++c;
      else if (static_cast<double>(c) == d) c += add;
      return c;
    };
    auto floor_of = [&](const char* key, std::int64_t sub) -> std::optional<std::int64_t> {
      const JsonValue* v = s.find(key);
      if (!v) return std::nullopt;
      bound(s, key, path);
      const double d = v->number;
      auto f = static_cast<std::int64_t>(d);
      if (static_cast<double>(f) > d) --f;
      else if (static_cast<double>(f) == d) f -= sub;
      return f;
    };
    for (auto b : {ceil_of("minimum", 0), ceil_of("exclusiveMinimum", 1)})
      if (b) lo = lo ? std::max(*lo, *b) : *b;
    for (auto b : {floor_of("maximum", 0), floor_of("exclusiveMaximum", 1)})
      if (b) hi = hi ? std::min(*hi, *b) : *b;
    if (!lo && !hi) return prim("integer");
    if (lo && hi && *lo > *hi) fail(path, "the bounds admit no integer");
    std::vector<std::string> alts;
    if (!lo || *lo < 0) {  // negative: "-" and a magnitude
      const std::int64_t mlo = hi && *hi < 0 ? -*hi : 1;
      alts.push_back("\"-\" (" + uint_range(mlo, lo ? std::optional<std::int64_t>(-*lo) : std::nullopt) + ")");
    }
    if (!hi || *hi >= 0) alts.push_back(uint_range(lo ? std::max<std::int64_t>(*lo, 0) : 0, hi));
    std::string out = "(";
    for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ") " + prim("space");
  }

  std::string number_of(const JsonValue& s, const std::string& path) {
    for (const char* key : {"maximum", "exclusiveMinimum", "exclusiveMaximum"})
      if (s.find(key)) fail(path, std::string("'") + key + "' on a number is not supported (on an integer it is)");
    if (const JsonValue* m = s.find("minimum")) {
      if (!m->is(T::number) || m->number != 0)
        fail(path, "'minimum' on a number is supported only as 0 (other bounds: on an integer)");
      prim("space");
      return R"(([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? space)";
    }
    return prim("number");
  }

  std::string object_of(const JsonValue& s, const std::string& path, int depth) {
    std::vector<std::pair<std::string, const JsonValue*>> props;
    if (const JsonValue* p = s.find("properties")) {
      if (!p->is(T::object)) fail(path, "'properties' must be an object");
      for (const auto& [k, v] : p->members) props.push_back({k, &v});
    }
    std::set<std::string> required;
    if (const JsonValue* r = s.find("required")) {
      if (!r->is(T::array)) fail(path, "'required' must be an array of names");
      for (const auto& x : r->items) {
        if (!x.is(T::string)) fail(path, "'required' must be an array of names");
        required.insert(x.text);
      }
    }
    for (const auto& name : required)
      if (std::none_of(props.begin(), props.end(), [&](const auto& p) { return p.first == name; }))
        fail(path, "required property '" + name + "' is not in 'properties' (not supported)");
    // Other members: additionalProperties true or a schema; absent: only
    // where no property is declared (any object).
    std::string extra_value;
    if (const JsonValue* a = s.find("additionalProperties")) {
      if (a->is(T::boolean)) {
        if (a->boolean) extra_value = prim("value");
      } else {
        extra_value = visit(*a, path + "/additionalProperties", depth + 1);
      }
    } else if (props.empty()) {
      extra_value = prim("value");
    }
    prim("space");
    std::string extra_kv;
    if (!extra_value.empty()) extra_kv = "(" + key_except(props, path) + " space \":\" space " + extra_value + ")";

    // Declared properties in order. first(i): the members from i on, none
    // before; later(i): the same after a member (each preceded by ",").
    const std::size_t n = props.size();
    const std::string base = new_rule("obj");
    std::vector<std::string> first(n + 1), later(n + 1);
    later[n] = extra_kv.empty() ? "" : "(\",\" space " + extra_kv + ")*";
    first[n] = extra_kv.empty() ? "" : "(" + extra_kv + " " + later[n] + ")?";
    for (std::size_t i = n; i-- > 0;) {
      const std::string kv = literal(json_quote(props[i].first)) + " space \":\" space " +
                             visit(*props[i].second, path + "/properties/" + props[i].first, depth + 1);
      const std::string kv_rule = new_rule(base.substr(2) + "-" + props[i].first);
      define(kv_rule, kv);
      const std::string lr = new_rule(base.substr(2) + "-later");
      const std::string fr = new_rule(base.substr(2) + "-first");
      if (required.count(props[i].first)) {
        define(lr, "\",\" space " + kv_rule + " " + later[i + 1]);
        define(fr, kv_rule + " " + later[i + 1]);
      } else {
        define(lr, "(\",\" space " + kv_rule + ")? " + later[i + 1]);
        // Never a trailing empty alternative: GBNF reads a line ending in '|' on into the next.
        define(fr, first[i + 1].empty() ? "(" + kv_rule + " " + later[i + 1] + ")?"
                                        : kv_rule + " " + later[i + 1] + " | " + first[i + 1]);
      }
      later[i] = lr;
      first[i] = fr;
    }
    define(base, "\"{\" space " + first[0] + " \"}\" space");
    return base;
  }

  // A quoted member name other than the declared ones: a trie of the names,
  // leaving it at the first code point no name has there. No escapes, so a
  // name cannot be spelled another way.
  std::string key_except(const std::vector<std::pair<std::string, const JsonValue*>>& props, const std::string&) {
    prim("key-char");
    struct Node {
      std::map<std::uint32_t, int> next;
      bool end = false;
    };
    std::vector<Node> trie(1);
    for (const auto& p : props) {
      int at = 0;
      for (std::uint32_t cp : code_points(p.first)) {
        auto it = trie[at].next.find(cp);
        if (it == trie[at].next.end()) {
          trie.push_back({});
          it = trie[at].next.emplace(cp, static_cast<int>(trie.size() - 1)).first;
        }
        at = it->second;
      }
      trie[at].end = true;
    }
    std::vector<std::string> names(trie.size());
    for (auto& nm : names) nm = new_rule("key");
    for (std::size_t i = 0; i < trie.size(); ++i) {
      std::vector<std::string> alts;
      std::string excluded = "\"\\\\\\x7F\\x00-\\x1F";
      for (const auto& [cp, child] : trie[i].next) {
        alts.push_back(std::string("[").append(hex8(cp)).append("] ").append(names[static_cast<std::size_t>(child)]));
        excluded += hex8(cp);
      }
      alts.push_back("[^" + excluded + "] key-char* \"\\\"\"");
      if (!trie[i].end) alts.push_back("\"\\\"\"");
      std::string body;
      for (std::size_t k = 0; k < alts.size(); ++k) body += (k ? " | " : "") + alts[k];
      define(names[i], body);
    }
    return "\"\\\"\" " + names[0];
  }

  std::string array_of(const JsonValue& s, const std::string& path, int depth) {
    std::string item;
    bool no_items = false;
    if (const JsonValue* it = s.find("items")) {
      if (it->is(T::boolean) && !it->boolean) no_items = true;
      else if (it->is(T::array)) fail(path, "'items' as an array (tuples) is not supported");
      else item = visit(*it, path + "/items", depth + 1);
    } else {
      item = prim("value");
    }
    std::int64_t lo = count(s, "minItems", path).value_or(0);
    std::optional<std::int64_t> hi = count(s, "maxItems", path);
    if (hi && *hi < lo) fail(path, "'maxItems' is below 'minItems'");
    prim("space");
    if (no_items) {
      if (lo > 0) fail(path, "'items' false with 'minItems' above 0 admits no array");
      return "\"[\" space \"]\" space";
    }
    if (hi && *hi == 0) return "\"[\" space \"]\" space";
    const std::string r = new_rule("item");
    define(r, item);
    const std::string more = "(\",\" space " + r + "){" + std::to_string(std::max<std::int64_t>(lo - 1, 0)) + "," +
                             (hi ? std::to_string(*hi - 1) : "") + "}";
    std::string body = r + " " + more;
    if (lo == 0) body = "(" + body + ")?";
    return "\"[\" space " + body + " \"]\" space";
  }

  const JsonValue& root_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_;
  std::set<std::string> prims_;
  std::map<std::string, std::string> refs_;
};

}  // namespace

std::string json_schema_to_gbnf(std::string_view schema_json) {
  const JsonValue schema = parse_json(schema_json, "json schema");
  return Converter(schema).run();
}

Grammar json_schema_grammar(std::string_view schema_json) {
  const std::string gbnf = json_schema_to_gbnf(schema_json);
  return parse_gbnf(gbnf, "root");
}

}  // namespace latte::grammar
