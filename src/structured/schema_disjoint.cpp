#include "structured/schema_disjoint.h"

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "structured/number_range.h"

namespace pypto::structured {

namespace {

using nlohmann::json;

enum Kind : unsigned {
  kNull = 1, kBool = 2, kInt = 4, kFrac = 8, kString = 16, kArray = 32, kObject = 64, kAll = 127,
};

// Follows local $ref and one-entry allOf (a bounded number of times: a cycle of references
// without content gives up and is treated as "anything").
const json* resolve(const json* s, const json& root) {
  for (int hops = 0; hops < 32 && s->is_object(); ++hops) {
    if (s->contains("$ref") && (*s)["$ref"].is_string()) {
      const std::string ptr = (*s)["$ref"].get<std::string>();
      if (ptr.empty() || ptr[0] != '#') return nullptr;
      try {
        s = ptr.size() == 1 ? &root : &root.at(json::json_pointer(ptr.substr(1)));
      } catch (const std::exception&) {
        return nullptr;
      }
    } else if (s->contains("allOf") && (*s)["allOf"].is_array() && (*s)["allOf"].size() == 1) {
      s = &(*s)["allOf"][0];
    } else {
      return s;
    }
  }
  return s->is_object() || s->is_boolean() ? s : nullptr;
}

unsigned kind_of_value(const json& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBool;
  if (v.is_number()) return v.is_number_integer() || v.get<double>() == std::floor(v.get<double>()) ? kInt : kFrac;
  if (v.is_string()) return kString;
  return v.is_array() ? kArray : kObject;
}

const json* values_of(const json& s) {
  if (s.contains("enum") && s["enum"].is_array()) return &s["enum"];
  return nullptr;
}

// The types a schema allows (the compiler's own rules: 'type', else implied by keywords).
unsigned kinds(const json* s, const json& root, int depth, int64_t& budget) {
  s = resolve(s, root);
  if (!s || depth > 16 || --budget <= 0) return kAll;
  if (s->is_boolean()) return s->get<bool>() ? unsigned(kAll) : 0u;
  unsigned k = kAll;
  if (s->contains("const")) return kind_of_value((*s)["const"]);
  if (const json* vs = values_of(*s)) {
    k = 0;
    for (const json& v : *vs) k |= kind_of_value(v);
  }
  for (const char* kw : {"anyOf", "oneOf"})
    if (s->contains(kw) && (*s)[kw].is_array()) {
      unsigned u = 0;
      for (const json& b : (*s)[kw]) u |= kinds(&b, root, depth + 1, budget);
      k &= u;
    }
  if (s->contains("type")) {
    unsigned t = 0;
    const json& ty = (*s)["type"];
    for (const json& n : ty.is_array() ? ty : json::array({ty})) {
      const std::string name = n.is_string() ? n.get<std::string>() : "";
      t |= name == "null" ? kNull : name == "boolean" ? kBool : name == "integer" ? kInt
         : name == "number" ? kInt | kFrac : name == "string" ? kString : name == "array" ? kArray
         : name == "object" ? kObject : kAll;
    }
    k &= t;
  } else if (!s->contains("const") && !values_of(*s) && !s->contains("anyOf") && !s->contains("oneOf")) {
    unsigned t = 0;
    auto has = [&](std::initializer_list<const char*> ks) {
      for (const char* kw : ks)
        if (s->contains(kw)) return true;
      return false;
    };
    if (has({"properties", "required", "additionalProperties"})) t |= kObject;
    if (has({"items", "prefixItems", "minItems", "maxItems"})) t |= kArray;
    if (has({"minLength", "maxLength", "pattern", "format"})) t |= kString;
    if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) t |= kInt | kFrac;
    if (t) k &= t;
  }
  return k;
}

// A numeric range: lower / upper bound, each maybe exclusive.
struct Range {
  std::optional<DecimalBound> lo, hi;
};

std::optional<DecimalBound> bound(const json& s, const char* kw, const char* xkw, bool lower) {
  std::optional<DecimalBound> b;
  for (const char* k : {kw, xkw}) {
    if (!s.contains(k) || !s[k].is_number() || !(std::abs(s[k].get<double>()) <= 9e18)) continue;
    DecimalBound c{decimal_of(s[k].get<double>()), k == xkw};
    if (s[k].is_number_integer()) {
      const int64_t x = s[k].is_number_unsigned() ? int64_t(s[k].get<uint64_t>()) : s[k].get<int64_t>();
      c.value = Decimal{x < 0, x < 0 ? -x : x, ""};
    }
    const int cmp = b ? compare(c.value, b->value) : 0;
    if (!b || (lower ? cmp > 0 : cmp < 0) || (cmp == 0 && c.exclusive)) b = c;
  }
  return b;
}

// Whether every value at or above `lo` is above `hi` (the ranges cannot meet from this side).
bool above(const std::optional<DecimalBound>& lo, const std::optional<DecimalBound>& hi) {
  if (!lo || !hi) return false;
  const int cmp = compare(lo->value, hi->value);
  return cmp > 0 || (cmp == 0 && (lo->exclusive || hi->exclusive));
}

int64_t length_bound(const json& s, const char* kw, int64_t absent) {
  return s.contains(kw) && s[kw].is_number_integer() ? s[kw].get<int64_t>() : absent;
}

bool disjoint(const json* a, const json* b, const json& root, int depth, int64_t& budget);

// Whether `v` is certainly invalid under schema b (only its type is judged).
bool rejects(const json* b, const json& v, const json& root, int depth, int64_t& budget) {
  return (kinds(b, root, depth, budget) & kind_of_value(v)) == 0;
}

// A key equal for equal scalars (1 and 1.0 are one number, as JSON Schema compares them); null
// for arrays and objects, which are compared as values.
std::optional<std::string> scalar_key(const json& v) {
  if (v.is_number()) {
    std::string key = "n";
    key += json(v.get<double>()).dump();
    return key;
  }
  if (v.is_structured()) return std::nullopt;
  return v.dump();
}

// Whether two value lists share a value.
bool share_value(const std::vector<json>& x, const std::vector<json>& y, int64_t& budget) {
  std::set<std::string> keys;
  std::vector<const json*> structured;
  for (const json& v : y) {
    --budget;
    if (auto k = scalar_key(v)) keys.insert(*k);
    else structured.push_back(&v);
  }
  for (const json& v : x) {
    if (--budget <= 0) return true;
    if (auto k = scalar_key(v)) {
      if (keys.count(*k)) return true;
      continue;
    }
    for (const json* w : structured) {
      if (--budget <= 0) return true;
      if (v == *w) return true;
    }
  }
  return false;
}

bool disjoint(const json* a0, const json* b0, const json& root, int depth, int64_t& budget) {
  const json* a = resolve(a0, root);
  const json* b = resolve(b0, root);
  if (!a || !b || depth > 16 || --budget <= 0) return false;
  if ((kinds(a, root, depth, budget) & kinds(b, root, depth, budget)) == 0) return true;
  if (a->is_boolean() || b->is_boolean()) return false;
  // Unions: every branch apart from the other side.
  for (int side = 0; side < 2; ++side) {
    const json* u = side ? b : a;
    const json* o = side ? a : b;
    for (const char* kw : {"anyOf", "oneOf"})
      if (u->contains(kw) && (*u)[kw].is_array()) {
        bool all = true;
        for (const json& br : (*u)[kw]) all = all && disjoint(&br, o, root, depth + 1, budget);
        if (all) return true;
      }
  }
  // Value lists.
  auto list = [](const json* s) -> std::optional<std::vector<json>> {
    if (s->contains("const")) return std::vector<json>{(*s)["const"]};
    if (const json* vs = values_of(*s)) return std::vector<json>(vs->begin(), vs->end());
    return std::nullopt;
  };
  const auto la = list(a), lb = list(b);
  if (la && lb) return !share_value(*la, *lb, budget) && budget > 0;
  if (la || lb) {
    const json* other = la ? b : a;
    bool all = true;
    for (const json& v : la ? *la : *lb) all = all && rejects(other, v, root, depth + 1, budget);
    if (all) return true;
  }
  const unsigned ka = kinds(a, root, depth, budget), kb = kinds(b, root, depth, budget);
  // Numbers with ranges that do not meet.
  if (((ka | kb) & ~unsigned(kInt | kFrac)) == 0) {
    const Range ra{bound(*a, "minimum", "exclusiveMinimum", true), bound(*a, "maximum", "exclusiveMaximum", false)};
    const Range rb{bound(*b, "minimum", "exclusiveMinimum", true), bound(*b, "maximum", "exclusiveMaximum", false)};
    if (above(ra.lo, rb.hi) || above(rb.lo, ra.hi)) return true;
  }
  // Strings with lengths that do not meet.
  if (ka == kString && kb == kString) {
    if (length_bound(*a, "minLength", 0) > length_bound(*b, "maxLength", INT64_MAX) ||
        length_bound(*b, "minLength", 0) > length_bound(*a, "maxLength", INT64_MAX))
      return true;
  }
  // Objects: a required property the other side forbids (additionalProperties false).
  if (ka == kObject && kb == kObject) {
    for (int side = 0; side < 2; ++side) {
      const json& x = side ? *b : *a;  // forbids
      const json& y = side ? *a : *b;  // requires
      if (!x.contains("additionalProperties") || x["additionalProperties"] != json(false) || !y.contains("required") ||
          !y["required"].is_array())
        continue;
      const json* props = x.contains("properties") && x["properties"].is_object() ? &x["properties"] : nullptr;
      for (const json& k : y["required"]) {
        if (--budget <= 0) return false;
        if (k.is_string() && (!props || !props->contains(k.get<std::string>()))) return true;
      }
    }
  }
  // Objects told apart by a required property.
  if (ka == kObject && kb == kObject && a->contains("properties") && b->contains("properties") &&
      a->contains("required") && b->contains("required")) {
    const json& pa = (*a)["properties"];
    const json& pb = (*b)["properties"];
    for (const json& k : (*a)["required"]) {
      if (!k.is_string()) continue;
      const std::string key = k.get<std::string>();
      bool in_b = false;
      for (const json& k2 : (*b)["required"]) {
        if (--budget <= 0) return false;
        in_b = in_b || k2 == k;
      }
      if (in_b && pa.is_object() && pb.is_object() && pa.contains(key) && pb.contains(key) &&
          disjoint(&pa[key], &pb[key], root, depth + 1, budget))
        return true;
    }
  }
  return false;
}

}  // namespace

bool provably_disjoint(const json& a, const json& b, const json& root, int64_t& budget) {
  const bool apart = disjoint(&a, &b, root, 0, budget);
  return apart && budget > 0;  // an answer reached after the budget ran out is not trusted
}

}  // namespace pypto::structured
