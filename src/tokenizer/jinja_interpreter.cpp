#include "tokenizer/jinja_interpreter.h"

#include <cmath>
#include <ctime>
#include <optional>

#include "tokenizer/jinja_filters.h"
#include "tokenizer/jinja_methods.h"
#include "tokenizer/jinja_text.h"

namespace pypto::jinja {
namespace {

// Control flow of {% break %} / {% continue %}: exceptions, as in the oracle, so that they
// cross if-blocks and even macro calls up to the nearest loop.
struct BreakSignal {};
struct ContinueSignal {};

constexpr int kMaxDepth = 100;       // nested macro calls (a recursive macro must not overflow the stack)
constexpr int kMaxEvalDepth = 1000;  // nested evaluation frames in one render

struct DepthGuard {
  int& d;
  explicit DepthGuard(int& depth) : d(depth) {
    if (++d > kMaxEvalDepth) {
      --d;
      fail("template evaluation nested too deeply");
    }
  }
  ~DepthGuard() { --d; }
};

// Prefixes an error with the line of the statement that raised it (once, innermost first).
class LocatedError : public Error {
 public:
  using Error::Error;
};

}  // namespace

const Value* Env::find(const std::string& name) const {
  for (const Env* e = this; e; e = e->parent.get())
    for (const auto& [k, v] : e->vars)
      if (k == name) return &v;
  return nullptr;
}

Value Env::lookup(const std::string& name) const {
  const Value* v = find(name);
  return v ? unhole(*v) : Value::undefined();
}

void Env::set(const std::string& name, Value v) {
  for (auto& [k, old] : vars) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

EnvPtr make_env(EnvPtr parent) {
  auto e = std::make_shared<Env>();
  e->parent = std::move(parent);
  return e;
}

Interpreter::~Interpreter() {
  for (auto& ns : namespaces_) ns->entries.clear();
}

std::string Interpreter::run(const std::vector<NodePtr>& program, const EnvPtr& global) {
  std::string out;
  try {
    exec_block(program, global, out);
  } catch (const BreakSignal&) {
    fail("chat template: 'break' outside of a loop");
  } catch (const ContinueSignal&) {
    fail("chat template: 'continue' outside of a loop");
  }
  return out;
}

void Interpreter::exec_block(const std::vector<NodePtr>& stmts, const EnvPtr& env, std::string& out) {
  for (const auto& s : stmts) {
    try {
      exec(*s, env, out);
    } catch (const TemplateRaise&) {
      throw;
    } catch (const LocatedError&) {
      throw;
    } catch (const Error& e) {
      throw LocatedError(str_cat("chat template line ", s->line, ": ", e.what()));
    }
  }
}

void Interpreter::exec(const Node& n, const EnvPtr& env, std::string& out) {
  DepthGuard guard(eval_depth_);
  switch (n.kind) {
    case NodeKind::Text: out += n.str; return;
    case NodeKind::Comment: return;
    case NodeKind::If: {
      exec_block(truthy(eval(*n.a, env)) ? n.body : n.alt, env, out);
      return;
    }
    case NodeKind::For: exec_for(n, env, out); return;
    case NodeKind::Set: exec_set(n, env); return;
    case NodeKind::Macro: env->set(n.str, make_macro(n)); return;
    case NodeKind::Break: throw BreakSignal{};
    case NodeKind::Continue: throw ContinueSignal{};
    case NodeKind::CallBlock: {
      Value v = exec_call_block(n, env);
      if (!v.is_null() && !v.is_undefined()) out += to_display(v);
      return;
    }
    case NodeKind::FilterBlock: {
      std::string body;
      exec_block(n.body, env, body);
      Value v = apply_filter(*this, Value::string(std::move(body)), n, env);
      if (!v.is_null() && !v.is_undefined()) out += to_display(v);
      return;
    }
    default: {
      Value v = eval(n, env);
      if (!no_hole(v).is_null() && !v.is_undefined()) out += to_display(v);
      return;
    }
  }
}

void Interpreter::exec_for(const Node& n, const EnvPtr& env, std::string& out) {
  EnvPtr scope = make_env(env);
  const Node* test = nullptr;
  Value iterable;
  if (n.b->kind == NodeKind::Select) {
    iterable = eval(*n.b->a, scope);
    test = n.b->b.get();
  } else {
    iterable = eval(*n.b, scope);
  }
  no_hole(iterable);
  if (iterable.kind == Kind::Dict) {
    std::vector<Value> keys;
    for (const auto& kv : iterable.dict->entries) keys.push_back(Value::string(kv.first));
    iterable = Value::new_list(std::move(keys));
  } else if (iterable.kind != Kind::List) {
    fail("Expected iterable or object type in for loop: got ", type_name(iterable));
  }

  const Node& target = *n.a;
  auto bind = [&target](const EnvPtr& e, const Value& item) {
    if (target.kind == NodeKind::Identifier) {
      e->set(target.str, item);
      return;
    }
    for (size_t j = 0; j < target.args.size(); ++j) e->set(target.args[j]->str, item.list->items[j]);
  };

  std::vector<Value> items;
  for (const Value& item : iterable.list->items) {
    if (target.kind == NodeKind::TupleLiteral) {
      if (item.kind != Kind::List || item.list->is_tuple) fail("Cannot unpack non-iterable type: ", type_name(item));
      if (item.list->items.size() != target.args.size())
        fail("Too ", target.args.size() > item.list->items.size() ? "few" : "many", " items to unpack");
    }
    if (test) {
      EnvPtr loop_scope = make_env(scope);
      bind(loop_scope, item);
      if (!truthy(eval(*test, loop_scope))) continue;
    }
    items.push_back(item);
  }

  bool no_iteration = true;
  const size_t count = items.size();
  for (size_t i = 0; i < count; ++i) {
    Value loop = Value::new_dict();
    auto& d = *loop.dict;
    d.entries.reserve(9);
    d.entries.emplace_back("index", Value::integer(static_cast<double>(i + 1)));
    d.entries.emplace_back("index0", Value::integer(static_cast<double>(i)));
    d.entries.emplace_back("revindex", Value::integer(static_cast<double>(count - i)));
    d.entries.emplace_back("revindex0", Value::integer(static_cast<double>(count - i - 1)));
    d.entries.emplace_back("first", Value::from_bool(i == 0));
    d.entries.emplace_back("last", Value::from_bool(i == count - 1));
    d.entries.emplace_back("length", Value::integer(static_cast<double>(count)));
    d.entries.emplace_back("previtem", i > 0 ? items[i - 1] : Value::undefined());
    d.entries.emplace_back("nextitem", i + 1 < count ? items[i + 1] : Value::undefined());
    scope->set("loop", std::move(loop));
    bind(scope, items[i]);
    const size_t mark = out.size();
    try {
      exec_block(n.body, scope, out);
    } catch (const ContinueSignal&) {
      out.resize(mark);  // the interrupted iteration's output is dropped, as in the oracle
      continue;
    } catch (const BreakSignal&) {
      out.resize(mark);
      break;
    }
    no_iteration = false;
  }
  if (no_iteration) exec_block(n.alt, scope, out);
}

void Interpreter::exec_set(const Node& n, const EnvPtr& env) {
  Value rhs;
  if (n.b) {
    rhs = eval(*n.b, env);
  } else {
    std::string body;
    exec_block(n.body, env, body);
    rhs = Value::string(std::move(body));
  }
  const Node& target = *n.a;
  if (target.kind == NodeKind::Identifier) {
    env->set(target.str, std::move(rhs));
  } else if (target.kind == NodeKind::TupleLiteral) {
    if (rhs.kind != Kind::List) fail("Cannot unpack non-iterable type in set: ", type_name(rhs));
    const auto& arr = rhs.list->items;
    if (arr.size() != target.args.size())
      fail("Too ", target.args.size() > arr.size() ? "few" : "many", " items to unpack in set");
    for (size_t i = 0; i < arr.size(); ++i) env->set(target.args[i]->str, arr[i]);
  } else {
    Value object = eval(*target.a, env);
    if (object.kind != Kind::Namespace) fail("cannot assign attribute on non-namespace object");
    object.dict->set(target.b->str, std::move(rhs));
  }
}

void Interpreter::bind_macro_args(const std::string& display, const Node& n, std::vector<Value> args,
                                  const EnvPtr& scope) {
  std::vector<std::pair<std::string, Value>> kwargs;
  if (!args.empty() && args.back().is_kwargs()) {
    kwargs = args.back().dict->entries;
    args.pop_back();
  }
  std::vector<const Node*> pending;
  for (size_t i = 0; i < n.args.size(); ++i) {
    const Node& p = *n.args[i];
    std::optional<Value> value;
    if (i < args.size() && !args[i].is_hole()) value = args[i];  // raw undefined counts as missing
    if (!value) {
      for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
        if (it->first == p.str) {
          if (!it->second.is_hole()) value = it->second;
          kwargs.erase(it);
          break;
        }
      }
    }
    if (!value && p.kind == NodeKind::KwArg) pending.push_back(&p);
    scope->set(p.str, value ? *value : Value::undefined());
  }
  if (n.uses_kwargs) {
    Value kw = Value::new_dict();
    kw.dict->entries = kwargs;
    scope->set("kwargs", kw);
  } else if (!kwargs.empty()) {
    fail("macro ", display, " takes no keyword argument '", kwargs.front().first, "'");
  }
  if (n.uses_varargs) {
    std::vector<Value> rest;
    for (size_t i = n.args.size(); i < args.size(); ++i) rest.push_back(args[i]);
    scope->set("varargs", Value::new_list(std::move(rest)));
  } else if (args.size() > n.args.size()) {
    fail("macro ", display, " takes not more than ", n.args.size(), " argument(s)");
  }
  for (const Node* p : pending) scope->set(p->str, eval(*p->a, scope));
}

Value Interpreter::make_macro(const Node& n) {
  return Value::function(n.str, [this, &n](std::vector<Value>& args, const EnvPtr& call_env) {
    if (depth_ >= kMaxDepth) fail("macro calls nested too deeply (", kMaxDepth, ")");
    ++depth_;
    struct Guard {
      int& d;
      ~Guard() { --d; }
    } guard{depth_};
    EnvPtr scope = make_env(call_env);
    bind_macro_args("'" + n.str + "'", n, args, scope);
    std::string out;
    exec_block(n.body, scope, out);
    return Value::string(std::move(out));
  });
}

Value Interpreter::exec_call_block(const Node& n, const EnvPtr& env) {
  Value caller = Value::function("caller", [this, &n, env](std::vector<Value>& args, const EnvPtr&) {
    if (depth_ >= kMaxDepth) fail("macro calls nested too deeply (", kMaxDepth, ")");
    ++depth_;
    struct Guard {
      int& d;
      ~Guard() { --d; }
    } guard{depth_};
    EnvPtr scope = make_env(env);
    bind_macro_args("None", n, args, scope);
    std::string out;
    exec_block(n.body, scope, out);
    return Value::string(std::move(out));
  });
  const Node& call = *n.a;
  auto [args, kwargs] = eval_args(call.args, env);
  args.push_back(kwargs);
  Value fn = eval(*call.a, env);
  if (fn.kind != Kind::Function) fail("Cannot call something that is not a function: got ", type_name(fn));
  EnvPtr call_env = make_env(env);
  call_env->set("caller", caller);
  return fn.fn->fn(args, call_env);
}

std::pair<std::vector<Value>, Value> Interpreter::eval_args(const std::vector<NodePtr>& args, const EnvPtr& env) {
  std::vector<Value> positional;
  Value kwargs = Value::new_dict(true);
  for (const auto& a : args) {
    if (a->kind == NodeKind::Spread) {
      Value v = eval(*a->a, env);
      if (v.kind != Kind::List) fail("Cannot unpack non-iterable type: ", type_name(v));
      for (const Value& x : v.list->items) positional.push_back(x);
    } else if (a->kind != NodeKind::KwArg && a->kind != NodeKind::KwSpread) {
      positional.push_back(eval(*a, env));
    }
  }
  auto add = [&kwargs](const std::string& k, Value v) {
    if (kwargs.dict->find(k)) fail("Got multiple values for keyword argument '", k, "'");
    kwargs.dict->entries.emplace_back(k, std::move(v));
  };
  for (const auto& a : args) {
    if (a->kind == NodeKind::KwArg) {
      add(a->str, eval(*a->a, env));
    } else if (a->kind == NodeKind::KwSpread) {
      Value v = eval(*a->a, env);
      if (v.kind != Kind::Dict) fail("Argument after ** must be a mapping, not ", type_name(v));
      for (const auto& [k, x] : v.dict->entries) add(k, x);
    }
  }
  return {std::move(positional), std::move(kwargs)};
}

Value Interpreter::eval(const Node& n, const EnvPtr& env) {
  DepthGuard guard(eval_depth_);
  switch (n.kind) {
    case NodeKind::IntLiteral: return Value::integer(n.num);
    case NodeKind::FloatLiteral: return Value::floating(n.num);
    case NodeKind::StringLiteral: return Value::string(n.str);
    case NodeKind::ArrayLiteral:
    case NodeKind::TupleLiteral: {
      std::vector<Value> items;
      for (const auto& e : n.args) items.push_back(eval(*e, env));
      return Value::new_list(std::move(items), n.kind == NodeKind::TupleLiteral);
    }
    case NodeKind::ObjectLiteral: {
      Value d = Value::new_dict();
      for (size_t i = 0; i < n.args.size(); ++i) {
        Value k = eval(*n.args[i], env);
        if (!k.is_string()) fail("Object keys must be strings: got ", type_name(k));
        d.dict->set(k.str, eval(*n.body[i], env));
      }
      return d;
    }
    case NodeKind::Identifier: return env->lookup(n.str);
    case NodeKind::Call: {
      auto [args, kwargs] = eval_args(n.args, env);
      if (!kwargs.dict->entries.empty()) args.push_back(kwargs);
      Value fn = eval(*n.a, env);
      if (no_hole(fn).kind != Kind::Function) fail("Cannot call something that is not a function: got ", type_name(fn));
      return fn.fn->fn(args, env);
    }
    case NodeKind::Member: return eval_member(n, env);
    case NodeKind::Unary: {
      Value v = eval(*n.a, env);
      no_hole(v);
      if (n.str == "not") return Value::from_bool(!truthy(v));
      if (v.kind == Kind::Int || v.kind == Kind::Float || v.kind == Kind::Bool) {
        const double x = v.kind == Kind::Bool ? (v.boolean ? 1 : 0) : v.number;
        const double r = n.str == "-" ? -x : x;
        return v.kind == Kind::Float ? Value::floating(r) : Value::integer(r);
      }
      fail("Unknown operator \"", n.str, "\" for ", type_name(v));
    }
    case NodeKind::Binary: return eval_binary(n, env);
    case NodeKind::Filter: return apply_filter(*this, eval(*n.a, env), n, env);
    case NodeKind::Test: {
      const bool r = run_test(n.str, no_hole(eval(*n.a, env)));
      return Value::from_bool(n.flag ? !r : r);
    }
    case NodeKind::Select: {
      if (!truthy(eval(*n.b, env))) return Value::undefined();
      return eval(*n.a, env);
    }
    case NodeKind::Ternary: return truthy(eval(*n.a, env)) ? eval(*n.b, env) : eval(*n.c, env);
    default: fail("unexpected syntax in an expression");
  }
}

Value Interpreter::eval_member(const Node& n, const EnvPtr& env) {
  Value obj = eval(*n.a, env);
  Value prop;
  if (n.flag) {
    if (n.b->kind == NodeKind::Slice) return eval_slice(obj, *n.b, env);
    prop = eval(*n.b, env);
  } else if (n.b->kind == NodeKind::IntLiteral) {
    prop = Value::integer(n.b->num);
  } else {
    prop = Value::string(n.b->str);
  }
  return get_member(obj, prop);
}

Value Interpreter::eval_slice(const Value& obj, const Node& s, const EnvPtr& env) {
  if (obj.kind != Kind::List && !obj.is_string()) fail("Slice object must be an array or string");
  Value start = s.a ? eval(*s.a, env) : Value::undefined();
  Value stop = s.b ? eval(*s.b, env) : Value::undefined();
  Value step = s.c ? eval(*s.c, env) : Value::undefined();
  return slice_value(obj, start, stop, step);
}

Value Interpreter::eval_binary(const Node& n, const EnvPtr& env) {
  const std::string& op = n.str;
  Value left = eval(*n.a, env);
  no_hole(left);
  if (op == "and") return truthy(left) ? eval(*n.b, env) : left;
  if (op == "or") return truthy(left) ? left : eval(*n.b, env);
  Value right = eval(*n.b, env);
  no_hole(right);
  if (op == "==") return Value::from_bool(loose_equals(left, right));
  if (op == "!=") return Value::from_bool(!loose_equals(left, right));

  if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && (op == "in" || op == "not in")) return Value::from_bool(op == "not in");
    fail("Cannot perform operation ", op, " on undefined values");
  }
  if (left.is_null() || right.is_null()) fail("Cannot perform operation on null values");
  if (op == "~") return Value::string(to_concat_string(left) + to_concat_string(right));

  auto numeric_like = [](const Value& v) { return v.is_number() || v.kind == Kind::Bool; };
  auto as_number = [](const Value& v) { return v.kind == Kind::Bool ? (v.boolean ? 1.0 : 0.0) : v.number; };
  if (op == "**" && numeric_like(left) && numeric_like(right)) {
    const double a = as_number(left), b = as_number(right);
    if (a == 0 && b < 0) fail("0.0 cannot be raised to a negative power");
    // Known difference: V8 (the oracle's runtime) uses fdlibm's pow, which is not always
    // correctly rounded; std::pow is, so a non-exact float power may differ in its last digit.
    const double r = std::pow(a, b);
    if (!std::isfinite(r)) fail("Exponentiation result is not a finite real number");
    const bool is_float = left.kind == Kind::Float || right.kind == Kind::Float || b < 0;
    return is_float ? Value::floating(r) : Value::integer(r);
  }
  if (left.is_number() && right.is_number()) {
    const double a = left.number, b = right.number;
    const bool is_float = left.kind == Kind::Float || right.kind == Kind::Float;
    auto num = [is_float](double r) { return is_float ? Value::floating(r) : Value::integer(r); };
    if (op == "+") return num(a + b);
    if (op == "-") return num(a - b);
    if (op == "*") return num(a * b);
    if (op == "/") return Value::floating(a / b);
    if (op == "//") return num(std::floor(a / b));
    if (op == "%") return num(std::fmod(a, b));
    if (op == "<") return Value::from_bool(a < b);
    if (op == ">") return Value::from_bool(a > b);
    if (op == ">=") return Value::from_bool(a >= b);
    if (op == "<=") return Value::from_bool(a <= b);
  } else if (left.kind == Kind::List && right.kind == Kind::List) {
    if (op == "+") {
      std::vector<Value> items = left.list->items;
      items.insert(items.end(), right.list->items.begin(), right.list->items.end());
      return Value::new_list(std::move(items));
    }
  } else if (right.kind == Kind::List) {
    if (op == "in" || op == "not in") {
      bool member = false;
      for (const Value& x : right.list->items)
        if (strict_equals(x, left)) {
          member = true;
          break;
        }
      return Value::from_bool(op == "in" ? member : !member);
    }
  }
  if ((left.is_string() || right.is_string()) && op == "+")
    return Value::string(to_concat_string(left) + to_concat_string(right));
  if (left.is_string() && right.is_string() && (op == "in" || op == "not in")) {
    const bool found = right.str.find(left.str) != std::string::npos;
    return Value::from_bool(op == "in" ? found : !found);
  }
  if (left.is_string() && right.kind == Kind::Dict && (op == "in" || op == "not in")) {
    const bool found = right.dict->find(left.str) != nullptr;
    return Value::from_bool(op == "in" ? found : !found);
  }
  fail("Unknown operator \"", op, "\" between ", type_name(left), " and ", type_name(right));
}

