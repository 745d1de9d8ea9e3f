#pragma once
// Filters, tests, methods and member access of the chat-template interpreter, each with the
// oracle's (@huggingface/jinja) semantics - including its JS-isms, e.g. str.lstrip('\n')
// ignores its argument and strips all leading whitespace, because the oracle's does.
#include <string>
#include <vector>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_value.h"

namespace pypto::jinja {

// `operand | name` or `operand | name(args)` (the Filter / FilterBlock node says which).
Value apply_filter(Interpreter& in, const Value& operand, const Node& filter, const EnvPtr& env);

// `operand is name`.
bool run_test(const std::string& name, const Value& operand);

// obj.prop / obj[prop] once both are evaluated (dict keys, list/string indices, methods).
Value get_member(const Value& obj, const Value& prop);

// Python-like slice of a list or string (strings by code point, as the oracle's Array.from).
Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step);

}  // namespace pypto::jinja
