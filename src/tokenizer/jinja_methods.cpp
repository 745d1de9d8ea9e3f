#include "tokenizer/jinja_methods.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "tokenizer/jinja_text.h"

namespace pypto::jinja {

// Argument lookups follow the oracle's `args[i] ?? kwargs.get(name) ?? fallback`, so a raw JS
// undefined (Hole) counts as absent.
const Value* kwarg(const Value& kwargs, const char* name) {
  const Value* v = kwargs.kind == Kind::Dict ? kwargs.dict->find(name) : nullptr;
  return v && !v->is_hole() ? v : nullptr;
}

const Value* positional(const std::vector<Value>& args, size_t i) {
  return i < args.size() && !args[i].is_hole() ? &args[i] : nullptr;
}

// First present of: positional i, keyword `name`, fallback.
Value arg_or(const std::vector<Value>& args, size_t i, const Value& kwargs, const char* name, Value fallback) {
  if (const Value* v = positional(args, i)) return *v;
  if (const Value* v = kwarg(kwargs, name)) return *v;
  return fallback;
}

bool is_numeric_like(const Value& v) { return v.kind == Kind::Int || v.kind == Kind::Float || v.kind == Kind::Bool; }
double numeric_value(const Value& v) { return v.kind == Kind::Bool ? (v.boolean ? 1 : 0) : v.number; }


// The oracle's compareRuntimeValues (sort, dictsort).
int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_null() && b.is_null()) return 0;
  if (a.is_null() || b.is_null()) fail("Cannot compare ", type_name(a), " with ", type_name(b));
  if (a.is_undefined() && b.is_undefined()) return 0;
  if (a.is_undefined() || b.is_undefined()) fail("Cannot compare ", type_name(a), " with ", type_name(b));
  if (is_numeric_like(a) && is_numeric_like(b)) {
    double x = numeric_value(a), y = numeric_value(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (std::string(type_name(a)) != type_name(b))
    fail("Cannot compare different types: ", type_name(a), " and ", type_name(b));
  if (a.is_string()) {
    std::u16string x = to_utf16(case_sensitive ? a.str : js_lower(a.str));
    std::u16string y = to_utf16(case_sensitive ? b.str : js_lower(b.str));
    return x < y ? -1 : x > y ? 1 : 0;
  }
  fail("Cannot compare type: ", type_name(a));
}

static Value pair_list(const std::string& k, const Value& v) { return Value::new_list({Value::string(k), v}); }


Value dict_items(const Value& d) {
  std::vector<Value> out;
  for (const auto& [k, v] : d.dict->entries) out.push_back(pair_list(k, v));
  return Value::new_list(std::move(out));
}
static Value dict_keys(const Value& d) {
  std::vector<Value> out;
  for (const auto& kv : d.dict->entries) out.push_back(Value::string(kv.first));
  return Value::new_list(std::move(out));
}
static Value dict_values(const Value& d) {
  std::vector<Value> out;
  for (const auto& kv : d.dict->entries) out.push_back(kv.second);
  return Value::new_list(std::move(out));
}

// Splits trailing keyword arguments off an argument list.
static Value pop_kwargs(std::vector<Value>& args) {
  if (!args.empty() && args.back().is_kwargs()) {
    Value kw = args.back();
    args.pop_back();
    return kw;
  }
  return Value::new_dict(true);
}

Value dict_method(const Value& d, const std::string& name, std::vector<Value>& args) {
  if (name == "get") {
    if (args.empty() || !args[0].is_string())
      fail("Object key must be a string: got ", args.empty() ? "undefined" : type_name(args[0]));
    if (const Value* v = d.dict->find(args[0].str)) return *v;
    return positional(args, 1) ? args[1] : Value::null();
  }
  if (name == "items") return dict_items(d);
  if (name == "keys") return dict_keys(d);
  if (name == "values") return dict_values(d);
  if (name == "dictsort") {
    std::vector<Value> positional = args;
    Value kwargs = pop_kwargs(positional);
    Value case_sensitive = arg_or(positional, 0, kwargs, "case_sensitive", Value::from_bool(false));
    if (case_sensitive.kind != Kind::Bool) fail("case_sensitive must be a boolean");
    Value by = arg_or(positional, 1, kwargs, "by", Value::string("key"));
    if (!by.is_string()) fail("by must be a string");
    if (by.str != "key" && by.str != "value") fail("by must be either 'key' or 'value'");
    Value reverse = arg_or(positional, 2, kwargs, "reverse", Value::from_bool(false));
    if (reverse.kind != Kind::Bool) fail("reverse must be a boolean");
    std::vector<Value> items = dict_items(d).list->items;
    const size_t idx = by.str == "key" ? 0 : 1;
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      int r = compare_values(x.list->items[idx], y.list->items[idx], case_sensitive.boolean);
      return (reverse.boolean ? -r : r) < 0;
    });
    return Value::new_list(std::move(items));
  }
  fail("unknown method '", name, "' of ObjectValue");
}

