#pragma once
// Syntax tree of a parsed chat template. One node struct for every construct; which fields a
// kind uses is listed next to it. The tree is immutable after parsing and shared by all
// concurrent renders.
#include <memory>
#include <string>
#include <vector>

namespace pypto::jinja {

enum class NodeKind {
  // statements
  Text,             // str: the text
  Comment,          //
  If,               // a: test; body; alt: else / elif branch
  For,              // a: loop target (Identifier or Tuple); b: iterable (maybe Select); body; alt: else
  Set,              // a: target; b: value (null for a block set); body: block set body
  Macro,            // str: name; args: parameters (Identifier / KwArg); body; uses_kwargs/varargs
  Break,            //
  Continue,         //
  CallBlock,        // a: the Call; args: caller parameters; body
  FilterBlock,      // str: filter; flag: call form; args: filter args; body
  // expressions
  IntLiteral,       // num
  FloatLiteral,     // num
  StringLiteral,    // str
  ArrayLiteral,     // args: elements
  TupleLiteral,     // args: elements
  ObjectLiteral,    // args: keys; body: values
  Identifier,       // str: name
  Member,           // a: object; b: property; flag: computed ([...] rather than .name)
  Slice,            // a, b, c: start, stop, step (each may be null)
  Call,             // a: callee; args
  Unary,            // str: "not" "-" "+"; a
  Binary,           // str: operator; a, b
  Filter,           // a: operand; str: filter name; flag: call form; args
  Test,             // a: operand; str: test name; flag: negated
  Select,           // a: value; b: condition (`x if c` without else; filters a for loop)
  Ternary,          // a: condition; b: if true; c: if false
  KwArg,            // str: name; a: value
  Spread,           // a  (*expr in a call)
  KwSpread,         // a  (**expr in a call)
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  NodeKind kind;
  int line = 0;
  std::string str;
  double num = 0;
  bool flag = false;
  bool uses_kwargs = false, uses_varargs = false;  // Macro / CallBlock
  NodePtr a, b, c;
  std::vector<NodePtr> args, body, alt;

  Node(NodeKind k, int l) : kind(k), line(l) {}
};

}  // namespace pypto::jinja
