#include "structured/json_schema.h"

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <map>
#include <set>

#include "core/error.h"
#include "structured/length_limit.h"
#include "structured/number_range.h"
#include "structured/regex.h"
#include "structured/schema_disjoint.h"

namespace pypto::structured {

using nlohmann::json;

ExprPtr json_whitespace() {
  ByteSet ws;
  ws.add(' ');
  ws.add('\n');
  ws.add('\t');
  return repeat(bytes(ws), 0, kMaxWhitespace);
}

namespace {

ExprPtr digits(int min, int max) { return repeat(byte_range('0', '9'), min, max); }

struct Compiler {
  Grammar& g;
  const json& root;
  std::string where;
  std::map<std::string, int32_t> ref_rules;  // JSON pointer -> rule
  int depth = 0;  // schemas being compiled, one inside the other (kMaxSchemaDepth)

  // A pointer as long as the deepest allowed schema's is shortened in the middle: a message
  // stays readable and small whatever the input.
  static std::string short_path(const std::string& path) {
    constexpr size_t kKeep = 200;
    if (path.size() <= 2 * kKeep) return path;
    auto boundary = [&](size_t i) {  // not inside a UTF-8 character
      while (i > 0 && (uint8_t(path[i]) & 0xC0) == 0x80) --i;
      return i;
    };
    const size_t head = boundary(kKeep), tail = boundary(path.size() - kKeep);
    return path.substr(0, head) + "/.../" + path.substr(tail);
  }

  [[noreturn]] void bad(const std::string& path, const std::string& what) const {
    fail(where, short_path(path), ": ", what);
  }

  // Counts one schema nested in the current one for the scope of a value() call.
  struct Nested {
    Compiler& c;
    Nested(Compiler& c, const std::string& path) : c(c) {
      if (++c.depth > kMaxSchemaDepth)
        c.bad(path, str_cat("nesting depth ", c.depth, " exceeds the limit of ", kMaxSchemaDepth,
                            " (kMaxSchemaDepth): schemas inside properties, items, anyOf/oneOf/allOf and $ref chains"));
    }
    ~Nested() { --c.depth; }
  };

  ExprPtr ws() { return json_whitespace(); }

  // Keywords that only describe (never constrain): accepted and not enforced by design.
  static bool is_annotation(const std::string& k) {
    static const std::set<std::string> a = {"title", "description", "default", "examples", "$schema", "$id",
                                            "$comment", "deprecated", "readOnly", "writeOnly", "$defs",
                                            "definitions"};
    return a.count(k) > 0;
  }

  ExprPtr value(const json& s, const std::string& path) {
    const Nested nested(*this, path);
    if (s.is_boolean()) {
      if (s.get<bool>()) return add_any_json_value(g);
      bad(path, "the schema 'false' matches nothing");
    }
    if (!s.is_object()) bad(path, "a schema must be an object or a boolean, got " + std::string(s.type_name()));
    static const std::set<std::string> known = {
        "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems",
        "maxItems", "enum", "const", "anyOf", "oneOf", "$ref", "minLength", "maxLength", "pattern",
        "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "allOf"};
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!known.count(it.key()) && !is_annotation(it.key()))
        bad(path, "unsupported JSON Schema keyword '" + it.key() + "'");
    std::vector<std::string> constraining;
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!is_annotation(it.key())) constraining.push_back(it.key());
    auto alone = [&](const char* kw) {
      for (const std::string& k : constraining)
        if (k != kw) bad(path, std::string("'") + kw + "' together with '" + k + "' is not supported");
    };

