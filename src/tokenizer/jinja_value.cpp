#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "tokenizer/jinja_text.h"

namespace pypto::jinja {

const Value* DictData::find(const std::string& key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

int nesting_depth(const Value& v) {
  if (v.kind == Kind::List) return v.list->depth;
  if (v.kind == Kind::Dict || v.kind == Kind::Namespace) return v.dict->depth;
  return 0;
}

void check_depth(int depth) {
  if (depth > kMaxValueDepth) fail("values nested more than ", kMaxValueDepth, " levels deep");
}

void DictData::set(const std::string& key, Value v) {
  const int d = 1 + nesting_depth(v);
  check_depth(d);
  if (d > depth) depth = d;
  for (auto& [k, old] : entries) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  entries.emplace_back(key, std::move(v));
}

Value Value::null() {
  Value v;
  v.kind = Kind::Null;
  return v;
}
Value Value::from_bool(bool b) {
  Value v;
  v.kind = Kind::Bool;
  v.boolean = b;
  return v;
}
Value Value::integer(double n) {
  Value v;
  v.kind = Kind::Int;
  v.number = n;
  return v;
}
Value Value::floating(double n) {
  Value v;
  v.kind = Kind::Float;
  v.number = n;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind = Kind::String;
  v.str = canonical_wtf8(std::move(s));
  return v;
}
Value Value::new_list(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind = Kind::List;
  v.list = std::make_shared<ListData>();
  int depth = 1;
  for (const Value& x : items) depth = std::max(depth, 1 + nesting_depth(x));
  check_depth(depth);
  v.list->depth = depth;
  v.list->items = std::move(items);
  v.list->is_tuple = tuple;
  return v;
}
Value Value::new_dict(bool kwargs) {
  Value v;
  v.kind = Kind::Dict;
  v.dict = std::make_shared<DictData>();
  v.dict->is_kwargs = kwargs;
  return v;
}
Value Value::new_namespace() {
  Value v;
  v.kind = Kind::Namespace;
  v.dict = std::make_shared<DictData>();
  return v;
}
Value Value::function(std::string name, NativeFn f) {
  Value v;
  v.kind = Kind::Function;
  v.fn = std::make_shared<FunctionData>(FunctionData{std::move(name), std::move(f)});
  return v;
}

Value Value::hole() {
  Value v;
  v.kind = Kind::Hole;
  return v;
}

const Value& no_hole(const Value& v) {
  if (v.kind == Kind::Hole) fail("Cannot read properties of undefined (the result of first/last on an empty list)");
  return v;
}

const char* type_name(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "UndefinedValue";
    case Kind::Null: return "NullValue";
    case Kind::Bool: return "BooleanValue";
    case Kind::Int: return "IntegerValue";
    case Kind::Float: return "FloatValue";
    case Kind::String: return "StringValue";
    case Kind::List: return v.list->is_tuple ? "TupleValue" : "ArrayValue";
    case Kind::Dict: return v.dict->is_kwargs ? "KeywordArgumentsValue" : "ObjectValue";
    case Kind::Namespace: return "NamespaceValue";
    case Kind::Function: return "FunctionValue";
    case Kind::Hole: return "undefined";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::Null: return false;
    case Kind::Hole: no_hole(v); return false;
    case Kind::Bool: return v.boolean;
    case Kind::Int:
    case Kind::Float: return v.number != 0 && !std::isnan(v.number);
    case Kind::String: return !v.str.empty();
    case Kind::List: return !v.list->items.empty();
    case Kind::Dict: return !v.dict->entries.empty();
    case Kind::Namespace:
    case Kind::Function: return true;
  }
  return false;
}

// FloatValue.toString: integral values keep one decimal ("3.0"), like Python's float repr.
static std::string float_display(double x) {
  if (x == 0 && std::signbit(x)) return "-0.0";
  if (std::isfinite(x) && std::fmod(x, 1.0) == 0) {
    if (std::fabs(x) >= 1e21) return js_number_to_string(x);  // toFixed falls back to toString
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.1f", x);
    return buf;
  }
  return js_number_to_string(x);
}

std::string to_display(const Value& v) {
  switch (v.kind) {
    // The oracle's NullValue holds JS undefined (it is constructed without a value), so it
    // prints like undefined wherever it is printed at all (e.g. inside "a" ~ [none]).
    case Kind::Undefined:
    case Kind::Null: return "undefined";
    case Kind::Bool: return v.boolean ? "true" : "false";
    case Kind::Int: return js_number_to_string(v.number);
    case Kind::Float: return float_display(v.number);
    case Kind::String: return v.str;
    case Kind::List:
    case Kind::Dict:
    case Kind::Namespace: return to_json(v, {}, 0, false);
    case Kind::Function: fail("cannot convert function '", v.fn->name, "' to a string");
    case Kind::Hole: no_hole(v);
  }
  return {};
}

std::string to_concat_string(const Value& v) {
  switch (v.kind) {
    case Kind::Float: return js_number_to_string(v.number);
    case Kind::List: {
      // Array.prototype.toString joins the elements' own toString() with ",".
      std::string out;
      for (size_t i = 0; i < v.list->items.size(); ++i) {
        if (i) out += ',';
        if (!v.list->items[i].is_hole()) out += to_display(v.list->items[i]);  // join: undefined -> ""
      }
      return out;
    }
    case Kind::Dict:
    case Kind::Namespace: return "[object Map]";
    default: return to_display(v);
  }
}

std::string to_json(const Value& v, const JsonOptions& opt, int depth, bool undefined_as_null) {
  std::string item_sep = ", ", key_sep = ": ";
  const bool indented = opt.indent > 0;
  if (opt.has_separators) {
    item_sep = opt.item_sep;
    key_sep = opt.key_sep;
  } else if (indented) {
    item_sep = ",";
  }
  switch (v.kind) {
    case Kind::Null: return "null";
    case Kind::Undefined: return undefined_as_null ? "null" : "undefined";
    case Kind::Bool: return v.boolean ? "true" : "false";
    case Kind::Int:
    case Kind::Float: return std::isfinite(v.number) ? js_number_to_string(v.number) : "null";
    case Kind::String: {
      std::string s;
      append_json_string(s, v.str);
      return opt.ensure_ascii ? make_ascii_safe(s) : s;
    }
    case Kind::List:
    case Kind::Dict:
    case Kind::Namespace: {
      if (v.is_tuple() || v.is_kwargs()) fail("Cannot convert to JSON: ", type_name(v));
      // A namespace can contain itself; the oracle then overflows its stack, we stop earlier.
      if (depth > kMaxValueDepth) fail("cannot convert to JSON: value nested too deeply (or cyclic)");
      const std::string unit = indented ? std::string(static_cast<size_t>(opt.indent), ' ') : "";
      std::string base_pad = "\n";
      for (int i = 0; i < depth; ++i) base_pad += unit;
      const std::string child_pad = base_pad + unit;
      std::vector<std::string> core;
      if (v.kind == Kind::List) {
        for (const Value& x : v.list->items) core.push_back(to_json(x, opt, depth + 1, undefined_as_null));
      } else {
        for (const auto& [k, x] : v.dict->entries) {
          std::string key;
          append_json_string(key, k);
          if (opt.ensure_ascii) key = make_ascii_safe(key);
          std::string e = (indented ? child_pad : "") + key + key_sep + to_json(x, opt, depth + 1, undefined_as_null);
          core.push_back(std::move(e));
        }
      }
      const bool is_list = v.kind == Kind::List;
      std::string out(1, is_list ? '[' : '{');
      if (indented && !core.empty()) {
        for (size_t i = 0; i < core.size(); ++i) {
          if (i) out += item_sep;
          if (is_list) out += child_pad;
          out += core[i];
        }
        out += base_pad;
      } else {
        for (size_t i = 0; i < core.size(); ++i) {
          if (i) out += item_sep;
          out += core[i];
        }
      }
      out += is_list ? ']' : '}';
      return out;
    }
    case Kind::Function: fail("Cannot convert to JSON: FunctionValue");
    case Kind::Hole: no_hole(v);
  }
  return {};
}

static bool is_object(const Value& v) {
  return v.kind == Kind::List || v.kind == Kind::Dict || v.kind == Kind::Namespace || v.kind == Kind::Function;
}

static bool same_object(const Value& a, const Value& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::List: return a.list == b.list;
    case Kind::Dict:
    case Kind::Namespace: return a.dict == b.dict;
    case Kind::Function: return a.fn == b.fn;
    default: return false;
  }
}

