#pragma once
// Stop strings on the output side: fed the detokenized text as it grows, it finds a stop string
// even when it spans token boundaries (or several steps), trims it and everything after it (as
// OpenAI does), and holds back any tail that could still become a stop string, so streamed
// text never has to be taken back.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pypto {

class StopChecker {
 public:
  explicit StopChecker(std::vector<std::string> stop_strings);

  struct Result {
    std::string text;                   // text that may be released to the client now
    std::optional<size_t> stop_index;   // which stop string matched (index into the list)
    bool stopped() const { return stop_index.has_value(); }
  };

  // Appends newly decoded text. After a stop is found every later call returns nothing.
  Result append(std::string_view new_text);
  // The request finished for another reason: releases the held-back tail.
  std::string flush();

  size_t held_back() const { return pending_.size(); }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // decoded but not yet released
  bool stopped_ = false;
};

}  // namespace pypto
