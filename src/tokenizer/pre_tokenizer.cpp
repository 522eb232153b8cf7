#define PCRE2_CODE_UNIT_WIDTH 8
#include "src/tokenizer/pre_tokenizer.hpp"

#include <pcre2.h>

namespace strata::tokenizer {
namespace {

const char* const k_gpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
const char* const k_cjk = "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";

std::vector<std::string> patterns_for(std::string_view pre) {
  if (pre == "gpt-2" || pre == "default" || pre == "mpt" || pre == "olmo" || pre.empty()) return {k_gpt2};
  if (pre == "starcoder" || pre == "refact" || pre == "smollm" || pre == "command-r") return {"\\p{N}", k_gpt2};
  if (pre == "falcon") return {"[\\p{P}\\$\\+<=>\\^~\\|`]+", k_gpt2, "[0-9][0-9][0-9]"};
  if (pre == "deepseek-coder") return {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", k_cjk, "\\p{N}"};
  if (pre == "deepseek-llm")
    return {"[\\r\\n]", std::string("\\s?(?:(?!") + k_cjk + ")\\p{L})+", "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
            "\\s+$", k_cjk, "\\p{N}+"};
  if (pre == "qwen2" || pre == "deepseek-r1-qwen")
    return {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
  if (pre == "llama3" || pre == "llama-bpe" || pre == "smaug-bpe")
    return {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
  return {};
}

/// Length of the valid UTF-8 prefix of s.
std::size_t valid_utf8_prefix(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return i;
    for (std::size_t j = 1; j < n; ++j)
      if ((static_cast<unsigned char>(s[i + j]) & 0xC0) != 0x80) return i;
    i += n;
  }
  return i;
}

}  // namespace

struct pre_tokenizer::regex {
  pcre2_code* code = nullptr;
  ~regex() { pcre2_code_free(code); }
};

pre_tokenizer::~pre_tokenizer() = default;

result<std::unique_ptr<pre_tokenizer>> pre_tokenizer::create(std::string_view pre) {
  auto patterns = patterns_for(pre);
  if (patterns.empty()) return fail(errc::unsupported, "pre-tokenizer '", pre, "' is not supported");
  std::unique_ptr<pre_tokenizer> p(new pre_tokenizer());
  for (const auto& pat : patterns) {
    int err = 0;
    PCRE2_SIZE off = 0;
    auto r = std::make_unique<regex>();
    r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.c_str()), pat.size(), PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
    if (!r->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return fail(errc::unsupported, "pre-tokenizer '", pre, "': bad pattern at ", off, ": ", reinterpret_cast<char*>(msg));
    }
    pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);
    p->regexes_.push_back(std::move(r));
  }
  return p;
}

std::vector<std::string_view> pre_tokenizer::split(std::string_view text) const {
  // Invalid UTF-8 never reaches PCRE2: each invalid byte is a piece of its own.
  std::vector<std::string_view> pieces;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t ok = valid_utf8_prefix(text.substr(i));
    std::size_t n = ok > 0 ? ok : 1;
    pieces.push_back(text.substr(i, n));
    i += n;
  }
  for (const auto& re : regexes_) {
    std::vector<std::string_view> next;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    for (std::string_view piece : pieces) {
      if (valid_utf8_prefix(piece) != piece.size()) {
        next.push_back(piece);
        continue;
      }
      PCRE2_SIZE start = 0, last = 0;
      while (start <= piece.size()) {
        int rc = pcre2_match(re->code, reinterpret_cast<PCRE2_SPTR>(piece.data()), piece.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc < 0) break;
        PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        if (ov[1] == ov[0]) {  // empty match: step one character
          start = ov[0] + 1;
          while (start < piece.size() && (static_cast<unsigned char>(piece[start]) & 0xC0) == 0x80) ++start;
          continue;
        }
        if (ov[0] > last) next.push_back(piece.substr(last, ov[0] - last));
        next.push_back(piece.substr(ov[0], ov[1] - ov[0]));
        last = start = ov[1];
      }
      if (last < piece.size()) next.push_back(piece.substr(last));
    }
    pcre2_match_data_free(md);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace strata::tokenizer