bool loose_equals(const Value& a, const Value& b) {
  no_hole(a);
  no_hole(b);
  const bool a_nullish = a.kind == Kind::Undefined || a.kind == Kind::Null;
  const bool b_nullish = b.kind == Kind::Undefined || b.kind == Kind::Null;
  if (a_nullish || b_nullish) return a_nullish && b_nullish;
  if (is_object(a) && is_object(b)) return same_object(a, b);
  if (a.kind == Kind::Bool) return loose_equals(Value::integer(a.boolean ? 1 : 0), b);
  if (b.kind == Kind::Bool) return loose_equals(a, Value::integer(b.boolean ? 1 : 0));
  if (a.is_number() && b.is_number()) return a.number == b.number;
  if (a.is_string() && b.is_string()) return a.str == b.str;
  if (a.is_number() && b.is_string()) return a.number == js_string_to_number(b.str);
  if (a.is_string() && b.is_number()) return js_string_to_number(a.str) == b.number;
  // One object, one primitive: the object becomes its string form first.
  if (a.kind == Kind::Function || b.kind == Kind::Function) return false;
  if (is_object(a)) return loose_equals(Value::string(to_concat_string(a)), b);
  return loose_equals(a, Value::string(to_concat_string(b)));
}

bool strict_equals(const Value& a, const Value& b) {
  no_hole(a);
  no_hole(b);
  if (a.is_number() && b.is_number()) return a.number == b.number;
  // none and undefined both hold JS undefined in the oracle, so they are === to each other.
  const bool a_nullish = a.kind == Kind::Undefined || a.kind == Kind::Null;
  const bool b_nullish = b.kind == Kind::Undefined || b.kind == Kind::Null;
  if (a_nullish || b_nullish) return a_nullish && b_nullish;
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::Null: return true;
    case Kind::Bool: return a.boolean == b.boolean;
    case Kind::String: return a.str == b.str;
    default: return same_object(a, b);
  }
}

}  // namespace pypto::jinja