namespace {

// JS String(x) of a raw value, as `new Error(x)` uses for raise_exception's message.
std::string raw_message(const Value& v) {
  if (v.is_undefined() || v.is_null()) return "";  // new Error(undefined): empty message
  return to_concat_string(v);
}

Value range_fn(std::vector<Value>& args, const EnvPtr&) {
  std::vector<double> nums;
  for (const Value& a : args) {
    if (!a.is_number()) fail("range() arguments must be numbers, got ", type_name(a));
    nums.push_back(a.number);
  }
  if (nums.empty()) fail("range() needs at least one argument");
  double start = 0, stop, step = 1;
  if (nums.size() == 1) {
    stop = nums[0];
  } else {
    start = nums[0];
    stop = nums[1];
    if (nums.size() > 2) step = nums[2];
  }
  if (step == 0) fail("range() step must not be zero");
  const double count = std::ceil((stop - start) / step);
  if (count > 1e6) fail("range() of more than 1000000 items");
  std::vector<Value> out;
  if (step > 0) {
    for (double i = start; i < stop; i += step) out.push_back(std::floor(i) == i ? Value::integer(i) : Value::floating(i));
  } else {
    for (double i = start; i > stop; i += step) out.push_back(std::floor(i) == i ? Value::integer(i) : Value::floating(i));
  }
  return Value::new_list(std::move(out));
}

Value strftime_now_fn(std::vector<Value>& args, const EnvPtr&) {
  static const char* const kLong[] = {"January", "February", "March",     "April",   "May",      "June",
                                      "July",    "August",   "September", "October", "November", "December"};
  static const char* const kShort[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (args.empty() || !args[0].is_string()) fail("strftime_now() needs a format string");
  const std::string& f = args[0].str;
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  auto pad2 = [](int v) { return (v < 10 ? "0" : "") + std::to_string(v); };
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '%' && i + 1 < f.size()) {
      const char c = f[i + 1];
      std::string rep;
      switch (c) {
        case 'Y': rep = std::to_string(tm.tm_year + 1900); break;
        case 'm': rep = pad2(tm.tm_mon + 1); break;
        case 'd': rep = pad2(tm.tm_mday); break;
        case 'b': rep = kShort[tm.tm_mon]; break;
        case 'B': rep = kLong[tm.tm_mon]; break;
        case 'H': rep = pad2(tm.tm_hour); break;
        case 'M': rep = pad2(tm.tm_min); break;
        case '%': rep = "%"; break;
        default: out += f[i]; continue;
      }
      out += rep;
      ++i;
      continue;
    }
    out += f[i];
  }
  return Value::string(out);
}

