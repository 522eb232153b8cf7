#define PCRE2_CODE_UNIT_WIDTH 8
#include "src/tokenizer/pre_tokenizer.hpp"

#include <pcre2.h>

#include <algorithm>

#include "src/common/utf8.hpp"

namespace strata::tokenizer {
namespace {

// The regexes of each pre-tokenizer family, as the reference tokenizer applies them. Notes on
// spelling:
// - Case-insensitive contractions are spelled '[sS] rather than (?i:'s): with Unicode case
//   folding PCRE2 would also match U+017F (long s) and U+212A (Kelvin sign).
// - A regex with \p{..} runs with PCRE2_UCP (Unicode \s, \d, \w); one without runs without it,
//   so \s is ASCII whitespace there, as in the reference (std::wregex in the C locale).
// - $ is end-of-piece only (PCRE2_DOLLAR_ENDONLY), never before a final newline.
// - "Letter but not a-z" is spelled (?=\p{L})[^a-z], as the reference does (its regex engine
//   has no \p{Lu}); [\p{Lu}\p{Lt}..] would treat non-ASCII lower-case letters differently.
// - Lookahead such as \s+(?!\S), \p{N}{1,3}, \p{..} inside classes and possessive forms are
//   native PCRE2 and need no rewriting.
constexpr const char* k_gpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* k_contractions = R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))";
constexpr const char* k_llama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* k_qwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* k_cjk = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
// Cased letters of the Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee, Glagolitic, Coptic,
// Deseret, Osage, Old Hungarian, Warang Citi and Adlam scripts (no CJK, no uncased scripts).
constexpr const char* k_deepseek_letters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
    R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5})"
    R"(\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD})"
    R"(\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15})"
    R"(\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D})"
    R"(\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB})"
    R"(\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D})"
    R"(\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E})"
    R"(\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D})"
    R"(\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06})"
    R"(\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB})"
    R"(\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
constexpr const char* k_poro = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)";
constexpr const char* k_upper_then_lower = R"([^\r\n\p{L}\p{N}]?(?:(?=\p{L})[^a-z])*(?:(?=\p{L})[^A-Z])+)";
constexpr const char* k_upper_run = R"([^\r\n\p{L}\p{N}]?(?:(?=\p{L})[^a-z])+(?:(?=\p{L})[^A-Z])*)";

struct family {
  std::vector<std::string_view> names;
  std::vector<std::string> patterns;
  bool ignore_merges = false;
  bool adds_bos = false;
};