    if (s.contains("allOf")) {
      // Only the one-entry form generators write around a $ref ({"allOf": [{"$ref": ...}]}):
      // an intersection of several schemas is not supported.
      alone("allOf");
      const json& list = s["allOf"];
      if (!list.is_array() || list.size() != 1)
        bad(path + "/allOf", "'allOf' is supported only with exactly one schema");
      return value(list[0], path + "/allOf/0");
    }
    if (s.contains("$ref")) {
      alone("$ref");
      return reference(s["$ref"], path + "/$ref");
    }
    for (const char* kw : {"const", "enum"}) {
      if (!s.contains(kw)) continue;
      // A sibling 'type' only filters the values (it is common: {"type":"string","enum":[...]}).
      for (const std::string& k : constraining)
        if (k != kw && k != "type") bad(path, std::string("'") + kw + "' together with '" + k + "' is not supported");
      std::vector<json> values;
      if (std::string(kw) == "const") values.push_back(s["const"]);
      else if (!s["enum"].is_array() || s["enum"].empty()) bad(path + "/enum", "'enum' must be a non-empty array");
      else if (s["enum"].size() > size_t(kMaxEnumValues))
        bad(path + "/enum", str_cat("'enum' has ", s["enum"].size(), " values, more than the limit of ", kMaxEnumValues,
                                    " (kMaxEnumValues)"));
      else values.assign(s["enum"].begin(), s["enum"].end());
      std::vector<ExprPtr> alts;
      for (size_t i = 0; i < values.size(); ++i) {
        const json& v = values[i];
        if (s.contains("type") && !has_type(s["type"], v, path)) continue;
        const std::string text = v.dump();
        if (text.size() > size_t(kMaxEnumValueBytes))
          bad(path + "/" + kw + (std::string(kw) == "enum" ? "/" + std::to_string(i) : ""),
              str_cat("the value is ", text.size(), " bytes as JSON, more than the limit of ", kMaxEnumValueBytes,
                      " (kMaxEnumValueBytes)"));
        g.add_text(text.size(), where + short_path(path));
        alts.push_back(literal(text));
      }
      if (alts.empty()) bad(path, std::string("no '") + kw + "' value has the schema's 'type'");
      return alt(std::move(alts));
    }
    for (const char* kw : {"anyOf", "oneOf"}) {
      if (!s.contains(kw)) continue;
      alone(kw);
      const json& list = s[kw];
      if (!list.is_array() || list.empty()) bad(path + "/" + kw, std::string("'") + kw + "' must be a non-empty array");
      if (list.size() > size_t(kMaxSchemaBranches))
        bad(path + "/" + kw, str_cat("'", kw, "' has ", list.size(), " entries, more than the limit of ",
                                     kMaxSchemaBranches, " (kMaxSchemaBranches)"));
      std::vector<ExprPtr> alts;
      for (size_t i = 0; i < list.size(); ++i) alts.push_back(value(list[i], path + "/" + kw + "/" + std::to_string(i)));
      // oneOf is anyOf once no value can match two branches; where that cannot be shown, the
      // grammar could write a value that fails "exactly one", so the schema is refused.
      int64_t budget = kMaxDisjointSteps;
      if (std::string(kw) == "oneOf")
        for (size_t i = 0; i < list.size(); ++i)
          for (size_t j = i + 1; j < list.size(); ++j)
            if (!provably_disjoint(list[i], list[j], root, budget)) {
              if (budget <= 0)
                bad(path + "/oneOf", str_cat("telling the branches apart takes more than ", kMaxDisjointSteps,
                                             " comparison steps (kMaxDisjointSteps); use 'anyOf' or fewer branches"));
              bad(path + "/oneOf", "branches " + std::to_string(i) + " and " + std::to_string(j) +
                                       " may both match one value, and 'oneOf' needs exactly one; supported are "
                                       "branches told apart by type, const/enum, numeric or length ranges, or a "
                                       "required property with such values (use 'anyOf' if both may match)");
            }
      return alt(std::move(alts));
    }

    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array() && !t.empty()) {
        for (const json& x : t) {
          if (!x.is_string()) bad(path + "/type", "'type' entries must be strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        bad(path + "/type", "'type' must be a string or a non-empty array of strings");
      }
    } else {
      // No type: the keywords present say which; none at all means any value.
      auto has = [&](std::initializer_list<const char*> ks) {
        for (const char* k : ks) if (s.contains(k)) return true;
        return false;
      };
      if (has({"properties", "required", "additionalProperties"})) types.push_back("object");
      if (has({"items", "prefixItems", "minItems", "maxItems"})) types.push_back("array");
      if (has({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
      if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) types.push_back("number");
      if (types.empty()) return add_any_json_value(g);
    }
    std::vector<ExprPtr> alts;
    for (const std::string& t : types) {
      if (t == "null") alts.push_back(literal("null"));
      else if (t == "boolean") alts.push_back(alt({literal("true"), literal("false")}));
      else if (t == "integer") alts.push_back(integer(s, path));
      else if (t == "number") alts.push_back(number(s, path));
      else if (t == "string") alts.push_back(string(s, path));
      else if (t == "array") alts.push_back(array(s, path));
      else if (t == "object") alts.push_back(object(s, path));
      else bad(path + "/type", "unknown type '" + t + "' (allowed: null, boolean, integer, number, string, array, object)");
    }
    return alt(std::move(alts));
  }

  bool has_type(const json& type, const json& v, const std::string& path) const {
    auto one = [&](const json& t) {
      if (!t.is_string()) bad(path + "/type", "'type' entries must be strings");
      const std::string n = t.get<std::string>();
      if (n == "null") return v.is_null();
      if (n == "boolean") return v.is_boolean();
      if (n == "integer") return v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
      if (n == "number") return v.is_number();
      if (n == "string") return v.is_string();
      if (n == "array") return v.is_array();
      if (n == "object") return v.is_object();
      bad(path + "/type", "unknown type '" + n + "' (allowed: null, boolean, integer, number, string, array, object)");
    };
    if (type.is_array()) {
      for (const json& t : type)
        if (one(t)) return true;
      return false;
    }
    return one(type);
  }

  ExprPtr reference(const json& r, const std::string& path) {
    if (!r.is_string()) bad(path, "'$ref' must be a string");
    const std::string ptr = r.get<std::string>();
    if (ptr.empty() || ptr[0] != '#') bad(path, "only local references ('#' or '#/...') are supported, got '" + ptr + "'");
    auto it = ref_rules.find(ptr);
    if (it != ref_rules.end()) return ref(it->second);
    const json* target = &root;
    if (ptr.size() > 1) {
      try {
        target = &root.at(json::json_pointer(ptr.substr(1)));
      } catch (const std::exception&) {
        bad(path, "'$ref' target '" + ptr + "' does not exist");
      }
    }
    const int32_t rule = g.add_rule(where + ptr);
    ref_rules[ptr] = rule;
    g.rules[size_t(rule)].body = value(*target, ptr.substr(1));
    return ref(rule);
  }

  // An integer type's bound (a fractional bound rounds inwards).
  static std::optional<int64_t> int_bound(const json& s, const char* kw, const std::string& path, const Compiler& c) {
    if (!s.contains(kw)) return std::nullopt;
    const json& v = s[kw];
    if (!v.is_number()) c.bad(path + "/" + kw, std::string("'") + kw + "' must be a number");
    const double d = v.get<double>();
    if (d > kMaxNumberBound || d < -kMaxNumberBound)
      c.bad(path + "/" + kw, str_cat("'", kw, "' = ", v.dump(), " is beyond the limit of +-", kMaxNumberBound, " (kMaxNumberBound)"));
    if (v.is_number_integer()) return v.get<int64_t>();
    return std::string(kw) == "minimum" || std::string(kw) == "exclusiveMinimum" ? int64_t(std::ceil(d))
                                                                                  : int64_t(std::floor(d));
  }

  // [lo, hi] after exclusive bounds; nullopt = unbounded on that side.
  std::pair<std::optional<int64_t>, std::optional<int64_t>> bounds(const json& s, const std::string& path) {
    auto lo = int_bound(s, "minimum", path, *this);
    auto hi = int_bound(s, "maximum", path, *this);
    if (auto x = int_bound(s, "exclusiveMinimum", path, *this)) {
      const double d = s["exclusiveMinimum"].get<double>();
      const int64_t v = d == double(*x) ? *x + 1 : *x;
      lo = lo ? std::max(*lo, v) : v;
    }
    if (auto x = int_bound(s, "exclusiveMaximum", path, *this)) {
      const double d = s["exclusiveMaximum"].get<double>();
      const int64_t v = d == double(*x) ? *x - 1 : *x;
      hi = hi ? std::min(*hi, v) : v;
    }
    if (lo && hi && *lo > *hi) bad(path, "the bounds leave no value (minimum " + std::to_string(*lo) + " > maximum " + std::to_string(*hi) + ")");
    return {lo, hi};
  }

  // Integers in [lo, hi] as JSON ("-0" is not written).
  ExprPtr int_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
    std::vector<ExprPtr> alts;
    // Non-negative part.
    if (!hi || *hi >= 0) alts.push_back(nonneg_range(lo ? std::max<int64_t>(*lo, 0) : 0, hi ? *hi : -1));
    // Negative part: magnitudes in [max(1, -hi), -lo].
    if (!lo || *lo < 0) {
      const int64_t mlo = hi && *hi < 0 ? -*hi : 1;
      alts.push_back(seq({literal("-"), nonneg_range(mlo, lo ? -*lo : -1)}));
    }
    return alt(std::move(alts));
  }

  ExprPtr integer(const json& s, const std::string& path) {
    auto [lo, hi] = bounds(s, path);
    return int_range(lo, hi);
  }

  ExprPtr fraction() { return seq({literal("."), digits(1, 16)}); }

  // The tighter of `kw` and its exclusive form, as an exact decimal (see number_range.h).
  std::optional<DecimalBound> decimal_bound(const json& s, const char* kw, const char* xkw, bool lower,
                                            const std::string& path) const {
    std::optional<DecimalBound> b;
    for (const char* k : {kw, xkw}) {
      if (!s.contains(k)) continue;
      const json& v = s[k];
      if (!v.is_number()) bad(path + "/" + k, std::string("'") + k + "' must be a number");
      const double d = v.get<double>();
      if (!(std::abs(d) <= kMaxNumberBound))
        bad(path + "/" + k, str_cat("'", k, "' = ", v.dump(), " is beyond the limit of +-", kMaxNumberBound, " (kMaxNumberBound)"));
      DecimalBound c{decimal_of(d), k == xkw};
      if (v.is_number_integer()) {  // exact, whatever a double would round it to
        const int64_t x = v.is_number_unsigned() ? int64_t(v.get<uint64_t>()) : v.get<int64_t>();
        c.value = Decimal{x < 0, x < 0 ? -x : x, ""};
      }
      if (!b) {
        b = c;
        continue;
      }
      const int cmp = compare(c.value, b->value);
      if ((lower ? cmp > 0 : cmp < 0) || (cmp == 0 && c.exclusive)) b = c;
    }
    return b;
  }

  ExprPtr number(const json& s, const std::string& path) {
    const auto lo = decimal_bound(s, "minimum", "exclusiveMinimum", true, path);
    const auto hi = decimal_bound(s, "maximum", "exclusiveMaximum", false, path);
    if (!lo && !hi) {
      ByteSet e, sign;
      e.add('e');
      e.add('E');
      sign.add('+');
      sign.add('-');
      return seq({int_range(std::nullopt, std::nullopt), optional(fraction()),
                  optional(seq({bytes(e), optional(bytes(sign)), digits(1, 2)}))});
    }
    if (lo && hi) {
      const int cmp = compare(lo->value, hi->value);
      if (cmp > 0 || (cmp == 0 && (lo->exclusive || hi->exclusive)))
        bad(path, "the bounds leave no value (" + std::string(lo->exclusive ? "exclusiveMinimum " : "minimum ") +
                      to_string(lo->value) + ", " + (hi->exclusive ? "exclusiveMaximum " : "maximum ") +
                      to_string(hi->value) + ")");
    }
    // Bounded numbers are written without an exponent, so the digits can be compared exactly.
    return decimal_range(lo, hi);
  }

  static int count(const json& s, const char* kw, const std::string& path, const Compiler& c) {
    if (!s.contains(kw)) return -1;
    const json& v = s[kw];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      c.bad(path + "/" + kw, std::string("'") + kw + "' must be a non-negative integer");
    if (v.get<int64_t>() > kMaxLengthKeyword)
      c.bad(path + "/" + kw, str_cat("'", kw, "' = ", v.get<int64_t>(), " exceeds the limit of ", kMaxLengthKeyword,
                                     " (kMaxLengthKeyword)"));
    return int(v.get<int64_t>());
  }

  ExprPtr string(const json& s, const std::string& path) {
    const int min_len = count(s, "minLength", path, *this), max_len = count(s, "maxLength", path, *this);
    if (min_len >= 0 && max_len >= 0 && min_len > max_len) bad(path, "minLength > maxLength");
    const bool lengths = min_len >= 0 || max_len >= 0;
    ExprPtr body;
    if (s.contains("pattern") || s.contains("format")) {
      if (s.contains("pattern") && s.contains("format")) bad(path, "'pattern' together with 'format' is not supported");
      if (s.contains("pattern")) {
        if (!s["pattern"].is_string()) bad(path + "/pattern", "'pattern' must be a string");
        g.add_text(s["pattern"].get_ref<const std::string&>().size(), where + short_path(path + "/pattern"));
        try {
          body = compile_regex(s["pattern"].get<std::string>(), RegexMode::Search, true);
        } catch (const Error& e) {
          bad(path + "/pattern", e.what());
        }
      } else {
        body = format(s["format"], path + "/format");
      }
      if (lengths) {
        try {
          body = limit_length(body, std::max(min_len, 0), max_len);
        } catch (const Error& e) {
          bad(path, e.what());
        }
      }
    } else {
      body = repeat(json_string_chars({{0, 0x10FFFF}}), std::max(min_len, 0), max_len);
    }
    return seq({literal("\""), body, literal("\"")});
  }

  ExprPtr format(const json& f, const std::string& path) {
    if (!f.is_string()) bad(path, "'format' must be a string");
    const std::string name = f.get<std::string>();
    static const char* kDate =
        "[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))";
    static const char* kTime = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
    std::string re;
    if (name == "date") re = kDate;
    else if (name == "time") re = kTime;
    else if (name == "date-time") re = std::string(kDate) + "T" + kTime;
    else if (name == "uuid") re = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
    else if (name == "email")
      // Dot-separated atoms @ two to four DNS labels: inside both ajv-formats' fast and full
      // email patterns (RFC 5321 without quoted local parts or IP literals).
      re = "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]{1,20}(\\.[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]{1,20}){0,2}@"
           "([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\\.){1,3}[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?";
    else bad(path, "unsupported format '" + name + "' (supported: date, time, date-time, uuid, email)");
    return compile_regex(re, RegexMode::FullMatch, true);
  }

  ExprPtr sep() { return seq({ws(), literal(","), ws()}); }

  ExprPtr array(const json& s, const std::string& path) {
    const int min_n = std::max(count(s, "minItems", path, *this), 0);
    const int max_n = count(s, "maxItems", path, *this);
    if (max_n >= 0 && min_n > max_n) bad(path, "minItems > maxItems");
    std::vector<ExprPtr> prefix;
    if (s.contains("prefixItems")) {
      const json& p = s["prefixItems"];
      if (!p.is_array()) bad(path + "/prefixItems", "'prefixItems' must be an array of schemas");
      if (p.size() > size_t(kMaxPrefixItems))
        bad(path + "/prefixItems", str_cat("'prefixItems' has ", p.size(), " entries, more than the limit of ",
                                           kMaxPrefixItems, " (kMaxPrefixItems)"));
      for (size_t i = 0; i < p.size(); ++i) prefix.push_back(value(p[i], path + "/prefixItems/" + std::to_string(i)));
    }
    ExprPtr item;  // null: no items beyond the prefix
    if (!s.contains("items") || s["items"].is_object() || s["items"] == true)
      item = s.contains("items") ? value(s["items"], path + "/items") : add_any_json_value(g);
    else if (s["items"] != false)
      bad(path + "/items", "'items' must be a schema (an array form is 'prefixItems')");
    const int p = int(prefix.size());
    if (!item && min_n > p) bad(path, "minItems exceeds the prefixItems when 'items' is false");
    // rest(k): elements k.. , each after a separator when k > 0.
    std::function<ExprPtr(int)> rest = [&](int k) -> ExprPtr {
      if (max_n >= 0 && k >= max_n) return empty_string();
      if (k < p) {
        ExprPtr e = seq({k > 0 ? sep() : empty_string(), prefix[size_t(k)], rest(k + 1)});
        return k < min_n ? e : optional(e);
      }
      if (!item) return empty_string();
      const int more_min = std::max(min_n - k, 0), more_max = max_n < 0 ? -1 : max_n - k;
      if (k > 0) return repeat(seq({sep(), item}), more_min, more_max);
      if (more_max < 0 && more_min <= 1) return list(item, sep(), more_min == 1);
      ExprPtr e = seq({item, repeat(seq({sep(), item}), std::max(more_min - 1, 0), more_max < 0 ? -1 : more_max - 1)});
      return more_min > 0 ? e : optional(e);
    };
    return seq({literal("["), ws(), rest(0), ws(), literal("]")});
  }

  ExprPtr object(const json& s, const std::string& path) {
    std::vector<std::pair<std::string, ExprPtr>> props;
    if (s.contains("properties")) {
      const json& p = s["properties"];
      if (!p.is_object()) bad(path + "/properties", "'properties' must be an object");
      if (p.size() > size_t(kMaxProperties))
        bad(path + "/properties", str_cat("'properties' has ", p.size(), " entries, more than the limit of ",
                                          kMaxProperties, " (kMaxProperties)"));
      for (auto it = p.begin(); it != p.end(); ++it)
        props.push_back({it.key(), value(it.value(), path + "/properties/" + it.key())});
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      const json& r = s["required"];
      if (!r.is_array()) bad(path + "/required", "'required' must be an array of property names");
      for (const json& x : r) {
        if (!x.is_string()) bad(path + "/required", "'required' must be an array of property names");
        const std::string name = x.get<std::string>();
        if (!s.contains("properties") || !s["properties"].contains(name)) bad(path + "/required", "required property '" + name + "' is not in 'properties'");
        required.insert(name);
      }
    }
    ExprPtr extra;  // schema of additional property values, null: none
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (a.is_boolean()) {
        if (a.get<bool>() && props.empty()) extra = add_any_json_value(g);
      } else if (a.is_object()) {
        if (!props.empty())
          bad(path + "/additionalProperties", "'additionalProperties' as a schema together with 'properties' is not supported");
        extra = value(a, path + "/additionalProperties");
      } else {
        bad(path + "/additionalProperties", "'additionalProperties' must be a boolean or a schema");
      }
    } else if (props.empty()) {
      extra = add_any_json_value(g);
    }
    if (extra) {
      // Free keys: only without declared properties, so a key never repeats a declared one.
      ExprPtr member = seq({free_string(), ws(), literal(":"), ws(), extra});
      return seq({literal("{"), ws(), list(member, sep(), false), ws(), literal("}")});
    }
    std::vector<ExprPtr> members;
    for (auto& [k, v] : props) {
      const std::string key = json(k).dump();
      g.add_text(key.size(), where + short_path(path + "/properties"));
      members.push_back(seq({literal(key), ws(), literal(":"), ws(), v}));
    }
    // After the first written property, each later one is ", prop" (required) or optional; the
    // first written one is any optional property up to the first required one.
    auto tail_after = [&](size_t first) {
      std::vector<ExprPtr> parts = {members[first]};
      for (size_t j = first + 1; j < props.size(); ++j) {
        ExprPtr e = seq({sep(), members[j]});
        parts.push_back(required.count(props[j].first) ? e : optional(e));
      }
      return seq(std::move(parts));
    };
    std::vector<ExprPtr> firsts;
    bool seen_required = false;
    for (size_t i = 0; i < props.size() && !seen_required; ++i) {
      firsts.push_back(tail_after(i));
      seen_required = required.count(props[i].first) > 0;
    }
    if (!seen_required) firsts.push_back(empty_string());
    return seq({literal("{"), ws(), alt(std::move(firsts)), ws(), literal("}")});
  }

