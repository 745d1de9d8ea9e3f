// The parity corpus. Every family of input that has tripped byte-level BPE tokenizers is here:
// prose, code, many scripts, emoji sequences, text that NFC changes, whitespace runs and CRLF,
// contractions in both cases, digits, added tokens written inside text, very long strings and
// random code points from every plane.
//
// The random generator is our own SplitMix64 with our own range reduction (std:: distributions
// differ between standard libraries), so the corpus is byte-identical everywhere.
//
// Code points left out on purpose, because the oracle's JavaScript regex engine and Hugging
// Face's (Oniguruma) disagree on them and the oracle would then not stand for Hugging Face:
//   U+FEFF  JavaScript \s includes it; Oniguruma's and PCRE2's \s do not.
//   U+0085  Oniguruma's and PCRE2's \s include it; JavaScript's does not.
//   U+017F  (?i) matches it to 's' in Oniguruma and PCRE2; the oracle's hand-expanded [sS] does
//           not.
// and U+180E, which PCRE2's \s includes (via \h) but neither other engine does. Code points
// that PCRE2 or utf8proc consider unassigned are left out too: Debian's PCRE2 10.42 knows
// Unicode 14, its utf8proc Unicode 15 and Node 20 Unicode 17, so a character added since is a
// letter or digit to the oracle but "unassigned" to us (HF's Oniguruma has its own version).
#include "tokenizer/corpus.h"
#include "tokenizer/jinja_text.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <array>
#include <cstdint>
#include <string_view>

namespace pypto::test {
namespace {

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (the bias of a plain modulo is irrelevant here; determinism is not).
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
  size_t range(size_t lo, size_t hi) { return lo + below(hi - lo + 1); }
  bool chance(int percent) { return below(100) < static_cast<size_t>(percent); }
  template <typename T, size_t N>
  const T& pick(const std::array<T, N>& a) { return a[below(N)]; }

 private:
  uint64_t s_;
};

void put(std::string& out, char32_t cp) { jinja::append_utf8(out, cp); }

// Whether PCRE2's Unicode tables know the code point (it is not in \p{Cn}).
bool pcre2_assigned(char32_t cp) {
  static pcre2_code* cn = [] {
    int err;
    PCRE2_SIZE off;
    return pcre2_compile(reinterpret_cast<PCRE2_SPTR>("\\p{Cn}"), PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err, &off, nullptr);
  }();
  static pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  std::string s;
  put(s, cp);
  return pcre2_match(cn, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, md, nullptr) < 0;
}

const std::array<std::string_view, 64> kWords = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
    "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you",
    "were", "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will",
    "would", "who", "so", "no", "tokenizer", "serving", "continuous", "batching", "Hugging", "Face",
    "attention", "cache", "GPU", "throughput", "latency", "prefix", "Qwen3", "model's", "don't", "naïve"};

const std::array<std::string_view, 12> kPunct = {".", ",", ";", ":", "!", "?", "...", " -", " —", "\"", "'", ")"};

std::string prose(Rng& r, size_t words) {
  std::string s;
  bool cap = true;
  for (size_t i = 0; i < words; ++i) {
    std::string w(r.pick(kWords));
    if (cap && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 32);
    if (r.chance(3)) {
      for (char& c : w) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
    }
    cap = false;
    if (i) s += ' ';
    s += w;
    if (r.chance(12)) {
      s += r.pick(kPunct);
      cap = s.back() == '.' || s.back() == '!' || s.back() == '?';
    }
  }
  s += '.';
  return s;
}

const std::array<std::string_view, 12> kCode = {
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "#include <vector>\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\tfor (auto& x : v) x *= 2;\n\treturn 0;\n}\n",
    "const add = (a, b) => a + b;\nconsole.log(`sum=${add(1, 2)}`); // => 3\n",
    "fn main() {\n    let s: Vec<u8> = b\"hi\".to_vec();\n    println!(\"{:?}\", s);\n}\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello, 世界\")\n}\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;\n",
    "<div class=\"box\"><p>Hello&nbsp;world</p><br/></div>\r\n",
    "{\"model\": \"qwen3\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"stream\": true}",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo \"$f\" | tr a-z A-Z; done\n",
    "x = [i**2 for i in range(10) if i % 2 == 0]  # squares\n\n\n",
    "public static void main(String[] args) { System.out.println(args.length); }\n",
    "    \t  if (a&&b||!c) { return a->b.c[0] >> 2; }   \r\n"};

