#include "tokenizer/jinja_parser.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>

#include "core/error.h"

namespace pypto::jinja {
namespace {

// What the interpreter implements (see jinja_filters.cpp, jinja_methods.cpp). Filters differ by form because the
// oracle dispatches `x | f` and `x | f(...)` separately.
const std::set<std::string> kPlainFilters = {
    "safe",  "tojson", "list",  "first",      "last",  "length", "reverse", "sort",  "join",
    "string", "unique", "upper", "lower",     "title", "capitalize", "trim", "indent", "int",
    "float", "abs",    "items", "bool",       "keys",  "values", "dictsort"};
const std::set<std::string> kCallFilters = {
    "tojson", "join",      "int", "float",  "default", "sort",  "selectattr", "rejectattr",
    "map",    "indent",    "replace", "get", "items",  "keys",  "values",     "dictsort"};
const std::set<std::string> kTests = {
    "boolean", "callable", "odd",      "even",     "false", "true",  "none",  "string", "number",
    "integer", "iterable", "mapping",  "sequence", "lower", "upper", "defined", "undefined"};
const std::set<std::string> kMethods = {
    "upper", "lower",  "strip", "title", "capitalize", "rstrip", "lstrip", "startswith", "endswith",
    "split", "replace", "get",  "items", "keys",       "values", "dictsort"};
const std::set<std::string> kGlobalFunctions = {"namespace", "raise_exception", "range", "strftime_now",
                                                "caller"};

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  std::vector<NodePtr> run() {
    std::vector<NodePtr> program;
    while (cur_ < t_.size()) program.push_back(parse_any());
    check_calls();
    return program;
  }

