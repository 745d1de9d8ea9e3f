#pragma once
// Methods, tests, member access and slicing of the chat-template interpreter, plus the argument
// and comparison helpers the filters share. Semantics are the oracle's (@huggingface/jinja),
// including its JS-isms: str.lstrip('\n') ignores its argument and strips all leading
// whitespace, string lengths and indices count UTF-16 code units, and so on.
#include <string>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace pypto::jinja {

// obj.prop / obj[prop] once both are evaluated (dict keys, list/string indices, methods).
Value get_member(const Value& obj, const Value& prop);

// Python-like slice of a list or string (strings by code point, as the oracle's Array.from).
Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step);

// `operand is name`.
bool run_test(const std::string& name, const Value& operand);

// str.name(args) and dict.name(args); args may end with a kwargs dict.
Value string_method(const std::string& s, const std::string& name, std::vector<Value>& args);
Value dict_method(const Value& d, const std::string& name, std::vector<Value>& args);
bool is_dict_method(const std::string& name);
Value dict_items(const Value& d);  // [[key, value], ...]
std::string title_case(const std::string& s);
std::string capitalize(const std::string& s);

// The oracle's compareRuntimeValues (sort, dictsort): numbers with numbers, strings with
// strings (case-insensitive unless asked), anything else is an error.
int compare_values(const Value& a, const Value& b, bool case_sensitive);

// Argument lookups as the oracle's `args[i] ?? kwargs.get(name) ?? fallback`: a raw JS
// undefined (Hole) counts as absent.
const Value* kwarg(const Value& kwargs, const char* name);
const Value* positional(const std::vector<Value>& args, size_t i);
Value arg_or(const std::vector<Value>& args, size_t i, const Value& kwargs, const char* name, Value fallback);

}  // namespace pypto::jinja
