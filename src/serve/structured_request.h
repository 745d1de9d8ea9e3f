#pragma once
// From a request's response_format / structured_outputs / tools + tool_choice to the compiled
// grammar the engine enforces (EngineRequest::grammar) and when it applies. Runs on the HTTP
// thread before anything is queued: an invalid or unsupported constraint is a 400 naming it,
// and nothing is generated unconstrained in its place.
//
// Tool calls are constrained in Qwen3's own format:
//   <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
// with NAME one of the declared functions and ARGS valid under its `parameters` schema:
//   "required"  the output is one call (several, separated by "\n", when parallel_tool_calls);
//   named       the output is exactly one call to that function;
//   "auto"      free text; once the model writes the <tool_call> token the rest of the call is
//               constrained (a lazy grammar), once only when parallel_tool_calls is false.
// With reasoning the constraint starts after </think> (see MatcherOptions).
#include <memory>
#include <optional>

#include "serve/openai_protocol.h"
#include "structured/compiled_grammar.h"
#include "structured/matcher.h"

namespace pypto {

struct ServerState;

struct StructuredSetup {
  std::shared_ptr<const structured::CompiledGrammar> grammar;  // null: unconstrained
  structured::MatcherOptions options;
};

// `reasoning`: whether the output may start with (or inside) a reasoning block, from the prompt
// (serve/reasoning_parser.h): 0 = no, 1 = may open <think>, 2 = starts inside it.
StructuredSetup structured_for_request(ServerState& s, const GenerationFields& g, const ChatRequest* chat,
                                       int reasoning);

}  // namespace pypto
