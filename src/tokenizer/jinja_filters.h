#pragma once
// Filters of the chat-template interpreter (`x | f` and `x | f(args)`), each with the oracle's
// (@huggingface/jinja) semantics: it dispatches on the operand's type and on whether the filter
// is called with arguments, and so do we.
#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_value.h"

namespace pypto::jinja {

// `operand | name` or `operand | name(args)` (the Filter / FilterBlock node says which).
Value apply_filter(Interpreter& in, const Value& operand, const Node& filter, const EnvPtr& env);

}  // namespace pypto::jinja
