#pragma once
// Runtime values of the chat-template interpreter.
//
// The kinds and their behaviour (truthiness, printing, JSON, equality) follow the runtime of
// @huggingface/jinja, our oracle, not Python's Jinja2: output must be byte-identical to it.
// Containers are shared (shared_ptr) because the oracle's are JS objects: identity matters for
// `==`, and namespaces are mutated in place through every reference.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace pypto::jinja {

// Hole is the raw JS `undefined` that the oracle's `first`/`last` filters return for an empty
// list (not an UndefinedValue): storing it is fine and it reads back as undefined, but almost
// any other use of it is a TypeError there, hence an error here.
enum class Kind { Undefined, Null, Bool, Int, Float, String, List, Dict, Namespace, Function, Hole };

struct Value;
struct Env;

// Containers record how deeply they nest (1 = no containers inside), so that a template
// cannot build values so deep that printing or freeing them overflows the stack.
constexpr int kMaxValueDepth = 256;

struct ListData {
  std::vector<Value> items;
  bool is_tuple = false;  // the oracle's TupleValue: not `iterable`, not JSON-serialisable
  int depth = 1;
};

// Insertion-ordered mapping (JS Map). Also the storage of namespaces and keyword arguments.
struct DictData {
  std::vector<std::pair<std::string, Value>> entries;
  bool is_kwargs = false;  // the oracle's KeywordArgumentsValue (passed as a call's last arg)
  int depth = 1;

  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);  // replaces in place or appends; checks depth
};

// A callable: built-in, macro, or bound method. args may end with a kwargs dict.
using NativeFn = std::function<Value(std::vector<Value>& args, const std::shared_ptr<Env>& env)>;
struct FunctionData {
  std::string name;
  NativeFn fn;
};

struct Value {
  Kind kind = Kind::Undefined;
  bool boolean = false;
  double number = 0;  // Int and Float: JS numbers are doubles
  std::string str;
  std::shared_ptr<ListData> list;
  std::shared_ptr<DictData> dict;  // Dict and Namespace
  std::shared_ptr<FunctionData> fn;

  static Value undefined() { return {}; }
  static Value null();
  static Value from_bool(bool b);
  static Value integer(double n);
  static Value floating(double n);
  static Value string(std::string s);
  static Value new_list(std::vector<Value> items = {}, bool tuple = false);
  static Value new_dict(bool kwargs = false);
  static Value new_namespace();
  static Value function(std::string name, NativeFn f);
  static Value hole();

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_hole() const { return kind == Kind::Hole; }
  bool is_null() const { return kind == Kind::Null; }
  bool is_string() const { return kind == Kind::String; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }  // ObjectValue, including kwargs
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float; }
  bool is_kwargs() const { return kind == Kind::Dict && dict->is_kwargs; }
  bool is_tuple() const { return kind == Kind::List && list->is_tuple; }
};

// Nesting depth of a value (0 for scalars); fails beyond kMaxValueDepth.
int nesting_depth(const Value& v);
void check_depth(int depth);

// Fails for a Hole (the oracle would read a property of JS undefined there); returns v.
const Value& no_hole(const Value& v);
// A Hole read back from a variable or container: undefined.
inline Value unhole(Value v) { return v.kind == Kind::Hole ? Value() : v; }

// The oracle's type names, used in error messages ("StringValue", "ArrayValue", ...).
const char* type_name(const Value& v);

// __bool__: empty containers, "", 0, NaN, none and undefined are false; namespaces are true.
bool truthy(const Value& v);

// RuntimeValue.toString(): what {{ v }} prints (floats as "3.0", containers as JSON).
std::string to_display(const Value& v);
// JS `value.toString()` on the raw value: what `+` and `~` concatenate (floats as "3",
// lists as comma-joined displays, dicts as "[object Map]").
std::string to_concat_string(const Value& v);

struct JsonOptions {
  long indent = -1;  // < 1: no indentation
  bool ensure_ascii = false;
  bool has_separators = false;
  std::string item_sep, key_sep;
};
// The oracle's toJSON: Python json.dumps-like layout, keys in insertion order.
// undefined_as_null=false is the `string` filter / printing variant ("undefined").
std::string to_json(const Value& v, const JsonOptions& opt = {}, int depth = 0, bool undefined_as_null = true);

// JS `==` on the raw values (loose equality; containers compare by identity).
bool loose_equals(const Value& a, const Value& b);
// JS `===` on the raw values (used by `in` on lists).
bool strict_equals(const Value& a, const Value& b);

}  // namespace pypto::jinja