  ExprPtr free_string() { return seq({literal("\""), repeat(json_string_chars({{0, 0x10FFFF}}), 0, -1), literal("\"")}); }
};

int32_t any_value_rule(Grammar& g) {
  for (size_t i = 0; i < g.rules.size(); ++i)
    if (g.rules[i].name == "json_value") return int32_t(i);
  const int32_t value = g.add_rule("json_value");
  const int32_t object = g.add_rule("json_object");
  ExprPtr ws = json_whitespace();
  ExprPtr sep = seq({ws, literal(","), ws});
  ExprPtr str = seq({literal("\""), repeat(json_string_chars({{0, 0x10FFFF}}), 0, -1), literal("\"")});
  ByteSet e, sign;
  e.add('e');
  e.add('E');
  sign.add('+');
  sign.add('-');
  ExprPtr num = seq({optional(literal("-")), alt({literal("0"), seq({byte_range('1', '9'), digits(0, -1)})}),
                     optional(seq({literal("."), digits(1, -1)})),
                     optional(seq({bytes(e), optional(bytes(sign)), digits(1, 2)}))});  // e±99: no overflow
  ExprPtr member = seq({str, ws, literal(":"), ws, ref(value)});
  g.rules[size_t(object)].body = seq({literal("{"), ws, list(member, sep, false), ws, literal("}")});
  ExprPtr array = seq({literal("["), ws, list(ref(value), sep, false), ws, literal("]")});
  g.rules[size_t(value)].body =
      alt({literal("null"), literal("true"), literal("false"), num, str, array, ref(object)});
  return value;
}

}  // namespace

ExprPtr add_any_json_value(Grammar& g) { return ref(any_value_rule(g)); }

ExprPtr add_any_json_object(Grammar& g) {
  any_value_rule(g);
  for (size_t i = 0; i < g.rules.size(); ++i)
    if (g.rules[i].name == "json_object") return ref(int32_t(i));
  PYPTO_ASSERT(false, "json_object rule missing");
  return nullptr;
}

ExprPtr add_json_schema(Grammar& g, const json& schema, const std::string& where) {
  Compiler c{g, schema, where, {}};
  return c.value(schema, "");
}

Grammar json_schema_grammar(const json& schema, const std::string& where) {
  Grammar g;
  ExprPtr v = add_json_schema(g, schema, where);
  g.root = seq({json_whitespace(), v});
  return g;
}

Grammar json_object_grammar() {
  Grammar g;
  g.root = seq({json_whitespace(), add_any_json_object(g)});
  return g;
}

}  // namespace pypto::structured
