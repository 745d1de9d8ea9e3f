#pragma once
// Parser for the chat-template Jinja subset: tokens -> syntax tree.
//
// Grammar and operator precedence are @huggingface/jinja's (the oracle), which differ from
// Python Jinja2 in places (e.g. `is` tests bind tighter than `*`). Beyond the oracle, parse()
// also rejects what the interpreter cannot run - unknown filters, tests, methods and functions,
// invalid assignment targets - naming the construct and its line, so a model whose template we
// cannot render fails when it loads rather than on a request.
#include <vector>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_lexer.h"

namespace pypto::jinja {

// Throws pypto::Error("chat template line N: ...").
std::vector<NodePtr> parse(const std::vector<Token>& tokens);

}  // namespace pypto::jinja
