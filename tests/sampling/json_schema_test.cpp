// JSON Schema to grammar: what each supported keyword admits and refuses
// (checked on texts through the matcher), and every keyword that would
// constrain but is not supported refused by name.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "runtime/error.h"
#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/json_value.h"
#include "runtime/grammar/parse_automaton.h"

namespace latte::grammar {
namespace {

struct Schema {
  std::shared_ptr<const Grammar> g;
  explicit Schema(const std::string& json) : g(std::make_shared<const Grammar>(json_schema_grammar(json))) {}
  bool admits(const std::string& text) const {
    ParseAutomaton a(g);
    ParseAutomaton::State s = a.initial();
    for (unsigned char b : text) {
      s = a.next(s, b);
      if (s == ParseAutomaton::kDead) return false;
    }
    return a.can_end(s);
  }
};

std::string refusal(const std::string& json) {
  try {
    json_schema_grammar(json);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    return e.what();
  }
  return "(accepted)";
}

TEST(JsonSchema, UnsupportedKeywordsAreRefusedByName) {
  EXPECT_EQ(refusal(R"({"type":"string","pattern":"^a+$"})"), "json schema: at #: 'pattern' is not supported");
  EXPECT_EQ(refusal(R"({"type":"object","properties":{"n":{"type":"integer","multipleOf":3}}})"),
            "json schema: at #/properties/n: 'multipleOf' is not supported");
  EXPECT_EQ(refusal(R"({"type":"array","uniqueItems":true})"), "json schema: at #: 'uniqueItems' is not supported");
  for (const char* kw : {"allOf", "not", "if", "prefixItems", "patternProperties", "propertyNames", "minProperties",
                         "maxProperties", "contains", "dependentRequired"})
    EXPECT_EQ(refusal(std::string(R"({"type":"object",")") + kw + R"(":[]})"),
              std::string("json schema: at #: '") + kw + "' is not supported");
  EXPECT_EQ(refusal(R"({"type":"string","format":"email"})"),
            "json schema: at #: format 'email' is not supported (date, time, date-time, uuid are)");
  EXPECT_EQ(refusal(R"({"type":"number","maximum":3})"),
            "json schema: at #: 'maximum' on a number is not supported (on an integer it is)");
  EXPECT_EQ(refusal(R"({"type":"number","minimum":1.5})"),
            "json schema: at #: 'minimum' on a number is supported only as 0 (other bounds: on an integer)");
  EXPECT_EQ(refusal(R"({"$ref":"#/$defs/a","type":"integer","$defs":{"a":{}}})"),
            "json schema: at #: 'type' beside '$ref' is not supported");
  EXPECT_EQ(refusal(R"({"$ref":"#/$defs/missing"})"), "json schema: at #: '$ref' '#/$defs/missing' names nothing in the schema");
  EXPECT_EQ(refusal(R"({"$ref":"https://example.com/s.json"})"),
            "json schema: at #: '$ref' to 'https://example.com/s.json': only references inside the schema (\"#/...\") are supported");
  EXPECT_EQ(refusal(R"({"type":"integer","minimum":5,"maximum":4})"), "json schema: at #: the bounds admit no integer");
  EXPECT_EQ(refusal(R"({"type":"uuid"})"), "json schema: at #: unknown type 'uuid'");
  EXPECT_EQ(refusal("false"), "json schema: at #: the schema false admits no value");
  EXPECT_EQ(refusal("{\"type\": \"object\",\n  \"properties\": {\"a\": }}"), "json schema:2:23: expected a value, found '}'");
  EXPECT_EQ(refusal(R"({"type":"object","required":["a"]})"),
            "json schema: at #: required property 'a' is not in 'properties' (not supported)");
}

TEST(JsonSchema, AnnotationsAreIgnored) {
  const Schema s(R"({"$schema":"https://json-schema.org/draft/2020-12/schema","title":"t","description":"d",
                   "$comment":"c","default":1,"examples":[1],"type":"integer"})");
  EXPECT_TRUE(s.admits("42"));
  EXPECT_FALSE(s.admits("\"42\""));
}

TEST(JsonSchema, IntegerBounds) {
  struct Case {
    const char* schema;
    long long lo, hi;
  };
  const Case cases[] = {
      {R"({"type":"integer","minimum":0})", 0, 1LL << 50},
      {R"({"type":"integer","minimum":5,"maximum":123})", 5, 123},
      {R"({"type":"integer","minimum":10000,"maximum":99999})", 10000, 99999},
      {R"({"type":"integer","minimum":-50,"maximum":-3})", -50, -3},
      {R"({"type":"integer","minimum":-7,"maximum":1005})", -7, 1005},
      {R"({"type":"integer","exclusiveMinimum":-5,"exclusiveMaximum":12})", -4, 11},
      {R"({"type":"integer","maximum":20})", -(1LL << 50), 20},
      {R"({"type":"integer","minimum":1.5,"maximum":9.5})", 2, 9},
  };
  for (const Case& c : cases) {
    const Schema s(c.schema);
    for (long long v = -1200; v <= 1200; ++v)
      EXPECT_EQ(s.admits(std::to_string(v)), v >= c.lo && v <= c.hi) << c.schema << " " << v;
    for (long long v : {99999LL, 100000LL, 123456789LL, -123456789LL})
      EXPECT_EQ(s.admits(std::to_string(v)), v >= c.lo && v <= c.hi) << c.schema << " " << v;
    EXPECT_FALSE(s.admits("007"));
    EXPECT_FALSE(s.admits("1.5"));
  }
}

TEST(JsonSchema, Objects) {
  const Schema s(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},
                   "required":["b"],"additionalProperties":false})");
  EXPECT_TRUE(s.admits(R"({"b":"x"})"));
  EXPECT_TRUE(s.admits(R"({"a":1,"b":"x","c":true})"));
  EXPECT_TRUE(s.admits("{ \"a\": 1,\n  \"b\": \"x\" }"));
  EXPECT_TRUE(s.admits(R"({"b":"x","c":false})"));
  EXPECT_FALSE(s.admits(R"({"a":1})"));            // b is required
  EXPECT_FALSE(s.admits(R"({"b":"x","d":1})"));    // no other members
  EXPECT_FALSE(s.admits(R"({"b":1})"));
  EXPECT_FALSE(s.admits(R"({"b":"x",})"));
  // Other members after the declared ones, with names other than theirs.
  const Schema open(R"({"type":"object","properties":{"id":{"type":"integer"}},"additionalProperties":{"type":"null"}})");
  EXPECT_TRUE(open.admits(R"({"id":1,"x":null,"idx":null})"));
  EXPECT_TRUE(open.admits(R"({"x":null})"));
  EXPECT_FALSE(open.admits(R"({"id":1,"id":null})"));  // a declared name is not an other member
  EXPECT_FALSE(open.admits(R"({"id":1,"x":2})"));
  EXPECT_FALSE(open.admits(R"({"i\u0064":null})"));   // no escapes in other members' names
}

TEST(JsonSchema, AnyObjectAndAnyValue) {
  const Schema obj(R"({"type":"object"})");
  EXPECT_TRUE(obj.admits(R"({})"));
  EXPECT_TRUE(obj.admits(R"({"a":[1,2.5e3,{"b":null}],"c":"\u00e9\n","d":true})"));
  EXPECT_FALSE(obj.admits(R"([1])"));
  EXPECT_FALSE(obj.admits(R"({"a":01})"));
  const Schema any("{}");
  EXPECT_TRUE(any.admits("[1, \"x\", null]"));
  EXPECT_TRUE(any.admits("-0.5"));
  EXPECT_FALSE(any.admits("[1,]"));
}

TEST(JsonSchema, ArraysStringsEnumsFormats) {
  const Schema arr(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})");
  EXPECT_FALSE(arr.admits("[1]"));
  EXPECT_TRUE(arr.admits("[1,2]"));
  EXPECT_TRUE(arr.admits("[1, 2, 3]"));
  EXPECT_FALSE(arr.admits("[1,2,3,4]"));
  const Schema str(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_FALSE(str.admits("\"a\""));
  EXPECT_TRUE(str.admits("\"ab\""));
  EXPECT_TRUE(str.admits("\"a\\né\""));  // an escape and a multi-byte character count one each
  EXPECT_FALSE(str.admits("\"abcd\""));
  const Schema en(R"({"enum":["red", 3, null, {"k":[1]}]})");
  EXPECT_TRUE(en.admits("\"red\""));
  EXPECT_TRUE(en.admits("3"));
  EXPECT_TRUE(en.admits("null"));
  EXPECT_TRUE(en.admits(R"({"k":[1]})"));
  EXPECT_FALSE(en.admits("\"blue\""));
  const Schema cst(R"({"const":"a\"b"})");
  EXPECT_TRUE(cst.admits(R"("a\"b")"));
  EXPECT_FALSE(cst.admits(R"("ab")"));
  const Schema types(R"({"type":["integer","null"]})");
  EXPECT_TRUE(types.admits("7"));
  EXPECT_TRUE(types.admits("null"));
  EXPECT_FALSE(types.admits("\"7\""));
  const Schema date(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(date.admits("\"2026-11-29\""));
  EXPECT_FALSE(date.admits("\"2026-13-01\""));
  const Schema dt(R"({"type":"string","format":"date-time"})");
  EXPECT_TRUE(dt.admits("\"2026-11-29T10:44:02Z\""));
  EXPECT_TRUE(dt.admits("\"2026-11-29T10:44:02.123+01:00\""));
  EXPECT_FALSE(dt.admits("\"2026-11-29 10:44:02Z\""));
  const Schema uuid(R"({"type":"string","format":"uuid"})");
  EXPECT_TRUE(uuid.admits("\"123e4567-e89b-12d3-a456-426614174000\""));
  EXPECT_FALSE(uuid.admits("\"123e4567e89b12d3a456426614174000\""));
  const Schema nonneg(R"({"type":"number","minimum":0})");
  EXPECT_TRUE(nonneg.admits("0.25"));
  EXPECT_FALSE(nonneg.admits("-0.25"));
  // Counts past int64's range are refused by name, not cast (the grammar
  // fuzzer found maxItems 1.1e22 converted: undefined behaviour).
  EXPECT_EQ(refusal(R"({"type":"array","maxItems":11111111111111111111113})"),
            "json schema: at #: 'maxItems' above 10000 is not supported");
  EXPECT_EQ(refusal(R"({"type":"string","minLength":1e300})"),
            "json schema: at #: 'minLength' above 10000 is not supported");
  EXPECT_EQ(refusal(R"({"type":"array","minItems":1.5})"), "json schema: at #: 'minItems' must be a non-negative integer");
}

TEST(JsonSchema, RefsAndAlternatives) {
  const Schema tree(R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{
      "v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}}})");
  EXPECT_TRUE(tree.admits(R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4}]}]})"));
  EXPECT_FALSE(tree.admits(R"({"v":1,"kids":[{"kids":[]}]})"));
  const Schema defs(R"({"definitions":{"n":{"type":"null"}},"anyOf":[{"$ref":"#/definitions/n"},{"type":"boolean"}]})");
  EXPECT_TRUE(defs.admits("null"));
  EXPECT_TRUE(defs.admits("true"));
  EXPECT_FALSE(defs.admits("1"));
  const Schema one(R"({"oneOf":[{"type":"string","maxLength":1},{"type":"integer","minimum":0,"maximum":9}]})");
  EXPECT_TRUE(one.admits("\"x\""));
  EXPECT_TRUE(one.admits("5"));
  EXPECT_FALSE(one.admits("10"));
}

TEST(JsonValue, ReadsAndWritesJson) {
  const JsonValue v = parse_json(R"( {"a": [1, -2.5e3, true, null], "b\u00e9": "x\ny\ud83d\ude00"} )");
  ASSERT_TRUE(v.is(JsonValue::Type::object));
  EXPECT_EQ(v.dump(), "{\"a\":[1,-2.5e3,true,null],\"bé\":\"x\\ny😀\"}");
  EXPECT_THROW(parse_json("[1,]"), Error);
  EXPECT_THROW(parse_json("{\"a\":1} x"), Error);
  EXPECT_THROW(parse_json(std::string(300, '[') + std::string(300, ']')), Error);  // deeper than 256
}

}  // namespace
}  // namespace latte::grammar
