#pragma once
// What the chat handler needs from a tool-call parser, whatever format the model writes calls
// in: feed content deltas as they are released, get content and OpenAI call deltas back. Two
// formats implement it: Qwen3's JSON body (serve/tool_parser.h) and the XML body of Qwen3-Coder
// and Qwen3.5/3.6 (serve/xml_tool_parser.h); serve/tool_format.h picks one per server.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pypto {

class ToolCallStream {
 public:
  struct Call {
    int32_t index = 0;  // dense from 0, in output order
    std::string id;     // "call_..." from make_id
    std::string name;
    std::string arguments;  // JSON text of an object (see each parser for a broken call)
  };
  // One piece of a call, OpenAI's streaming shape: the first piece of each call opens it (id and
  // name set, no arguments); later pieces carry argument text to append.
  struct CallDelta {
    int32_t index = 0;
    bool opens = false;
    std::string id, name;  // set when `opens`
    std::string arguments;
  };
  struct Delta {
    std::string content;
    std::vector<CallDelta> calls;  // in order
  };

  virtual ~ToolCallStream() = default;
  virtual Delta append(std::string_view text) = 0;
  // The output ended: releases what was held back.
  virtual Delta flush() = 0;
  virtual const std::vector<Call>& calls() const = 0;
};

}  // namespace pypto