const std::vector<family>& families() {
  static const std::vector<family> all = [] {
    const std::string gpt2 = k_gpt2, c = k_contractions;
    std::vector<family> f;
    f.push_back({{"default", ""}, {R"([\p{P}\$\+<=>\^~\|]+)", gpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}});
    f.push_back({{"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"}, {k_llama3}, true, true});
    f.push_back({{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {k_llama3}});
    f.push_back({{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan", "grok-2"}, {k_qwen2}});
    f.push_back({{"gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "jina-es", "jina-de", "jina-v1-en", "jina-v2-es",
                  "jina-v2-de", "jina-v2-code", "roberta-bpe", "gigachat", "trillion", "granite-docling"},
                 {gpt2}});
    f.push_back({{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}, {R"(\p{N})", gpt2}});
    f.push_back({{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", gpt2, "[0-9][0-9][0-9]"}});
    f.push_back({{"deepseek-coder"}, {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", k_cjk, R"(\p{N})"}});
    f.push_back({{"deepseek-llm"},
                 {R"([\r\n])", k_deepseek_letters, R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)",
                  R"(\s+$)", k_cjk, R"(\p{N}+)"}});
    f.push_back({{"deepseek-v3"},
                 {R"(\p{N}{1,3})", R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
                  R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}});
    f.push_back({{"poro-chat", "bloom", "gpt3-finnish"}, {k_poro}});
    f.push_back({{"viking"}, {k_poro, R"(\p{N})"}});
    f.push_back({{"tekken"},
                 {std::string(k_upper_then_lower) + "|" + k_upper_run + R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
                 true, true});
    f.push_back({{"gpt-4o"},
                 {std::string(k_upper_then_lower) + c + "?|" + k_upper_run + c + R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}});
    f.push_back({{"seed-coder"}, {c + R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"}});
    return f;
  }();
  return all;
}

/// Per-thread matching state: a JIT stack larger than PCRE2's 32 KiB default, so that long runs of
/// one class never fail to match.
struct match_state {
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_match_data* data = pcre2_match_data_create(4, nullptr);
  match_state() {
    if (stack) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~match_state() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
  match_state(const match_state&) = delete;
  match_state& operator=(const match_state&) = delete;
};

match_state& thread_state() {
  thread_local match_state s;
  return s;
}

}  // namespace

struct pre_tokenizer::regex {
  pcre2_code* code = nullptr;
  ~regex() { pcre2_code_free(code); }
};

pre_tokenizer::~pre_tokenizer() = default;

result<std::unique_ptr<pre_tokenizer>> pre_tokenizer::create(std::string_view name) {
  const family* fam = nullptr;
  for (const auto& f : families())
    for (std::string_view n : f.names)
      if (name == n) fam = &f;
  if (!fam) return fail(errc::not_found, "pre-tokenizer '", name, "' is not known");
  std::unique_ptr<pre_tokenizer> p(new pre_tokenizer());
  p->ignore_merges_ = fam->ignore_merges;
  p->adds_bos_ = fam->adds_bos;
  for (const auto& pat : fam->patterns) {
    std::uint32_t options = PCRE2_UTF | PCRE2_DOLLAR_ENDONLY;
    if (pat.find("\\p{") != std::string::npos) options |= PCRE2_UCP;
    int err = 0;
    PCRE2_SIZE off = 0;
    auto r = std::make_unique<regex>();
    r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(), options, &err, &off, nullptr);
    if (!r->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return fail(errc::unsupported, "pre-tokenizer '", name, "': pattern does not compile at ", off, ": ", reinterpret_cast<char*>(msg));
    }
    pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);  // without JIT (unsupported CPU) matching still works
    p->regexes_.push_back(std::move(r));
  }
  return p;
}

void pre_tokenizer::apply(const regex& re, std::string_view piece, std::vector<std::string_view>& out) const {
  match_state& st = thread_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  PCRE2_SIZE start = 0, last = 0;
  while (start <= piece.size()) {
    int rc = pcre2_match(re.code, subject, piece.size(), start, PCRE2_NO_UTF_CHECK, st.data, st.context);
    if (rc < 0) break;  // no further match (a resource error leaves the rest as one piece)
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    if (ov[1] == ov[0]) {  // an empty match splits nothing: move on one character
      start = ov[0] + (ov[0] < piece.size() ? utf8::lead_length(static_cast<unsigned char>(piece[ov[0]])) : 1);
      continue;
    }
    if (ov[0] > last) out.push_back(piece.substr(last, ov[0] - last));
    out.push_back(piece.substr(ov[0], ov[1] - ov[0]));
    last = start = ov[1];
  }
  if (last < piece.size()) out.push_back(piece.substr(last));
}

void pre_tokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  std::vector<std::string_view> pieces, next;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t ok = utf8::valid_prefix(text.substr(i));
    std::size_t n = ok > 0 ? ok : 1;
    pieces.push_back(text.substr(i, n));
    i += n;
  }
  for (const auto& re : regexes_) {
    next.clear();
    for (std::string_view piece : pieces) {
      if (piece.size() == 1 && static_cast<unsigned char>(piece[0]) >= 0x80) next.push_back(piece);  // an invalid byte
      else apply(*re, piece, next);
    }
    pieces.swap(next);
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

}  // namespace strata::tokenizer