std::string identifier(Rng& r) {
  static constexpr std::string_view kChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789";
  std::string s(1, kChars[r.below(53)]);
  for (size_t n = r.range(0, 14); n > 0; --n) s += kChars[r.below(kChars.size())];
  return s;
}

std::string code(Rng& r) {
  std::string s(r.pick(kCode));
  if (r.chance(60)) {
    const std::string indent = r.chance(50) ? std::string(r.range(1, 12), ' ') : std::string(r.range(1, 4), '\t');
    s += indent + identifier(r) + " = " + identifier(r) + "(" + std::to_string(r.below(100000)) + ");\n";
  }
  if (r.chance(30)) s += r.pick(kCode);
  return s;
}

// Sample phrases of many scripts; random characters of each script are added below.
const std::array<std::string_view, 24> kScripts = {
    "我们今天讨论大型语言模型的推理服务。", "日本語のテキストも正しく処理する必要があります。", "カタカナとひらがな、漢字が混ざる文章",
    "한국어 문장도 토큰화해야 합니다. 안녕하세요!", "مرحبا بالعالم، هذا نص عربي للاختبار.", "नमस्ते दुनिया, यह हिंदी पाठ है।",
    "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ", "Привет, мир! Это русский текст.", "Γειά σου κόσμε, ελληνικά.",
    "שלום עולם, זה טקסט בעברית.", "Tiếng Việt có nhiều dấu thanh: ầ ẫ ặ ỹ.", "Ελληνικά και Русский mixed with English",
    "中文，标点符号：“引号”、《书名号》……", "ＦＵＬＬＷＩＤＴＨ　ｔｅｘｔ　１２３", "தமிழ் மொழி உரை", "বাংলা ভাষার লেখা",
    "ગુજરાતી લખાણ", "ქართული ენა", "Հայերեն լեզու", "ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ", "አማርኛ ጽሑፍ", "ខ្មែរ ភាសា", "ລາວ ພາສາ",
    "Español: ¿Qué tal? ¡Muy bien! Ñandú, pingüino."};

struct Block {
  char32_t lo, hi;
};
const std::array<Block, 14> kScriptBlocks = {{{0x4E00, 0x9FA5},
                                              {0x3041, 0x3096},
                                              {0x30A1, 0x30FA},
                                              {0xAC00, 0xD7A3},
                                              {0x0621, 0x064A},
                                              {0x0905, 0x0939},
                                              {0x0E01, 0x0E3A},
                                              {0x0410, 0x044F},
                                              {0x0391, 0x03C9},
                                              {0x05D0, 0x05EA},
                                              {0x0B85, 0x0BB9},
                                              {0x0980, 0x09B9},
                                              {0x1100, 0x1112},
                                              {0x0E40, 0x0E4E}}};

std::string multilingual(Rng& r) {
  std::string s(r.pick(kScripts));
  const Block b = r.pick(kScriptBlocks);
  for (size_t n = r.range(0, 40); n > 0; --n) {
    const char32_t cp = b.lo + static_cast<char32_t>(r.below(b.hi - b.lo + 1));
    if (utf8proc_category(static_cast<utf8proc_int32_t>(cp)) != UTF8PROC_CATEGORY_CN && pcre2_assigned(cp)) put(s, cp);
    if (r.chance(10)) s += r.chance(50) ? " " : "，";
  }
  if (r.chance(40)) {
    s += ' ';
    s += prose(r, r.range(1, 8));
  }
  return s;
}

// Emoji: modifiers, ZWJ sequences, flags, keycaps, variation selectors, tags.
const std::array<std::string_view, 20> kEmoji = {
    "👍", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "🇺🇸🇬🇧", "1️⃣", "❤️", "❤︎", "🧑🏿‍🤝‍🧑🏻", "🏴󠁧󠁢󠁳󠁣󠁴󠁿",
    "😀😃😄", "🤖", "✅", "🔥🔥🔥", "👋🏻👋🏼👋🏽👋🏾👋🏿", "🫠", "☺️", "👁️‍🗨️"};

std::string emoji(Rng& r) {
  std::string s;
  for (size_t n = r.range(1, 8); n > 0; --n) {
    if (r.chance(50)) s += r.pick(kWords);
    s += r.chance(30) ? "" : " ";
    s += r.pick(kEmoji);
  }
  if (r.chance(30)) {
    put(s, 0x1F466 + static_cast<char32_t>(r.below(4)));  // boy/girl/man/woman
    put(s, 0x1F3FB + static_cast<char32_t>(r.below(5)));  // skin tone
  }
  return s;
}

