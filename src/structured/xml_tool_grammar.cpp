#include "structured/xml_tool_grammar.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "structured/json_schema.h"
#include "structured/regex.h"

namespace pypto::structured {

namespace {

using ojson = nlohmann::ordered_json;

// Raw text without "</": runs of '<' are followed by a character other than '/' and '<', or end
// the text.
ExprPtr raw_text() { return compile_regex("([^<]|<+[^</])*<*", RegexMode::FullMatch, false); }

bool allows_string(const ojson& schema) {
  const auto t = schema.find("type");
  if (t == schema.end()) return false;
  if (t->is_string()) return *t == "string";
  if (t->is_array())
    for (const auto& x : *t)
      if (x == "string") return true;
  return false;
}

ExprPtr value_expr(Grammar& g, const ojson& schema, const std::string& where) {
  if (!schema.is_object()) throw Error(str_cat("'", where, "' is not a JSON schema object"));
  if (const auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
    std::vector<ExprPtr> alts;
    for (const auto& v : *e) {
      const std::string text = v.is_string() ? v.get<std::string>() : v.dump();
      if (text.find("</") != std::string::npos)
        throw Error(str_cat("'", where, ".enum' has a value containing \"</\", which the XML tool-call form cannot hold"));
      g.add_text(text.size(), where);
      alts.push_back(literal(text));
    }
    return alt(std::move(alts));
  }
  if (const auto c = schema.find("const"); c != schema.end()) {
    const std::string text = c->is_string() ? c->get<std::string>() : c->dump();
    if (text.find("</") != std::string::npos)
      throw Error(str_cat("'", where, ".const' contains \"</\", which the XML tool-call form cannot hold"));
    g.add_text(text.size(), where);
    return literal(text);
  }
  if (allows_string(schema)) {
    // Raw text cannot be held to a regex or format here (it must also avoid "</"): refused, so a
    // request is never served with a weaker constraint than it asked for.
    for (const char* k : {"pattern", "format"})
      if (schema.contains(k))
        throw Error(str_cat("'", where, ".", k, "' is not supported for string parameters in the XML tool-call form"));
    const auto bound = [&](const char* k, int64_t dflt) -> int64_t {
      const auto it = schema.find(k);
      if (it == schema.end()) return dflt;
      if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > kMaxLengthKeyword)
        throw Error(str_cat("'", where, ".", k, "' must be an integer from 0 to ", kMaxLengthKeyword));
      return it->get<int64_t>();
    };
    const int64_t lo = bound("minLength", -1), hi = bound("maxLength", -1);
    if (lo < 0 && hi < 0) return raw_text();
    // Bounded strings leave '<' out altogether: counting characters and ruling out "</" at once
    // is not worth a more permissive expression.
    if (hi >= 0 && lo > hi) throw Error(str_cat("'", where, ".minLength' is above its maxLength"));
    return compile_regex(str_cat("[^<]{", std::max<int64_t>(lo, 0), ",", hi < 0 ? std::string() : std::to_string(hi), "}"),
                         RegexMode::FullMatch, false);
  }
  return add_json_schema(g, nlohmann::json::parse(schema.dump()), where);
}

}  // namespace

ExprPtr add_xml_call_body(Grammar& g, const ojson& function, const std::string& where) {
  const std::string name = function.at("name").get<std::string>();
  std::vector<ExprPtr> parts{literal("<function=" + name + ">\n")};
  const auto params = function.find("parameters");
  if (params != function.end() && params->is_object()) {
    std::set<std::string> required;
    if (const auto r = params->find("required"); r != params->end() && r->is_array())
      for (const auto& x : *r)
        if (x.is_string()) required.insert(x.get<std::string>());
    if (const auto props = params->find("properties"); props != params->end() && props->is_object()) {
      for (auto it = props->begin(); it != props->end(); ++it) {
        const std::string pwhere = str_cat(where, ".parameters.properties.", it.key());
        ExprPtr one = seq({literal("<parameter=" + it.key() + ">\n"), value_expr(g, it.value(), pwhere),
                           literal("\n</parameter>\n")});
        parts.push_back(required.count(it.key()) ? one : optional(one));
      }
    }
  }
  parts.push_back(literal("</function>"));
  return seq(std::move(parts));
}

}  // namespace pypto::structured
