#pragma once
// JSON Schema (the subset documented in docs/api.md) to a grammar over the JSON text.
//
// Output shape: objects list their properties in the schema's key order as the request JSON was
// read (nlohmann::json: alphabetical), required ones always, optional ones when the model wants
// them; whitespace between tokens is free but bounded (kMaxWhitespace bytes per gap) so an
// unending run of spaces cannot happen. Every keyword outside the subset, and every schema that
// cannot be satisfied, is an Error naming the keyword and its JSON pointer: a request is never
// served with a constraint silently weaker than asked.
#include <string>

#include <nlohmann/json.hpp>

#include "structured/grammar.h"

namespace pypto::structured {

inline constexpr int kMaxWhitespace = 40;

// Limits on a schema (docs/api.md, "Input limits"); past one the schema is an Error naming it.
// The compiler walks a schema recursively, and the grammar it builds grows with these sizes, so
// each bounds the stack, the time and the memory one request can spend; each is far above what a
// generated schema (Pydantic, zod, OpenAI's strict mode) contains.
// Schemas nested inside each other: properties, items, prefixItems, additionalProperties,
// anyOf/oneOf/allOf branches and each $ref followed to a schema not yet being compiled.
inline constexpr int kMaxSchemaDepth = 64;
// Entries of one anyOf / oneOf.
inline constexpr int kMaxSchemaBranches = 256;
// Values of one enum.
inline constexpr int kMaxEnumValues = 4096;
// Bytes of one const or enum value written as JSON.
inline constexpr int kMaxEnumValueBytes = 16384;
// Properties of one object schema (an object's optional properties make its grammar grow with
// the square of their number).
inline constexpr int kMaxProperties = 1024;
// Entries of one prefixItems (each nests the array's grammar one level deeper; 256 of them stay
// well within CompiledGrammar::kMaxGrammarNesting).
inline constexpr int kMaxPrefixItems = 256;
// minLength, maxLength, minItems, maxItems.
inline constexpr int64_t kMaxLengthKeyword = 100'000;
// Magnitude of minimum / maximum / exclusiveMinimum / exclusiveMaximum.
inline constexpr double kMaxNumberBound = 9e18;

// Adds what `schema` needs to `g` (rules for $ref targets) and returns the expression for one
// JSON value valid under it. `schema` is its own root document for "#/..." references; `where`
// names it in errors (e.g. "response_format.json_schema.schema").
ExprPtr add_json_schema(Grammar& g, const nlohmann::json& schema, const std::string& where);

// Any JSON value / any JSON object (response_format json_object), any nesting depth.
ExprPtr add_any_json_value(Grammar& g);
ExprPtr add_any_json_object(Grammar& g);

// Bounded JSON whitespace (between tokens).
ExprPtr json_whitespace();

// A whole grammar: optional leading whitespace, then the value.
Grammar json_schema_grammar(const nlohmann::json& schema, const std::string& where);
Grammar json_object_grammar();

}  // namespace pypto::structured
