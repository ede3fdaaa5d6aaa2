// The nested JSON Schema the grammar benchmark constrains to (objects in
// objects, arrays of objects, arrays in those): the same text is given to
// llama.cpp (as the GBNF it converts to) for the comparison in
// docs/performance-log.md.
#pragma once

inline constexpr const char* kNestedSchema = R"({
  "type": "object",
  "properties": {
    "id": {"type": "integer", "minimum": 0},
    "name": {"type": "string", "maxLength": 24},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 4},
    "owner": {
      "type": "object",
      "properties": {
        "name": {"type": "string", "maxLength": 24},
        "email": {"type": ["string", "null"], "maxLength": 32},
        "roles": {"type": "array", "items": {"enum": ["admin", "dev", "ops"]}, "maxItems": 3}
      },
      "required": ["name", "roles"]
    },
    "items": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "sku": {"type": "string", "format": "uuid"},
          "qty": {"type": "integer", "minimum": 1, "maximum": 999},
          "price": {"type": "number"},
          "dims": {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3}
        },
        "required": ["sku", "qty"]
      },
      "maxItems": 3
    },
    "active": {"type": "boolean"}
  },
  "required": ["id", "name", "owner", "items"]
})";
