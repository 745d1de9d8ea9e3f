#pragma once
// Tree-walking interpreter for parsed chat templates.
//
// Scoping, output assembly and error behaviour mirror @huggingface/jinja's runtime (the
// oracle): a for loop gets one scope for all its iterations, `set` writes into the current
// scope, macros run in a child of the *calling* scope, and `break`/`continue` discard the
// output of the interrupted iteration.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_value.h"

namespace pypto::jinja {

// A variable scope. Shared because a `caller` function keeps its defining scope alive.
struct Env {
  std::shared_ptr<Env> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(const std::string& name) const;
  Value lookup(const std::string& name) const;  // undefined when absent everywhere
  void set(const std::string& name, Value v);   // in this scope
};
using EnvPtr = std::shared_ptr<Env>;
EnvPtr make_env(EnvPtr parent);

// raise_exception(msg) from a template: its message is shown to the user as is.
class TemplateRaise : public Error {
 public:
  using Error::Error;
};

class Interpreter {
 public:
  ~Interpreter();

  // Renders a program with `global` as the outermost scope (context + built-in globals).
  // `global` must hold the built-ins: call install_globals(*global, interpreter.namespace_registry()).
  std::string run(const std::vector<NodePtr>& program, const EnvPtr& global);
  std::vector<std::shared_ptr<DictData>>* namespace_registry() { return &namespaces_; }

  Value eval(const Node& n, const EnvPtr& env);
  void exec_block(const std::vector<NodePtr>& stmts, const EnvPtr& env, std::string& out);
  // Evaluates call arguments: positional values (with *spread expanded), then keyword ones.
  std::pair<std::vector<Value>, Value> eval_args(const std::vector<NodePtr>& args, const EnvPtr& env);

 private:
  int depth_ = 0;       // macro nesting, bounded so a recursive macro fails instead of crashing
  int eval_depth_ = 0;  // expression/statement nesting at run time, bounded for the same reason
  // Namespaces created by this render: cleared at the end, since `{% set ns.me = ns %}` would
  // otherwise leak a reference cycle.
  std::vector<std::shared_ptr<DictData>> namespaces_;

  void exec(const Node& n, const EnvPtr& env, std::string& out);
  void exec_for(const Node& n, const EnvPtr& env, std::string& out);
  void exec_set(const Node& n, const EnvPtr& env);
  Value make_macro(const Node& n);
  Value exec_call_block(const Node& n, const EnvPtr& env);
  void bind_macro_args(const std::string& display, const Node& n, std::vector<Value> args, const EnvPtr& scope);
  Value eval_binary(const Node& n, const EnvPtr& env);
  Value eval_member(const Node& n, const EnvPtr& env);
  Value eval_slice(const Value& obj, const Node& slice, const EnvPtr& env);
};

// Built-in global variables and functions (true/false/none, raise_exception, range, ...).
// Namespaces created by namespace() are recorded in *namespaces.
void install_globals(Env& global, std::vector<std::shared_ptr<DictData>>* namespaces);

}  // namespace pypto::jinja