 private:
  const std::vector<Token>& t_;
  size_t cur_ = 0;
  std::set<std::string> callables_;  // macro names and parameter names (may hold a macro)
  std::vector<std::pair<std::string, int>> called_identifiers_;
  int depth_ = 0;  // syntactic nesting; bounded so hostile input cannot overflow the stack

  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.error("template nested too deeply");
    }
    ~Nest() { --p.depth_; }
  };
  static constexpr int kMaxNesting = 150;

  int line() const {
    if (t_.empty()) return 1;
    return cur_ < t_.size() ? t_[cur_].line : t_.back().line;
  }
  [[noreturn]] void error(const std::string& msg) const { fail("chat template line ", line(), ": ", msg); }
  [[noreturn]] void error_at(int ln, const std::string& msg) const { fail("chat template line ", ln, ": ", msg); }

  const Token& peek() const {
    if (cur_ >= t_.size()) error("unexpected end of template");
    return t_[cur_];
  }
  bool is(Tok type) const { return cur_ < t_.size() && t_[cur_].type == type; }
  bool is_identifier(const char* name, size_t offset = 0) const {
    return cur_ + offset < t_.size() && t_[cur_ + offset].type == Tok::Identifier && t_[cur_ + offset].value == name;
  }
  bool is_statement(std::initializer_list<const char*> names) const {
    if (!(is(Tok::OpenStatement) && cur_ + 1 < t_.size() && t_[cur_ + 1].type == Tok::Identifier)) return false;
    for (const char* n : names)
      if (t_[cur_ + 1].value == n) return true;
    return false;
  }
  const Token& expect(Tok type, const char* what) {
    if (cur_ >= t_.size()) error(str_cat("expected ", what, " but the template ended"));
    const Token& tok = t_[cur_++];
    if (tok.type != type) error_at(tok.line, str_cat("expected ", what, ", got ", tok_name(tok.type), " '", tok.value, "'"));
    return tok;
  }
  void expect_identifier(const char* name) {
    if (!is_identifier(name)) error(str_cat("expected '", name, "'"));
    ++cur_;
  }
  NodePtr node(NodeKind k) const { return std::make_unique<Node>(k, line()); }

  // Parses statements until one of `ends` opens; fails at the end of the template.
  void parse_until(std::vector<NodePtr>& out, std::initializer_list<const char*> ends, const char* closing) {
    while (!is_statement(ends)) {
      if (cur_ >= t_.size()) error(str_cat("missing {% ", closing, " %}"));
      out.push_back(parse_any());
    }
  }

  NodePtr parse_any() {
    const Token& tok = peek();
    switch (tok.type) {
      case Tok::Comment: {
        auto n = node(NodeKind::Comment);
        ++cur_;
        return n;
      }
      case Tok::Text: {
        auto n = node(NodeKind::Text);
        n->str = t_[cur_++].value;
        return n;
      }
      case Tok::OpenStatement: return parse_statement();
      case Tok::OpenExpression: {
        ++cur_;
        auto e = parse_expression();
        expect(Tok::CloseExpression, "'}}'");
        return e;
      }
      default: error(str_cat("unexpected ", tok_name(tok.type), " '", tok.value, "'"));
    }
  }

  NodePtr parse_statement() {
    Nest nest(*this);
    expect(Tok::OpenStatement, "'{%'");
    if (!is(Tok::Identifier)) error("expected a statement name after '{%'");
    const std::string name = t_[cur_].value;
    const int ln = line();
    ++cur_;
    NodePtr result;
    if (name == "set") {
      result = parse_set(ln);
    } else if (name == "if") {
      result = parse_if(ln);
      close_block("endif");
    } else if (name == "macro") {
      result = parse_macro(ln);
      close_block("endmacro");
    } else if (name == "for") {
      result = parse_for(ln);
      close_block("endfor");
    } else if (name == "call") {
      result = std::make_unique<Node>(NodeKind::CallBlock, ln);
      if (is(Tok::OpenParen)) {
        result->args = parse_args(true);
        for (auto& p : result->args) callables_.insert(p->str);
      }
      auto callee = parse_primary();
      if (callee->kind != NodeKind::Identifier) error("expected a macro name after 'call'");
      called_identifiers_.emplace_back(callee->str, ln);
      auto call = std::make_unique<Node>(NodeKind::Call, ln);
      call->a = std::move(callee);
      call->args = parse_args(false);
      result->a = std::move(call);
      expect(Tok::CloseStatement, "'%}'");
      parse_until(result->body, {"endcall"}, "endcall");
      close_block("endcall");
      mark_special_args(*result);
    } else if (name == "break" || name == "continue") {
      expect(Tok::CloseStatement, "'%}'");
      result = std::make_unique<Node>(name == "break" ? NodeKind::Break : NodeKind::Continue, ln);
    } else if (name == "filter") {
      result = std::make_unique<Node>(NodeKind::FilterBlock, ln);
      auto f = parse_primary();
      if (f->kind != NodeKind::Identifier) error("expected a filter name after 'filter'");
      result->str = f->str;
      if (is(Tok::OpenParen)) {
        result->flag = true;
        result->args = parse_args(false);
      }
      check_filter(result->str, result->flag, result->args, ln);
      expect(Tok::CloseStatement, "'%}'");
      parse_until(result->body, {"endfilter"}, "endfilter");
      close_block("endfilter");
    } else {
      error_at(ln, str_cat("unsupported statement '", name, "'"));
    }
    return result;
  }

  void close_block(const char* end_name) {
    expect(Tok::OpenStatement, "'{%'");
    expect_identifier(end_name);
    expect(Tok::CloseStatement, "'%}'");
  }

  NodePtr parse_set(int ln) {
    auto n = std::make_unique<Node>(NodeKind::Set, ln);
    n->a = parse_expression_sequence(false);
    check_assign_target(*n->a, ln);
    note_bound_names(*n->a);
    if (is(Tok::Equals)) {
      ++cur_;
      n->b = parse_expression_sequence(false);
    } else {
      expect(Tok::CloseStatement, "'%}'");
      parse_until(n->body, {"endset"}, "endset");
      expect(Tok::OpenStatement, "'{%'");
      expect_identifier("endset");
    }
    expect(Tok::CloseStatement, "'%}'");
    return n;
  }

  // A name bound by set/for may hold a macro ({% set f = my_macro %}{{ f() }}), so calling it is
  // not rejected at parse time; if it holds no function, the call fails when rendered.
  void note_bound_names(const Node& target) {
    if (target.kind == NodeKind::Identifier) callables_.insert(target.str);
    if (target.kind == NodeKind::TupleLiteral)
      for (const auto& e : target.args)
        if (e->kind == NodeKind::Identifier) callables_.insert(e->str);
  }

  void check_assign_target(const Node& target, int ln) const {
    if (target.kind == NodeKind::Identifier) return;
    if (target.kind == NodeKind::TupleLiteral) {
      for (auto& e : target.args)
        if (e->kind != NodeKind::Identifier) error_at(ln, "can only unpack into plain names in 'set'");
      return;
    }
    if (target.kind == NodeKind::Member && !target.flag && target.b->kind == NodeKind::Identifier) return;
    error_at(ln, "unsupported assignment target in 'set' (use a name, a tuple of names or namespace.attr)");
  }

  NodePtr parse_if(int ln) {
    Nest nest(*this);
    auto n = std::make_unique<Node>(NodeKind::If, ln);
    n->a = parse_expression();
    expect(Tok::CloseStatement, "'%}'");
    parse_until(n->body, {"elif", "else", "endif"}, "endif");
    if (is_statement({"elif"})) {
      const int l2 = t_[cur_ + 1].line;
      cur_ += 2;
      n->alt.push_back(parse_if(l2));
    } else if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::CloseStatement, "'%}'");
      parse_until(n->alt, {"endif"}, "endif");
    }
    return n;
  }

  NodePtr parse_macro(int ln) {
    auto n = std::make_unique<Node>(NodeKind::Macro, ln);
    auto name = parse_primary();
    if (name->kind != NodeKind::Identifier) error("expected a name after 'macro'");
    n->str = name->str;
    callables_.insert(n->str);
    n->args = parse_args(true);
    for (auto& p : n->args) callables_.insert(p->str);
    expect(Tok::CloseStatement, "'%}'");
    parse_until(n->body, {"endmacro"}, "endmacro");
    mark_special_args(*n);
    return n;
  }

  // Whether a macro body reads `kwargs` / `varargs` (then extra arguments are collected there
  // instead of being an error). A simplification of the oracle's scan: any read counts.
  static void scan_special(const Node& n, bool& kw, bool& va) {
    if (n.kind == NodeKind::Identifier) {
      if (n.str == "kwargs") kw = true;
      if (n.str == "varargs") va = true;
    }
    for (const NodePtr* p : {&n.a, &n.b, &n.c})
      if (*p) scan_special(**p, kw, va);
    for (const auto* v : {&n.args, &n.body, &n.alt})
      for (const auto& c : *v)
        if (c) scan_special(*c, kw, va);
  }
  static void mark_special_args(Node& n) {
    bool kw = false, va = false;
    for (const auto& c : n.body) scan_special(*c, kw, va);
    for (const auto& p : n.args) {
      if (p->str == "kwargs") kw = false;
      if (p->str == "varargs") va = false;
    }
    n.uses_kwargs = kw;
    n.uses_varargs = va;
  }

  NodePtr parse_for(int ln) {
    auto n = std::make_unique<Node>(NodeKind::For, ln);
    n->a = parse_expression_sequence(true);
    if (n->a->kind != NodeKind::Identifier && n->a->kind != NodeKind::TupleLiteral)
      error_at(ln, "expected a name or a tuple of names as the loop variable");
    if (n->a->kind == NodeKind::TupleLiteral)
      for (auto& e : n->a->args)
        if (e->kind != NodeKind::Identifier) error_at(ln, "can only unpack into plain names in 'for'");
    note_bound_names(*n->a);
    if (!is_identifier("in")) error("expected 'in' after the loop variable");
    ++cur_;
    n->b = parse_expression();
    expect(Tok::CloseStatement, "'%}'");
    parse_until(n->body, {"endfor", "else"}, "endfor");
    if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::CloseStatement, "'%}'");
      parse_until(n->alt, {"endfor"}, "endfor");
    }
    return n;
  }

  NodePtr parse_expression_sequence(bool primary) {
    const int ln = line();
    std::vector<NodePtr> items;
    items.push_back(primary ? parse_primary() : parse_expression());
    const bool tuple = is(Tok::Comma);
    while (tuple) {
      ++cur_;
      items.push_back(primary ? parse_primary() : parse_expression());
      if (!is(Tok::Comma)) break;
    }
    if (!tuple) return std::move(items[0]);
    auto n = std::make_unique<Node>(NodeKind::TupleLiteral, ln);
    n->args = std::move(items);
    return n;
  }

  NodePtr parse_expression() {
    Nest nest(*this);
    return parse_if_expression();
  }

  NodePtr parse_if_expression() {
    auto a = parse_or();
    if (is_identifier("if")) {
      const int ln = line();
      ++cur_;
      auto test = parse_or();
      if (is_identifier("else")) {
        ++cur_;
        auto n = std::make_unique<Node>(NodeKind::Ternary, ln);
        n->a = std::move(test);
        n->b = std::move(a);
        n->c = parse_if_expression();
        return n;
      }
      auto n = std::make_unique<Node>(NodeKind::Select, ln);
      n->a = std::move(a);
      n->b = std::move(test);
      return n;
    }
    return a;
  }

  NodePtr binary(std::string op, NodePtr l, NodePtr r, int ln) {
    auto n = std::make_unique<Node>(NodeKind::Binary, ln);
    n->str = std::move(op);
    n->a = std::move(l);
    n->b = std::move(r);
    return n;
  }

  NodePtr parse_or() {
    auto left = parse_and();
    while (is_identifier("or")) {
      const int ln = line();
      ++cur_;
      left = binary("or", std::move(left), parse_and(), ln);
    }
    return left;
  }

  NodePtr parse_and() {
    auto left = parse_not();
    while (is_identifier("and")) {
      const int ln = line();
      ++cur_;
      left = binary("and", std::move(left), parse_not(), ln);
    }
    return left;
  }

  NodePtr parse_not() {
    Nest nest(*this);
    NodePtr right;
    while (is_identifier("not")) {
      auto n = node(NodeKind::Unary);
      n->str = "not";
      ++cur_;
      n->a = parse_not();
      right = std::move(n);
    }
    return right ? std::move(right) : parse_comparison();
  }

  NodePtr parse_comparison() {
    auto left = parse_additive();
    while (true) {
      const int ln = line();
      std::string op;
      if (is_identifier("not") && is_identifier("in", 1)) {
        op = "not in";
        cur_ += 2;
      } else if (is_identifier("in")) {
        op = "in";
        ++cur_;
      } else if (is(Tok::Comparison)) {
        op = t_[cur_++].value;
      } else {
        break;
      }
      left = binary(op, std::move(left), parse_additive(), ln);
    }
    return left;
  }

  NodePtr parse_additive() {
    auto left = parse_multiplicative();
    while (is(Tok::Additive)) {
      const int ln = line();
      std::string op = t_[cur_++].value;
      left = binary(op, std::move(left), parse_multiplicative(), ln);
    }
    return left;
  }

  NodePtr parse_multiplicative() {
    auto left = parse_power();
    while (is(Tok::Multiplicative)) {
      const int ln = line();
      std::string op = t_[cur_++].value;
      left = binary(op, std::move(left), parse_power(), ln);
    }
    return left;
  }

  NodePtr parse_power() {
    auto left = parse_test();
    while (is(Tok::Exponent)) {
      const int ln = line();
      ++cur_;
      left = binary("**", std::move(left), parse_test(), ln);
    }
    return left;
  }

  NodePtr parse_test() {
    auto operand = parse_filter();
    while (is_identifier("is")) {
      const int ln = line();
      ++cur_;
      auto n = std::make_unique<Node>(NodeKind::Test, ln);
      if (is_identifier("not")) {
        n->flag = true;
        ++cur_;
      }
      auto t = parse_primary();
      if (t->kind != NodeKind::Identifier) error_at(ln, "expected a test name after 'is'");
      if (!kTests.count(t->str)) error_at(ln, str_cat("unsupported test 'is ", t->str, "'"));
      n->str = t->str;
      n->a = std::move(operand);
      operand = std::move(n);
    }
    return operand;
  }

  void check_filter(const std::string& name, bool call_form, const std::vector<NodePtr>& args, int ln) const {
    const auto& known = call_form ? kCallFilters : kPlainFilters;
    if (!known.count(name))
      error_at(ln, str_cat("unsupported filter '", name, call_form ? "(...)" : "", "'"));
    if (name == "tojson" && call_form) {
      for (const auto& a : args)
        if (a->kind == NodeKind::KwArg && a->str == "sort_keys")
          error_at(ln, "unsupported filter argument tojson(sort_keys=...)");
    }
  }

  NodePtr parse_filter() {
    auto operand = parse_unary_sign();
    while (is(Tok::Pipe)) {
      const int ln = line();
      ++cur_;
      auto f = parse_primary();
      if (f->kind != NodeKind::Identifier) error_at(ln, "expected a filter name after '|'");
      auto n = std::make_unique<Node>(NodeKind::Filter, ln);
      n->str = f->str;
      if (is(Tok::OpenParen)) {
        n->flag = true;
        n->args = parse_args(false);
        // The oracle would parse a member access after the call into the filter itself and then
        // fail to apply it; reject it here.
        if (is(Tok::Dot) || is(Tok::OpenSquare) || is(Tok::OpenParen))
          error_at(ln, str_cat("unsupported expression after filter '", n->str, "(...)'"));
      }
      check_filter(n->str, n->flag, n->args, ln);
      n->a = std::move(operand);
      operand = std::move(n);
    }
    return operand;
  }

  NodePtr parse_unary_sign() {
    Nest nest(*this);
    if (cur_ < t_.size() && (t_[cur_].type == Tok::Unary || t_[cur_].type == Tok::Additive) &&
        (t_[cur_].value == "-" || t_[cur_].value == "+")) {
      auto n = node(NodeKind::Unary);
      n->str = t_[cur_++].value;
      n->a = parse_unary_sign();
      return n;
    }
    return parse_call_member();
  }

  NodePtr parse_call_member() {
    auto member = parse_member(parse_primary());
    if (is(Tok::OpenParen)) return parse_call(std::move(member));
    return member;
  }

  NodePtr parse_call(NodePtr callee) {
    const int ln = line();
    if (callee->kind == NodeKind::Member && !callee->flag && callee->b->kind == NodeKind::Identifier &&
        !kMethods.count(callee->b->str))
      error_at(ln, str_cat("unsupported method '", callee->b->str, "()'"));
    if (callee->kind == NodeKind::Identifier) called_identifiers_.emplace_back(callee->str, ln);
    auto n = std::make_unique<Node>(NodeKind::Call, ln);
    n->a = std::move(callee);
    n->args = parse_args(false);
    NodePtr expr = parse_member(std::move(n));
    if (is(Tok::OpenParen)) expr = parse_call(std::move(expr));
    return expr;
  }

  // Call arguments (parameters=false) or macro parameters (parameters=true).
  std::vector<NodePtr> parse_args(bool parameters) {
    expect(Tok::OpenParen, "'('");
    std::vector<NodePtr> args;
    std::set<std::string> names;
    bool saw_keyword = false, saw_spread = false;
    while (!is(Tok::CloseParen)) {
      if (cur_ >= t_.size()) error("missing ')'");
      const int ln = line();
      const bool kw_spread = is(Tok::Exponent);
      const bool pos_spread = is(Tok::Multiplicative) && t_[cur_].value == "*";
      if (parameters && (kw_spread || pos_spread)) error("argument unpacking is not allowed in parameters");
      if (kw_spread) {
        ++cur_;
        auto n = std::make_unique<Node>(NodeKind::KwSpread, ln);
        n->a = parse_expression();
        args.push_back(std::move(n));
        if (is(Tok::Comma)) ++cur_;
        if (!is(Tok::CloseParen)) error("`**` must be applied to the final argument");
        break;
      }
      NodePtr arg;
      if (pos_spread) {
        if (saw_spread) error("only one `*` argument unpacking is allowed");
        saw_spread = true;
        ++cur_;
        arg = std::make_unique<Node>(NodeKind::Spread, ln);
        arg->a = parse_expression();
      } else {
        arg = parse_expression();
        if (is(Tok::Equals)) {
          ++cur_;
          if (arg->kind != NodeKind::Identifier)
            error(parameters ? "expected a name for a parameter" : "expected a name for a keyword argument");
          auto kw = std::make_unique<Node>(NodeKind::KwArg, ln);
          kw->str = arg->str;
          kw->a = parse_expression();
          arg = std::move(kw);
        }
        if (parameters) {
          if (arg->kind != NodeKind::Identifier && arg->kind != NodeKind::KwArg)
            error("expected a name for a parameter");
          if (!names.insert(arg->str).second) error(str_cat("duplicate parameter name: ", arg->str));
        }
        if (arg->kind == NodeKind::KwArg) {
          saw_keyword = true;
        } else if (saw_keyword) {
          error(parameters ? "non-default parameter follows a default one"
                           : "positional arguments must come before keyword arguments");
        } else if (saw_spread) {
          error("positional arguments must not follow `*` argument unpacking");
        }
      }
      args.push_back(std::move(arg));
      if (is(Tok::Comma)) ++cur_;
    }
    expect(Tok::CloseParen, "')'");
    return args;
  }

  NodePtr parse_subscript() {
    // [expr] or a slice [start:stop:step]; a missing part stays null.
    std::vector<NodePtr> parts;
    bool is_slice = false;
    const int ln = line();
    while (!is(Tok::CloseSquare)) {
      if (cur_ >= t_.size()) error("missing ']'");
      if (is(Tok::Colon)) {
        parts.push_back(nullptr);
        ++cur_;
        is_slice = true;
      } else {
        parts.push_back(parse_expression());
        if (is(Tok::Colon)) {
          ++cur_;
          is_slice = true;
        }
      }
    }
    if (parts.empty()) error("expected an index or a slice inside []");
    if (!is_slice) return std::move(parts[0]);
    if (parts.size() > 3) error("a slice takes at most 3 parts");
    auto n = std::make_unique<Node>(NodeKind::Slice, ln);
    parts.resize(3);
    n->a = std::move(parts[0]);
    n->b = std::move(parts[1]);
    n->c = std::move(parts[2]);
    return n;
  }

  NodePtr parse_member(NodePtr object) {
    while (is(Tok::Dot) || is(Tok::OpenSquare)) {
      const int ln = line();
      const bool computed = t_[cur_].type == Tok::OpenSquare;
      ++cur_;
      auto n = std::make_unique<Node>(NodeKind::Member, ln);
      n->flag = computed;
      if (computed) {
        n->b = parse_subscript();
        expect(Tok::CloseSquare, "']'");
      } else {
        n->b = parse_primary();
        if (n->b->kind != NodeKind::Identifier && n->b->kind != NodeKind::IntLiteral)
          error_at(ln, "expected a name or an integer after '.'");
      }
      n->a = std::move(object);
      object = std::move(n);
    }
    return object;
  }

  NodePtr parse_primary() {
    const Token& tok = peek();
    const int ln = tok.line;
    ++cur_;
    switch (tok.type) {
      case Tok::Number: {
        const bool is_float = tok.value.find('.') != std::string::npos;
        auto n = std::make_unique<Node>(is_float ? NodeKind::FloatLiteral : NodeKind::IntLiteral, ln);
        n->num = std::strtod(tok.value.c_str(), nullptr);
        return n;
      }
      case Tok::String: {
        auto n = std::make_unique<Node>(NodeKind::StringLiteral, ln);
        n->str = tok.value;
        while (is(Tok::String)) n->str += t_[cur_++].value;  // adjacent literals concatenate
        return n;
      }
      case Tok::Identifier: {
        auto n = std::make_unique<Node>(NodeKind::Identifier, ln);
        n->str = tok.value;
        return n;
      }
      case Tok::OpenParen: {
        auto e = parse_expression_sequence(false);
        expect(Tok::CloseParen, "')'");
        return e;
      }
      case Tok::OpenSquare: {
        auto n = std::make_unique<Node>(NodeKind::ArrayLiteral, ln);
        while (!is(Tok::CloseSquare)) {
          if (cur_ >= t_.size()) error("missing ']'");
          n->args.push_back(parse_expression());
          if (is(Tok::Comma)) ++cur_;
        }
        ++cur_;
        return n;
      }
      case Tok::OpenCurly: {
        auto n = std::make_unique<Node>(NodeKind::ObjectLiteral, ln);
        while (!is(Tok::CloseCurly)) {
          if (cur_ >= t_.size()) error("missing '}'");
          n->args.push_back(parse_expression());
          expect(Tok::Colon, "':' between key and value");
          n->body.push_back(parse_expression());
          if (is(Tok::Comma)) ++cur_;
        }
        ++cur_;
        return n;
      }
      default: error_at(ln, str_cat("unexpected ", tok_name(tok.type), " '", tok.value, "'"));
    }
  }

  void check_calls() const {
    for (const auto& [name, ln] : called_identifiers_) {
      if (!kGlobalFunctions.count(name) && !callables_.count(name))
        error_at(ln, str_cat("unsupported function '", name, "()'"));
    }
  }
};

}  // namespace

std::vector<NodePtr> parse(const std::vector<Token>& tokens) { return Parser(tokens).run(); }

}  // namespace pypto::jinja