// Text that NFC changes or must leave alone.
const std::array<std::string_view, 20> kNfc = {
    "e\u0301", "E\u0300", "a\u0308o\u0308u\u0308", "n\u0303", "c\u0327a", "A\u030A", "\u212B", "\u2126",
    "\u1100\u1161\u11A8", "\u1112\u1161\u11AB", "q\u0307\u0323", "q\u0323\u0307", "s\u0323\u0307", "\u1E9B\u0323",
    "\uF900\uF901", "\u0958", "\u00C5\u030A", "Ω\u0301", "\u0344", "\u0F73"};

std::string nfc_sensitive(Rng& r) {
  std::string s;
  for (size_t n = r.range(1, 10); n > 0; --n) {
    if (r.chance(40)) s += r.pick(kWords);
    s += r.pick(kNfc);
    if (r.chance(30)) {  // stacks of combining marks in random order
      for (size_t k = r.range(1, 4); k > 0; --k) put(s, 0x0300 + static_cast<char32_t>(r.below(0x70)));
    }
    if (r.chance(50)) s += ' ';
  }
  return s;
}

const std::array<std::string_view, 16> kSpaces = {" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n",
                                                  "\r", " \n", "\n ", " \t\n", "\u00A0", "\u3000", "\u2003"};

std::string whitespace(Rng& r) {
  std::string s;
  if (r.chance(30)) s += r.pick(kSpaces);
  for (size_t n = r.range(1, 12); n > 0; --n) {
    s += r.chance(70) ? std::string(r.pick(kWords)) : std::string(r.pick(kPunct));
    for (size_t k = r.range(1, 3); k > 0; --k) s += r.pick(kSpaces);
  }
  if (r.chance(30)) s += std::string(r.range(1, 40), ' ');
  return s;
}

const std::array<std::string_view, 24> kContractions = {"'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'rE",
                                                        "'ve", "'VE", "'Ve", "'m", "'M", "'ll", "'LL", "'Ll",
                                                        "'d", "'D", "’s", "’ll", "''", "'", "' s", "'x"};

std::string contractions(Rng& r) {
  std::string s;
  for (size_t n = r.range(1, 8); n > 0; --n) {
    std::string w(r.pick(kWords));
    if (r.chance(40)) {
      for (char& c : w) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
    }
    s += w;
    s += r.pick(kContractions);
    if (r.chance(20)) s += r.pick(kContractions);
    s += r.chance(80) ? " " : "\n";
  }
  return s;
}

std::string digits(Rng& r) {
  std::string s;
  for (size_t n = r.range(1, 8); n > 0; --n) {
    switch (r.below(8)) {
      case 0: s += std::to_string(r.next()); break;
      case 1: s += std::to_string(r.below(1000)) + "." + std::to_string(r.below(100000)); break;
      case 2: s += "+1 (" + std::to_string(r.range(200, 999)) + ") 555-" + std::to_string(r.range(1000, 9999)); break;
      case 3:
        s += 'v';
        s += std::to_string(r.below(10)) + "." + std::to_string(r.below(20)) + "rc" + std::to_string(r.below(5));
        break;
      case 4: s += "１２３４５"; break;                 // fullwidth
      case 5: s += "٠١٢٣٤٥٦٧٨٩ ۱۲۳"; break;           // Arabic-Indic
      case 6: s += "x² + y³ = ½ ⅓ Ⅻ ①②"; break;       // other number categories
      default: s += "1e-9 0x1F 1_000_000 3,141.59"; break;
    }
    s += r.chance(50) ? " " : "";
  }
  return s;
}

const std::array<std::string_view, 16> kSpecial = {
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
    "<|fim_prefix|>", "<|vision_pad|>", "<tool_response>", "<|im_sta", "<|im_end", "|>", "<|",
    "<<|im_end|>>", "<|IM_START|>"};

std::string special_in_text(Rng& r) {
  std::string s;
  for (size_t n = r.range(1, 8); n > 0; --n) {
    switch (r.below(4)) {
      case 0: s += r.pick(kSpecial); break;
      case 1: s += std::string(r.pick(kSpecial)) + std::string(r.pick(kSpecial)); break;
      case 2: s += std::string(r.pick(kSpaces)) + std::string(r.pick(kSpecial)) + std::string(r.pick(kSpaces)); break;
      default: s += prose(r, r.range(1, 6)); break;
    }
  }
  if (r.chance(30)) s = "<|im_start|>user\n" + s + "<|im_end|>\n<|im_start|>assistant\n";
  return s;
}