bool is_dict_method(const std::string& name) {
  return name == "get" || name == "items" || name == "keys" || name == "values" || name == "dictsort";
}


std::string title_case(const std::string& s) {
  // /\b\w/g with ASCII word characters: upper-case a word character that follows a non-word one.
  auto word = [](unsigned char c) { return std::isalnum(c) || c == '_'; };
  std::string out = s;
  for (size_t i = 0; i < out.size(); ++i) {
    auto c = static_cast<unsigned char>(out[i]);
    if (c < 0x80 && word(c) && (i == 0 || !word(static_cast<unsigned char>(out[i - 1])) ||
                                static_cast<unsigned char>(out[i - 1]) >= 0x80))
      out[i] = static_cast<char>(std::toupper(c));
  }
  return out;
}

std::string capitalize(const std::string& s) {
  // charAt(0).toUpperCase() + slice(1): works on UTF-16 units, so a leading surrogate pair is
  // split, left unchanged, and joined again.
  std::u16string u = to_utf16(s);
  if (u.empty()) return s;
  if (u[0] < 0xD800 || u[0] > 0xDFFF) {
    std::u16string first = to_utf16(js_upper(from_utf16(u.substr(0, 1))));
    u = first + u.substr(1);
  }
  return from_utf16(u);
}

static Value split_string(const std::string& s, std::vector<Value>& args) {
  Value sep = positional(args, 0) ? args[0] : Value::null();
  if (!sep.is_string() && !sep.is_null()) fail("sep argument must be a string or null");
  Value maxsplit = positional(args, 1) ? args[1] : Value::integer(-1);
  if (maxsplit.kind != Kind::Int) fail("maxsplit argument must be a number");
  const double max = maxsplit.number;
  std::vector<Value> out;
  if (sep.is_null()) {
    std::string text = js_trim_start(s);
    size_t i = 0;
    while (i < text.size()) {
      // Skip a whitespace run, then take the following non-whitespace run.
      size_t j = i;
      while (j < text.size()) {
        size_t k = j;
        if (!is_js_space(next_code_point(text, k))) break;
        j = k;
      }
      if (j >= text.size()) break;
      size_t e = j;
      while (e < text.size()) {
        size_t k = e;
        if (is_js_space(next_code_point(text, k))) break;
        e = k;
      }
      if (max != -1 && static_cast<double>(out.size()) >= max) {
        out.push_back(Value::string(text.substr(j)));
        break;
      }
      out.push_back(Value::string(text.substr(j, e - j)));
      i = e;
    }
  } else {
    if (sep.str.empty()) fail("empty separator");
    std::vector<std::string> parts;
    size_t start = 0;
    while (true) {
      size_t p = s.find(sep.str, start);
      if (p == std::string::npos) break;
      parts.push_back(s.substr(start, p - start));
      start = p + sep.str.size();
    }
    parts.push_back(s.substr(start));
    const double len = static_cast<double>(parts.size());
    if (max != -1 && len > max) {
      // Array.prototype.splice(max): keep the first `max` parts and join the rest with sep.
      double keep = max < 0 ? std::max(len + max, 0.0) : std::min(max, len);
      size_t k = static_cast<size_t>(keep);
      std::string rest;
      for (size_t i = k; i < parts.size(); ++i) rest += (i > k ? sep.str : "") + parts[i];
      parts.resize(k);
      parts.push_back(rest);
    }
    for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  }
  return Value::new_list(std::move(out));
}

