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
