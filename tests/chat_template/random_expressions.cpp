#include "chat_template/random_expressions.h"

#include <cstdint>

namespace pypto::test {
namespace {

struct Gen {
  uint64_t s;
  uint32_t next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(s >> 33);
  }
  size_t below(size_t n) { return next() % n; }
  template <size_t N>
  const char* pick(const char* const (&a)[N]) { return a[below(N)]; }

  std::string atom() {
    static const char* const kAtoms[] = {
        "s", "u", "n", "f", "neg", "z", "b", "nul", "lst", "words", "d", "empty", "edict", "people", "msgs",
        "missing", "0", "1", "-1", "2", "2.5", "-0.5", "'a'", "''", "'  x '", "'Ab c'", "'1'", "'a,b'",
        "true", "false", "none", "[1, 2]", "[]", "['x', 'y']", "{'k': 1}", "{}", "(1, 2)", "msgs[0]",
        "people[1]", "d.a", "d.c", "loop", "'\\n'", "'😀é'", "'ΑΣ\\u2028\\\"\\\\\\x01'", "1e3", "x", "ns.a", "v0", "loop.index"};
    return pick(kAtoms);
  }

  std::string expr(int depth) {
    if (depth <= 0) return atom();
    switch (below(11)) {
      case 0:
      case 1: return atom();
      case 2: {
        // No `**`: V8 computes it with fdlibm's pow, which is not always correctly rounded, so
        // float powers can differ from ours in the last digit (see eval_binary).
        static const char* const kOps[] = {"+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">",
                                           "<=", ">=", "and", "or", "in", "not in"};
        return "(" + expr(depth - 1) + " " + pick(kOps) + " " + expr(depth - 1) + ")";
      }
      case 3: {
        static const char* const kFilters[] = {
            "length", "trim", "upper", "lower", "string", "first", "last", "reverse", "sort", "join", "tojson",
            "items", "list", "unique", "int", "float", "abs", "safe", "title", "capitalize", "indent", "bool",
            "join(',')", "default('D')", "default('D', true)", "tojson(indent=2)", "int(5)", "sort(reverse=true)",
            "replace('a', 'b')", "map(attribute='name')", "selectattr('admin')", "dictsort", "keys", "values",
            "tojson(ensure_ascii=true)", "indent(2, true)"};
        // Parenthesised: `x | f(...).attr` would make the attribute part of the filter, which we
        // reject at parse time (the oracle fails only if it evaluates it).
        return "(" + expr(depth - 1) + " | " + pick(kFilters) + ")";
      }
      case 4: {
        static const char* const kTests[] = {"defined", "undefined", "none", "string", "number", "integer",
                                             "iterable", "mapping", "sequence", "boolean", "true", "false",
                                             "odd", "even", "lower", "upper", "callable"};
        return "(" + expr(depth - 1) + (below(3) == 0 ? " is not " : " is ") + pick(kTests) + ")";
      }
      case 5: {
        static const char* const kMembers[] = {".role", ".content", ".name", ".a", ".length", "[0]", "[-1]",
                                               "[1]", "['k']", "[1:]", "[::-1]", "[:-1]", "[-2:]", "[::2]",
                                               ".x", "[n]", "['a']"};
        return expr(depth - 1) + pick(kMembers);
      }
      case 6: {
        static const char* const kMethods[] = {
            ".strip()", ".lstrip()", ".rstrip()", ".upper()", ".lower()", ".title()", ".split()",
            ".split(',')", ".split(' ', 1)", ".startswith('a')", ".endswith('x ')", ".replace('x', 'y')",
            ".get('k')", ".get('a', 0)", ".items()", ".keys()", ".values()", ".capitalize()"};
        return expr(depth - 1) + pick(kMethods);
      }
      case 7: return "(" + expr(depth - 1) + " if " + expr(depth - 1) + " else " + expr(depth - 1) + ")";
      case 8: return "(not " + expr(depth - 1) + ")";
      case 9: return "-" + expr(depth - 1);
      default: return "[" + expr(depth - 1) + ", " + expr(depth - 1) + "]";
    }
  }
};

}  // namespace