Value namespace_fn(std::vector<Value>& args) {
  std::vector<Value> positional = args;
  Value kwargs;
  if (!positional.empty() && positional.back().is_kwargs()) {
    kwargs = positional.back();
    positional.pop_back();
  }
  if (positional.size() > 1) fail("namespace expected at most 1 argument, got ", positional.size());
  Value ns = Value::new_namespace();
  if (positional.size() == 1) {
    const Value& src = positional[0];
    if (src.kind == Kind::Dict) {
      for (const auto& [k, v] : src.dict->entries) ns.dict->set(k, v);
    } else if (src.kind == Kind::List) {
      for (const Value& pair : src.list->items) {
        std::vector<Value> kv;
        if (pair.kind == Kind::List) {
          kv = pair.list->items;
        } else if (pair.is_string()) {
          for (char32_t cp : to_code_points(pair.str)) {
            std::string ch;
            append_utf8(ch, cp);
            kv.push_back(Value::string(ch));
          }
        }
        if (kv.size() != 2) fail("namespace expected an object or an iterable of [key, value] pairs");
        if (!kv[0].is_string()) fail("namespace keys must be strings");
        ns.dict->set(kv[0].str, kv[1]);
      }
    } else {
      fail("'", type_name(src), "' object is not iterable");
    }
  }
  if (kwargs.kind == Kind::Dict)
    for (const auto& [k, v] : kwargs.dict->entries) ns.dict->set(k, v);
  return ns;
}

}  // namespace

void install_globals(Env& g, std::vector<std::shared_ptr<DictData>>* namespaces) {
  g.set("namespace", Value::function("namespace", [namespaces](std::vector<Value>& args, const EnvPtr&) {
          Value ns = namespace_fn(args);
          if (namespaces) namespaces->push_back(ns.dict);
          return ns;
        }));
  g.set("false", Value::from_bool(false));
  g.set("true", Value::from_bool(true));
  g.set("none", Value::null());
  g.set("raise_exception", Value::function("raise_exception", [](std::vector<Value>& args, const EnvPtr&) -> Value {
          throw TemplateRaise(args.empty() ? std::string() : raw_message(no_hole(args[0])));
        }));
  g.set("range", Value::function("range", range_fn));
  g.set("strftime_now", Value::function("strftime_now", strftime_now_fn));
  g.set("True", Value::from_bool(true));
  g.set("False", Value::from_bool(false));
  g.set("None", Value::null());
}

}  // namespace pypto::jinja
