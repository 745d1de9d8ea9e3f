#include "tokenizer/jinja_filters.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "tokenizer/jinja_methods.h"
#include "tokenizer/jinja_text.h"

namespace pypto::jinja {
namespace {

// JS truthiness of a raw value (`!!x.value`): containers are objects, hence always true.
bool raw_truthy(const Value& v) {
  switch (v.kind) {
    case Kind::List:
    case Kind::Dict:
    case Kind::Namespace:
    case Kind::Function: return true;
    default: return truthy(v);
  }
}

// How Array.prototype.join prints a raw element: null/undefined become "".
std::string join_piece(const Value& v) {
  no_hole(v);
  if (v.kind == Kind::Undefined || v.kind == Kind::Null) return "";
  if (v.kind == Kind::Function) fail("cannot join a function");
  return to_concat_string(v);
}



std::string indent_lines(const std::string& s, const std::string& pad, bool first, bool blank) {
  std::string out;
  size_t start = 0;
  for (size_t i = 0;; ++i) {
    size_t nl = s.find('\n', start);
    std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (i > 0) out += '\n';
    if ((!first && i == 0) || (!blank && line.empty()))
      out += line;
    else
      out += pad + line;
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

// The oracle's getAttributeValue: "a.b.0" through dicts, namespaces and list indices.
Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v.kind == Kind::Dict || v.kind == Kind::Namespace) {
      const Value* f = v.dict->find(part);
      v = f ? *f : Value::undefined();
    } else if (v.kind == Kind::List) {
      double idx = js_parse_int(part);
      if (!std::isnan(idx) && idx >= 0 && idx < static_cast<double>(v.list->items.size()))
        v = v.list->items[static_cast<size_t>(idx)];
      else
        return Value::undefined();
    } else {
      return Value::undefined();
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return v;
}

Value sort_list(const Value& list, bool reverse, bool case_sensitive, const Value& attribute) {
  // Array.prototype.sort moves undefined elements to the end without comparing them.
  std::vector<Value> items, holes;
  for (const Value& v : list.list->items) (v.is_hole() ? holes : items).push_back(v);
  auto key = [&](const Value& v) {
    if (attribute.is_null()) return v;
    return attribute_path(v, attribute.kind == Kind::Int ? js_number_to_string(attribute.number) : attribute.str);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    int r = compare_values(key(a), key(b), case_sensitive);
    return (reverse ? -r : r) < 0;
  });
  items.insert(items.end(), holes.begin(), holes.end());
  return Value::new_list(std::move(items));
}

Value to_json_filter(const Value& operand, const Value& kwargs) {
  JsonOptions opt;
  if (const Value* indent = kwarg(kwargs, "indent")) {
    if (indent->kind == Kind::Int) {
      if (indent->number < 0 && indent->number != 0) fail("Invalid count value: ", js_number_to_string(indent->number));
      opt.indent = static_cast<long>(indent->number);
    } else if (!indent->is_null()) {
      fail("If set, indent must be a number");
    }
  }
  if (const Value* ea = kwarg(kwargs, "ensure_ascii")) {
    if (ea->kind != Kind::Bool) fail("If set, ensure_ascii must be a boolean");
    opt.ensure_ascii = ea->boolean;
  }
  if (const Value* sk = kwarg(kwargs, "sort_keys")) {
    if (sk->kind != Kind::Bool) fail("If set, sort_keys must be a boolean");
    if (sk->boolean) fail("tojson(sort_keys=true) is not supported");
  }
  if (const Value* sep = kwarg(kwargs, "separators")) {
    if (sep->kind == Kind::List) {
      const auto& items = sep->list->items;
      if (items.size() != 2 || !items[0].is_string() || !items[1].is_string())
        fail("separators must be a tuple of two strings");
      opt.has_separators = true;
      opt.item_sep = items[0].str;
      opt.key_sep = items[1].str;
    } else if (!sep->is_null()) {
      fail("If set, separators must be a tuple of two strings");
    }
  }
  return Value::string(to_json(operand, opt));
}

[[noreturn]] void cannot_apply(const std::string& name, const Value& operand) {
  fail("Cannot apply filter \"", name, "\" to type: ", type_name(operand));
}

Value plain_filter(const std::string& name, const Value& operand) {
  if (name == "safe") return operand;
  no_hole(operand);
  if (name == "tojson") return Value::string(to_json(operand));
  switch (operand.kind) {
    case Kind::List: {
      const auto& items = operand.list->items;
      if (name == "list") return operand;
      if (name == "first" || name == "last") {
        if (items.empty()) return Value::hole();  // operand.value[0] of an empty JS array
        return name == "first" ? items.front() : items.back();
      }
      if (name == "length") return Value::integer(static_cast<double>(items.size()));
      if (name == "reverse") return Value::new_list(std::vector<Value>(items.rbegin(), items.rend()));
      if (name == "sort") return sort_list(operand, false, false, Value::null());
      if (name == "join") {
        std::string out;
        for (const Value& v : items) out += join_piece(v);
        return Value::string(out);
      }
      if (name == "string") return Value::string(to_json(operand, {}, 0, false));
      if (name == "unique") {
        std::vector<Value> out;
        for (const Value& v : items) {
          no_hole(v);
          bool seen = false;
          for (const Value& o : out) {
            const bool both_nan = v.is_number() && o.is_number() && std::isnan(v.number) && std::isnan(o.number);
            if (both_nan || strict_equals(v, o)) {
              seen = true;
              break;
            }
          }
          if (!seen) out.push_back(v);
        }
        return Value::new_list(std::move(out));
      }
      fail("Unknown ArrayValue filter: ", name);
    }
    case Kind::String: {
      const std::string& s = operand.str;
      if (name == "length") return Value::integer(static_cast<double>(utf16_length(s)));
      if (name == "upper") return Value::string(js_upper(s));
      if (name == "lower") return Value::string(js_lower(s));
      if (name == "title") return Value::string(title_case(s));
      if (name == "capitalize") return Value::string(capitalize(s));
      if (name == "trim") return Value::string(js_trim(s));
      if (name == "indent") return Value::string(indent_lines(s, "    ", false, false));
      if (name == "join" || name == "string") return operand;
      if (name == "int") {
        double v = js_parse_int(s);
        return Value::integer(std::isnan(v) ? 0 : v);
      }
      if (name == "float") {
        double v = js_parse_float(s);
        return Value::floating(std::isnan(v) ? 0 : v);
      }
      fail("Unknown StringValue filter: ", name);
    }
    case Kind::Int:
    case Kind::Float: {
      if (name == "abs") return operand.kind == Kind::Int ? Value::integer(std::fabs(operand.number))
                                                          : Value::floating(std::fabs(operand.number));
      if (name == "int") return Value::integer(std::floor(operand.number));
      if (name == "float") return Value::floating(operand.number);
      if (name == "string") return Value::string(to_display(operand));
      fail("Unknown NumericValue filter: ", name);
    }
    case Kind::Dict: {
      if (name == "items") return dict_items(operand);
      if (name == "length") return Value::integer(static_cast<double>(operand.dict->entries.size()));
      if (is_dict_method(name)) {
        std::vector<Value> none;
        return dict_method(operand, name, none);
      }
      fail("Unknown ObjectValue filter: ", name);
    }
    case Kind::Bool: {
      if (name == "bool") return operand;
      if (name == "int") return Value::integer(operand.boolean ? 1 : 0);
      if (name == "float") return Value::floating(operand.boolean ? 1 : 0);
      if (name == "string") return Value::string(operand.boolean ? "true" : "false");
      fail("Unknown BooleanValue filter: ", name);
    }
    default: cannot_apply(name, operand);
  }
}

Value call_filter(Interpreter& in, const std::string& name, const Value& operand, const Node& node, const EnvPtr& env) {
  if (name == "selectattr" || name == "rejectattr") {
    // Arguments must be string literals; they are evaluated without the kwargs machinery.
    if (operand.kind == Kind::List) {
      for (const Value& item : operand.list->items)
        if (item.kind != Kind::Dict && item.kind != Kind::Namespace)
          fail("`", name, "` can only be applied to array of objects");
      for (const auto& a : node.args)
        if (a->kind != NodeKind::StringLiteral) fail("arguments of `", name, "` must be strings");
      if (node.args.empty()) fail("`", name, "` needs an attribute name");
      const std::string attr = node.args[0]->str;
      const bool select = name == "selectattr";
      std::vector<Value> out;
      for (const Value& item : operand.list->items) {
        const Value* a = item.dict->find(attr);
        bool result = false;
        if (a) {
          if (node.args.size() < 2) {
            result = truthy(*a);
          } else {
            const std::string& test = node.args[1]->str;
            if (test == "equalto" || test == "eq") {
              if (node.args.size() < 3) fail("test '", test, "' needs a value");
              result = strict_equals(*a, Value::string(node.args[2]->str));
            } else {
              result = run_test(test, *a);
            }
          }
        }
        if (result == select) out.push_back(item);
      }
      return Value::new_list(std::move(out));
    }
  }
  auto [args, kwargs] = in.eval_args(node.args, env);
  if (name == "default" && operand.is_hole()) {
    Value boolean = arg_or(args, 1, kwargs, "boolean", Value::from_bool(false));
    if (boolean.kind == Kind::Bool && !boolean.boolean) return operand;
  }
  no_hole(operand);
  if (name == "tojson") return to_json_filter(operand, kwargs);
  if (name == "join") {
    std::vector<std::string> pieces;
    if (operand.is_string()) {
      for (char32_t cp : to_code_points(operand.str)) {
        std::string p;
        append_utf8(p, cp);
        pieces.push_back(std::move(p));
      }
    } else if (operand.kind == Kind::List) {
      for (const Value& v : operand.list->items) pieces.push_back(join_piece(v));
    } else {
      cannot_apply(name, operand);
    }
    Value sep = arg_or(args, 0, kwargs, "separator", Value::string(""));
    if (!sep.is_string()) fail("separator must be a string");
    std::string out;
    for (size_t i = 0; i < pieces.size(); ++i) out += (i ? sep.str : "") + pieces[i];
    return Value::string(out);
  }
  if (name == "int" || name == "float") {
    const bool is_int = name == "int";
    Value fallback = arg_or(args, 0, kwargs, "default", is_int ? Value::integer(0) : Value::floating(0));
    if (operand.is_string()) {
      double v = is_int ? js_parse_int(operand.str) : js_parse_float(operand.str);
      if (std::isnan(v)) return fallback;
      return is_int ? Value::integer(v) : Value::floating(v);
    }
    if (operand.is_number()) return operand;
    if (operand.kind == Kind::Bool)
      return is_int ? Value::integer(operand.boolean ? 1 : 0) : Value::floating(operand.boolean ? 1 : 0);
    cannot_apply(name, operand);
  }
  if (name == "default") {
    Value fallback = positional(args, 0) ? args[0] : Value::string("");
    Value boolean = arg_or(args, 1, kwargs, "boolean", Value::from_bool(false));
    if (boolean.kind != Kind::Bool) fail("`default` filter flag must be a boolean");
    if (operand.is_undefined() || (boolean.boolean && !truthy(operand))) return fallback;
    return operand;
  }
  if (operand.kind == Kind::List) {
    if (name == "sort") {
      Value reverse = arg_or(args, 0, kwargs, "reverse", Value::from_bool(false));
      if (reverse.kind != Kind::Bool) fail("reverse must be a boolean");
      Value cs = arg_or(args, 1, kwargs, "case_sensitive", Value::from_bool(false));
      if (cs.kind != Kind::Bool) fail("case_sensitive must be a boolean");
      Value attribute = arg_or(args, 2, kwargs, "attribute", Value::null());
      if (!attribute.is_string() && attribute.kind != Kind::Int && !attribute.is_null())
        fail("attribute must be a string, integer, or null");
      return sort_list(operand, reverse.boolean, cs.boolean, attribute);
    }
    if (name == "map") {
      const Value* attr = kwarg(kwargs, "attribute");
      if (!attr) fail("`map` expressions without `attribute` set are not currently supported.");
      if (!attr->is_string()) fail("attribute must be a string");
      const Value* fallback = kwarg(kwargs, "default");
      std::vector<Value> out;
      for (const Value& item : operand.list->items) {
        if (item.kind != Kind::Dict && item.kind != Kind::Namespace) fail("items in map must be an object");
        Value v = attribute_path(item, attr->str);
        out.push_back(v.is_undefined() && fallback ? *fallback : v);
      }
      return Value::new_list(std::move(out));
    }
    fail("Unknown ArrayValue filter: ", name);
  }
  if (operand.is_string()) {
    if (name == "indent") {
      Value width = arg_or(args, 0, kwargs, "width", Value::integer(4));
      if (width.kind != Kind::Int) fail("width must be a number");
      Value first = arg_or(args, 1, kwargs, "first", Value::from_bool(false));
      Value blank = arg_or(args, 2, kwargs, "blank", Value::from_bool(false));
      if (width.number < 0) fail("Invalid count value: ", js_number_to_string(width.number));
      return Value::string(indent_lines(operand.str, std::string(static_cast<size_t>(width.number), ' '),
                                        raw_truthy(first), raw_truthy(blank)));
    }
    if (name == "replace") {
      std::vector<Value> call_args = args;
      call_args.push_back(kwargs);
      return string_method(operand.str, "replace", call_args);
    }
    fail("Unknown StringValue filter: ", name);
  }
  if (operand.kind == Kind::Dict && is_dict_method(name)) {
    if (!kwargs.dict->entries.empty()) args.push_back(kwargs);
    return dict_method(operand, name, args);
  }
  if (operand.kind == Kind::Dict) fail("Unknown ObjectValue filter: ", name);
  cannot_apply(name, operand);
}


}  // namespace

Value apply_filter(Interpreter& in, const Value& operand, const Node& filter, const EnvPtr& env) {
  if (!filter.flag) return plain_filter(filter.str, operand);
  return call_filter(in, filter.str, operand, filter, env);
}

}  // namespace pypto::jinja