bool excluded(char32_t cp) {
  if (cp == 0xFEFF || cp == 0x0085 || cp == 0x017F || cp == 0x180E) return true;
  if (cp >= 0xD800 && cp <= 0xDFFF) return true;  // surrogates are not characters
  return false;
}

// A code point assigned in both PCRE2's and utf8proc's Unicode version (or a private-use one, or
// a permanent noncharacter, which every version agrees on), drawn from all planes.
char32_t random_code_point(Rng& r) {
  for (;;) {
    char32_t cp;
    switch (r.below(6)) {
      case 0: cp = static_cast<char32_t>(r.range(0x20, 0x7E)); break;
      case 1: cp = static_cast<char32_t>(r.range(0x80, 0x7FF)); break;
      case 2: cp = static_cast<char32_t>(r.range(0x800, 0xFFFF)); break;
      case 3: cp = static_cast<char32_t>(r.range(0x10000, 0x1FFFF)); break;
      case 4: cp = static_cast<char32_t>(r.range(0x20000, 0x10FFFF)); break;
      default: cp = static_cast<char32_t>(r.range(0, 0x1F)); break;  // control characters
    }
    if (excluded(cp)) continue;
    const bool nonchar = (cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE;
    if (nonchar) return cp;
    if (utf8proc_category(static_cast<utf8proc_int32_t>(cp)) != UTF8PROC_CATEGORY_CN && pcre2_assigned(cp)) return cp;
  }
}

std::string random_unicode(Rng& r) {
  std::string s;
  for (size_t n = r.range(1, 60); n > 0; --n) put(s, random_code_point(r));
  return s;
}

std::string long_string(Rng& r) {
  const size_t target = r.range(10000, 120000);
  std::string s;
  switch (r.below(6)) {
    case 0: while (s.size() < target) s += prose(r, 50) + (r.chance(20) ? "\n\n" : " "); break;
    case 1: s.assign(target, "aeiouxyz"[r.below(8)]); break;  // one long word: worst case for BPE
    case 2: while (s.size() < target) s += multilingual(r); break;
    case 3: while (s.size() < target) s += std::to_string(r.next()); break;
    case 4: while (s.size() < target) s += r.pick(kSpaces); break;
    default: while (s.size() < target) s += code(r); break;
  }
  return s;
}

// Fixed cases worth naming one by one.
const std::array<std::string_view, 24> kFixed = {
    "", " ", "  ", "\n", "\r\n", "\t", "a", "Hello world", "Hello  world", " leading space", "trailing space ",
    "I'm here, you're there, it's fine. I'LL GO. WE'VE DONE IT. Don'T", "<|im_start|>", "<|im_start|><|im_end|>",
    "<|endoftext|>hello<|endoftext|>", "text<think>\nreasoning\n</think>\n\nanswer", "café vs cafe\u0301",
    "\u00e9\u0301", "1234567890", "   \n\n   \n", "\r\r\n\n\r", "ǅemal ǈ ǋ", "İstanbul ıi", "ß ẞ ﬁ ﬂ ﬃ"};

}  // namespace

std::vector<std::string> tokenizer_corpus() {
  Rng r(20260529);
  std::vector<std::string> corpus(kFixed.begin(), kFixed.end());
  for (int i = 0; i < 250; ++i) {
    corpus.push_back(prose(r, r.range(3, 120)));
    corpus.push_back(code(r));
    corpus.push_back(multilingual(r));
    corpus.push_back(emoji(r));
    corpus.push_back(nfc_sensitive(r));
    corpus.push_back(whitespace(r));
    corpus.push_back(contractions(r));
    corpus.push_back(digits(r));
    corpus.push_back(special_in_text(r));
    corpus.push_back(random_unicode(r));
    if (i % 10 == 0) corpus.push_back(long_string(r));
    if (i % 3 == 0) {  // a mix of everything in one string
      corpus.push_back(prose(r, 5) + code(r) + multilingual(r) + emoji(r) + nfc_sensitive(r) + whitespace(r) +
                       special_in_text(r) + random_unicode(r));
    }
  }
  return corpus;
}

}  // namespace pypto::test