static std::string replace_string(const std::string& s, const std::string& from, const std::string& to, double count) {
  if (count == 0) return s;
  double remaining = (std::isnan(count) || count < 0) ? std::numeric_limits<double>::infinity() : count;
  std::string out;
  if (from.empty()) {
    // Matches the empty string at every code point boundary, including both ends.
    size_t i = 0;
    while (true) {
      if (remaining > 0) {
        out += to;
        --remaining;
      }
      if (i >= s.size()) break;
      size_t j = i;
      next_code_point(s, j);
      out.append(s, i, j - i);
      i = j;
    }
    return out;
  }
  size_t start = 0;
  while (remaining > 0) {
    size_t p = s.find(from, start);
    if (p == std::string::npos) break;
    out.append(s, start, p - start);
    out += to;
    start = p + from.size();
    --remaining;
  }
  out.append(s, start, std::string::npos);
  return out;
}

static bool affix_match(const std::string& s, const Value& pattern, bool prefix, const char* name) {
  auto check = [&](const std::string& p) {
    if (p.size() > s.size()) return false;
    return prefix ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (pattern.is_string()) return check(pattern.str);
  if (pattern.kind == Kind::List) {
    for (const Value& item : pattern.list->items) {
      if (!item.is_string()) fail(name, "() tuple elements must be strings");
      if (check(item.str)) return true;
    }
    return false;
  }
  fail(name, "() argument must be a string or tuple of strings");
}

Value string_method(const std::string& s, const std::string& name, std::vector<Value>& args) {
  if (name == "upper") return Value::string(js_upper(s));
  if (name == "lower") return Value::string(js_lower(s));
  if (name == "strip") return Value::string(js_trim(s));
  if (name == "rstrip") return Value::string(js_trim_end(s));
  if (name == "lstrip") return Value::string(js_trim_start(s));
  if (name == "title") return Value::string(title_case(s));
  if (name == "capitalize") return Value::string(capitalize(s));
  if (name == "startswith" || name == "endswith") {
    if (args.empty()) fail(name, "() requires at least one argument");
    return Value::from_bool(affix_match(s, args[0], name == "startswith", name.c_str()));
  }
  if (name == "split") return split_string(s, args);
  if (name == "replace") {
    if (args.size() < 2) fail("replace() requires at least two arguments");
    if (!args[0].is_string() || !args[1].is_string()) fail("replace() arguments must be strings");
    Value count = Value::null();
    if (args.size() > 2) {
      if (args[2].is_kwargs()) {
        const Value* c = args[2].dict->find("count");
        count = c ? *c : Value::null();
      } else {
        count = args[2];
      }
    }
    if (count.kind != Kind::Int && !count.is_null()) fail("replace() count argument must be a number or null");
    double n = count.is_null() ? -1 : count.number;
    return Value::string(replace_string(s, args[0].str, args[1].str, n));
  }
  fail("unknown method '", name, "' of StringValue");
}

static bool is_string_method(const std::string& name) {
  static const char* const kNames[] = {"upper", "lower",      "strip",    "title", "capitalize", "rstrip",
                                       "lstrip", "startswith", "endswith", "split", "replace"};
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}

static Value bound_string_method(const std::string& s, const std::string& name) {
  return Value::function(name, [s, name](std::vector<Value>& args, const std::shared_ptr<Env>&) { return string_method(s, name, args); });
}

static Value bound_dict_method(const Value& d, const std::string& name) {
  return Value::function(name, [d, name](std::vector<Value>& args, const std::shared_ptr<Env>&) { return dict_method(d, name, args); });
}

static std::string utf16_char_at(const std::string& s, double index) {
  // JS String.prototype.at: one UTF-16 code unit, negative indices count from the end.
  std::u16string u = to_utf16(s);
  long long n = static_cast<long long>(u.size());
  long long i = static_cast<long long>(index);
  if (i < 0) i += n;
  if (i < 0 || i >= n) return std::string("\x01undefined");  // sentinel handled by caller
  return from_utf16(std::u16string_view(&u[static_cast<size_t>(i)], 1));
}


bool run_test(const std::string& name, const Value& v) {
  if (name == "boolean") return v.kind == Kind::Bool;
  if (name == "callable") return v.kind == Kind::Function;
  if (name == "odd" || name == "even") {
    if (v.kind != Kind::Int) fail("cannot ", name, " on ", type_name(v));
    const bool odd = std::fmod(v.number, 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "false") return v.kind == Kind::Bool && !v.boolean;
  if (name == "true") return v.kind == Kind::Bool && v.boolean;
  if (name == "none") return v.is_null();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind == Kind::Int;
  if (name == "iterable") return (v.kind == Kind::List && !v.list->is_tuple) || v.is_string();
  if (name == "mapping") return v.kind == Kind::Dict;
  if (name == "sequence") return v.kind == Kind::List || v.kind == Kind::Dict || v.is_string();
  if (name == "lower") return v.is_string() && v.str == js_lower(v.str);
  if (name == "upper") return v.is_string() && v.str == js_upper(v.str);
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  fail("Unknown test: ", name);
}

Value get_member(const Value& obj, const Value& prop) {
  no_hole(obj);
  no_hole(prop);
  if (obj.kind == Kind::Dict || obj.kind == Kind::Namespace) {
    if (!prop.is_string()) fail("Cannot access property with non-string: got ", type_name(prop));
    if (const Value* v = obj.dict->find(prop.str)) return unhole(*v);
    if (obj.kind == Kind::Dict && is_dict_method(prop.str)) return bound_dict_method(obj, prop.str);
    return Value::undefined();
  }
  if (obj.kind == Kind::List || obj.is_string()) {
    if (prop.kind == Kind::Int) {
      if (obj.is_string()) {
        std::string ch = utf16_char_at(obj.str, prop.number);
        if (ch == "\x01undefined") return Value::undefined();
        return Value::string(ch);
      }
      const auto& items = obj.list->items;
      long long n = static_cast<long long>(items.size());
      long long i = static_cast<long long>(prop.number);
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined();
      return unhole(items[static_cast<size_t>(i)]);
    }
    if (prop.is_string()) {
      if (prop.str == "length")
        return Value::integer(static_cast<double>(obj.is_string() ? utf16_length(obj.str) : obj.list->items.size()));
      if (obj.is_string() && is_string_method(prop.str)) return bound_string_method(obj.str, prop.str);
      return Value::undefined();
    }
    fail("Cannot access property with non-string/non-number: got ", type_name(prop));
  }
  if (!prop.is_string()) fail("Cannot access property with non-string: got ", type_name(prop));
  return Value::undefined();
}

Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.kind != Kind::List && !obj.is_string()) fail("Slice object must be an array or string");
  for (const Value* v : {&start, &stop, &step})
    if (v->kind != Kind::Int && !v->is_undefined())
      fail("Slice ", v == &start ? "start" : v == &stop ? "stop" : "step", " must be numeric or undefined");
  std::vector<char32_t> cps;
  if (obj.is_string()) cps = to_code_points(obj.str);
  const long long len = static_cast<long long>(obj.is_string() ? cps.size() : obj.list->items.size());
  const long long st = step.is_undefined() ? 1 : static_cast<long long>(step.number);
  const int dir = st > 0 ? 1 : st < 0 ? -1 : 0;
  long long b, e;
  if (dir >= 0) {
    b = start.is_undefined() ? 0 : static_cast<long long>(start.number);
    b = b < 0 ? std::max(len + b, 0LL) : std::min(b, len);
    e = stop.is_undefined() ? len : static_cast<long long>(stop.number);
    e = e < 0 ? std::max(len + e, 0LL) : std::min(e, len);
  } else {
    b = start.is_undefined() ? len - 1 : static_cast<long long>(start.number);
    b = b < 0 ? std::max(len + b, -1LL) : std::min(b, len - 1);
    e = stop.is_undefined() ? -1 : static_cast<long long>(stop.number);
    e = e < -1 ? std::max(len + e, -1LL) : std::min(e, len - 1);
  }
  if (obj.is_string()) {
    std::string out;
    if (dir != 0)
      for (long long i = b; dir * i < dir * e; i += st) append_utf8(out, cps[static_cast<size_t>(i)]);
    return Value::string(out);
  }
  std::vector<Value> out;
  if (dir != 0)
    for (long long i = b; dir * i < dir * e; i += st) out.push_back(obj.list->items[static_cast<size_t>(i)]);
  return Value::new_list(std::move(out));
}


}  // namespace pypto::jinja
