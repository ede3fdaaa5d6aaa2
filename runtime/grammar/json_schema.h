// JSON Schema to GBNF: the grammar of the JSON texts a schema accepts (a
// subset of them where the full set is not a grammar: numbers and strings
// with bounded digits, declared properties in their declared order). Owns
// which keywords are honoured; a keyword that would constrain but cannot be
// expressed is refused by name, never ignored.
//
// Honoured: type (one or a list), properties, required, additionalProperties
// (false, true or a schema; absent: no other properties are generated, unless
// the object declares no properties at all: then any members), enum, const,
// items, minItems, maxItems, anyOf, oneOf, $ref to "#/..." ($defs,
// definitions, recursion allowed), minLength, maxLength, format (date, time,
// date-time, uuid), integer minimum/maximum/exclusiveMinimum/exclusiveMaximum
// (|bound| <= 10^15), number minimum 0. Annotations are ignored (title,
// description, $schema, $id, $comment, default, examples, deprecated,
// readOnly, writeOnly). {"type":"object"} is any JSON object (OpenAI's
// json_object); {} or true any JSON value.
//
// Errors: Error(invalid_argument) "json schema: at #/path: ..." (or the JSON
// reader's "json schema:LINE:COL: ...").
#pragma once

#include <string>
#include <string_view>

#include "runtime/grammar/grammar.h"

namespace latte::grammar {

// The GBNF text (root rule "root").
std::string json_schema_to_gbnf(std::string_view schema_json);
// The same, compiled.
Grammar json_schema_grammar(std::string_view schema_json);

}  // namespace latte::grammar
