// A small JSON reader for schemas: a document to a tree of values, with
// errors naming the line and column. Owns JSON syntax only (RFC 8259: no
// comments, no trailing commas); a self-written one keeps the runtime free
// of another dependency in the cross and Windows builds. Limits: nesting
// depth 256 (deeper is refused).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace latte::grammar {

struct JsonValue {
  enum class Type { null, boolean, number, string, array, object };
  Type type = Type::null;
  bool boolean = false;
  double number = 0;
  std::string text;  // string: its value (UTF-8); number: as written
  struct Member;
  std::vector<JsonValue> items;  // array
  std::vector<Member> members;   // object, in document order

  bool is(Type t) const { return type == t; }
  // The member named `key`, or nullptr (the first, if named twice).
  const JsonValue* find(std::string_view key) const;
  // Compact JSON text of this value (strings escaped as JSON requires).
  std::string dump() const;
};

// An object's member (a struct, not std::pair: a pair needs JsonValue complete).
struct JsonValue::Member {
  std::string first;  // the name
  JsonValue second;   // the value
};

// Error(invalid_argument) "<what>:LINE:COL: ..." for malformed JSON.
JsonValue parse_json(std::string_view text, const std::string& what = "json");

// s as a JSON string literal, quotes included.
std::string json_quote(std::string_view s);

}  // namespace latte::grammar