std::vector<std::string> random_expression_templates(unsigned seed, size_t count) {
  Gen g{seed};
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    const std::string e = g.expr(1 + static_cast<int>(g.below(3)));
    switch (g.below(5)) {
      case 0: out.push_back("{% for x in lst %}{{ " + e + " }}|{% endfor %}"); break;
      case 1: out.push_back("{% if " + e + " %}T{% else %}F{% endif %}"); break;
      case 2: out.push_back("{% set v = " + e + " %}{{ v }}|{{ v | tojson }}"); break;
      default: out.push_back("{{ " + e + " }}"); break;
    }
  }
  return out;
}

namespace {

struct LayoutGen {
  Gen g;
  std::string text() {
    static const char* const kText[] = {" ", "\n", "\t", "x", "  \n  ", "\r\n", "\u3000", "\n\n", " y ",
                                        "\n  ", "  ", "\u00a0z", "-", "\u2028"};
    static const char* const kRisky[] = {"{", "}", "%", "#"};  // may form or break tags
    std::string out;
    const size_t n = g.below(4);
    for (size_t i = 0; i < n; ++i) out += g.below(30) == 0 ? g.pick(kRisky) : g.pick(kText);
    return out;
  }
  std::string open(const char* body) {
    return std::string("{%") + (g.below(3) == 0 ? "-" : "") + " " + body + " " + (g.below(3) == 0 ? "-" : "") + "%}";
  }
  std::string block(int depth) {
    std::string out = text();
    const size_t n = 1 + g.below(3);
    for (size_t i = 0; i < n; ++i) {
      switch (depth <= 0 ? g.below(3) : g.below(7)) {
        case 0: out += std::string("{{") + (g.below(3) == 0 ? "-" : "") + " 'v' " + (g.below(3) == 0 ? "-" : "") + "}}"; break;
        case 1: out += std::string("{#") + (g.below(3) == 0 ? "-" : "") + " c " + (g.below(3) == 0 ? "-" : "") + "#}"; break;
        case 2: out += open("set q = 1"); break;
        case 3: out += open("if b") + block(depth - 1) + (g.below(2) ? open("else") + block(depth - 1) : "") + open("endif"); break;
        case 4: out += open("for i in lst") + block(depth - 1) + open("endfor"); break;
        case 5: out += open("set blk") + block(depth - 1) + open("endset") + "{{ blk }}"; break;
        default: out += open("macro mm()") + block(depth - 1) + open("endmacro") + "{{ mm() }}"; break;
      }
      out += text();
    }
    return out;
  }
};

}  // namespace

std::vector<std::string> random_program_templates(unsigned seed, size_t count) {
  Gen g{seed};
  std::vector<std::string> out;
  auto e = [&g] { return g.expr(static_cast<int>(g.below(2))); };
  for (size_t i = 0; i < count; ++i) {
    std::string t = "{% set ns = namespace(a=1, b=[]) %}{% macro mc(p, q='d') %}[{{ p }}|{{ q }}]{% endmacro %}";
    const size_t n = 1 + g.below(4);
    for (size_t k = 0; k < n; ++k) {
      switch (g.below(9)) {
        case 0: t += "{% set v0 = " + e() + " %}{{ v0 }}"; break;
        case 1: t += "{% set ns.a = " + e() + " %}{{ ns.a }}"; break;
        case 2: t += "{% for x in " + e() + " %}{{ loop.index }}:{{ x }};{% set y = x %}{% endfor %}{{ y }}"; break;
        case 3: t += "{% for p, q in " + e() + " %}{{ p }}={{ q }};{% endfor %}"; break;
        case 4: t += "{% if " + e() + " %}A{% elif " + e() + " %}B{% else %}C{% endif %}"; break;
        case 5: t += "{{ mc(" + e() + ") }}{{ mc(" + e() + ", q=" + e() + ") }}"; break;
        case 6:
          t += "{% for x in lst if " + e() + " %}{% if loop.first %}F{% endif %}{{ x }}{% else %}E{% endfor %}";
          break;
        case 7: t += "{% for x in lst %}{% if " + e() + " %}{% continue %}{% endif %}{{ x }}{% endfor %}"; break;
        default: t += "{% set v0, v1 = " + e() + ", " + e() + " %}{{ v1 }}{{ v0 }}"; break;
      }
    }
    out.push_back(t);
  }
  return out;
}

std::vector<std::string> random_layout_templates(unsigned seed, size_t count) {
  LayoutGen lg{Gen{seed}};
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) out.push_back(lg.block(2));
  return out;
}

}  // namespace pypto::test
