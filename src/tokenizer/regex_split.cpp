#include "tokenizer/regex_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace pypto {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Per-thread match state: PCRE2 match data and a JIT stack big enough for long inputs (the
// default 32 KiB machine stack runs out on megabyte-long runs of one character class).
struct ThreadMatchState {
  pcre2_match_data* data = pcre2_match_data_create(16, nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  ThreadMatchState() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~ThreadMatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState& thread_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

struct RegexSplit::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplit::RegexSplit(const std::string& pattern, bool literal) : pattern_(pattern), compiled_(new Compiled) {
  uint32_t options = PCRE2_UTF | PCRE2_UCP;
  if (literal) options |= PCRE2_LITERAL;
  int err = 0;
  PCRE2_SIZE offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &err,
                                  &offset, nullptr);
  if (!compiled_->code) {
    fail("pre-tokenizer regex does not compile at offset ", offset, ": ", pcre2_message(err), " (pattern ",
         pattern, ")");
  }
  // JIT is an optimisation only: where the platform lacks it, pcre2_match interprets the
  // pattern and finds the same matches.
  (void)pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

RegexSplit::~RegexSplit() = default;

void RegexSplit::split(std::string_view text, std::vector<std::string_view>& out) const {
  ThreadMatchState& st = thread_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;   // where the next search starts
  size_t emitted = 0;  // end of the last piece handed out
  while (pos < text.size()) {
    // The text was validated as UTF-8 by the caller, so PCRE2 need not check it again.
    const int rc = pcre2_match(compiled_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, st.data, st.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail("pre-tokenizer regex failed on a ", text.size(), "-byte input: ", pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    const size_t start = ov[0];
    const size_t end = ov[1];
    if (end == start) {
      // An empty match yields no piece; step over one character so the search moves on.
      pos = start + 1;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (start > emitted) out.push_back(text.substr(emitted, start - emitted));
    out.push_back(text.substr(start, end - start));
    emitted = pos = end;
  }
  if (emitted < text.size()) out.push_back(text.substr(emitted));
}

}  // namespace pypto
