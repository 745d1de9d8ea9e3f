#pragma once
// A JSON syntax checker fed one byte at a time (RFC 8259 grammar, no UTF-8 validation): it tells
// whether the text so far is still a prefix of some JSON value, and which bytes are insignificant
// whitespace. The tool-call parser uses it to stream a call's arguments as they are written:
// every byte it accepts is final (a later error does not take it back), and the whitespace it
// flags is dropped, so the streamed arguments are the model's JSON written compactly.
#include <cstdint>
#include <string_view>
#include <vector>

namespace pypto {

class JsonPrefix {
 public:
  enum class Step {
    Ok,     // the byte is part of the value
    Space,  // whitespace between tokens: insignificant
    Done,   // the byte closed the top-level value (nothing more may follow)
    Bad,    // the byte cannot continue any JSON value (the checker is unchanged)
  };

  // The next byte is the first byte of a value.
  JsonPrefix() = default;
  // The opening '{' of an object has been read already.
  static JsonPrefix inside_object();

  Step feed(char c);
  bool done() const { return s_ == S::Done; }

 private:
  enum class S : uint8_t {
    Value, ValueOrEnd, KeyOrEnd, Key, Colon, AfterValue,
    Str, StrEsc, StrHex, Lit,
    NumSign, NumZero, NumInt, NumDot, NumFrac, NumE, NumESign, NumExp,
    Done,
  };
  Step close();
  Step end_number(char c);

  std::vector<char> stack_;  // open containers, '{' or '['
  S s_ = S::Value;
  bool key_ = false;           // the string being read is an object key
  int hex_ = 0;                // \u digits read
  std::string_view lit_rest_;  // the rest of true / false / null
};

}  // namespace pypto
