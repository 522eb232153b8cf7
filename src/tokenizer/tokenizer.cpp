#include "src/tokenizer/tokenizer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>

#include "src/common/utf8.hpp"
#include "src/tokenizer/byte_level.hpp"
#include "src/tokenizer/pre_tokenizer.hpp"

namespace strata::tokenizer {
namespace {

constexpr std::string_view k_space_marker = "\xE2\x96\x81";  // U+2581, SentencePiece's space

/// Token texts that end a turn in common chat formats; each found in the vocabulary ends generation.
constexpr std::string_view k_end_of_turn[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
    "<|end_of_text|>", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "<|return|>", "<|call|>"};

/// Texts of end-of-generation tokens that llama.cpp treats as control tokens whatever type the
/// file gives them: they stay text unless parse_special (phi-3's "</s>" is user-defined in the
/// file, yet llama.cpp matches it only with parse_special).
constexpr std::string_view k_control_by_text[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
    "<|end_of_text|>", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "<|return|>", "<|call|>",
    "</s>", "[EOT]", "[EOS]", "<end_of_utterance>"};

/// Phi-3 vocabularies (by general.name, as llama.cpp decides it) drop the whitespace after a
/// special token matched in text, except after these.
constexpr std::string_view k_phi3_keeps_space_after[] = {"<unk>", "<s>", "<|endoftext|>"};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

tokenizer::tokenizer(tokenizer&&) noexcept = default;
tokenizer& tokenizer::operator=(tokenizer&&) noexcept = default;
tokenizer::~tokenizer() = default;

result<tokenizer> tokenizer::from_gguf(const model::gguf_file& f) {
  tokenizer t;
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model) return fail(errc::corrupt_data, "tokenizer.ggml.model is missing");
  t.model_ = std::string(*model);
  if (t.model_ != "llama" && t.model_ != "gpt2")
    return fail(errc::unsupported, "tokenizer model '", t.model_, "' is not supported (llama and gpt2 are)");
  const bool spm = t.model_ == "llama";

  auto toks = f.get_string_array("tokenizer.ggml.tokens");
  if (!toks || toks->empty()) return fail(errc::corrupt_data, "tokenizer.ggml.tokens is missing or empty");
  const std::size_t n = toks->size();
  if (n >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    return fail(errc::corrupt_data, "tokenizer.ggml.tokens has ", n, " entries");
  std::size_t total = 0;
  for (auto s : *toks) total += s.size();
  if (total >= std::numeric_limits<std::uint32_t>::max()) return fail(errc::corrupt_data, "tokenizer.ggml.tokens is too large");
  t.text_.reserve(total);
  t.offsets_.reserve(n + 1);
  for (auto s : *toks) {
    t.offsets_.push_back(static_cast<std::uint32_t>(t.text_.size()));
    t.text_.insert(t.text_.end(), s.begin(), s.end());
  }
  t.offsets_.push_back(static_cast<std::uint32_t>(t.text_.size()));

  // Scores and types are optional, but when present they must be arrays of one number per token.
  t.scores_.assign(n, 0.0f);
  if (f.has("tokenizer.ggml.scores")) {
    auto elem = f.array_type("tokenizer.ggml.scores");
    auto sc = f.get_float_array("tokenizer.ggml.scores");
    if (!sc || (elem != model::gguf_type::f32 && elem != model::gguf_type::f64))
      return fail(errc::corrupt_data, "tokenizer.ggml.scores must be an array of f32");
    if (sc->size() != n) return fail(errc::corrupt_data, "tokenizer.ggml.scores has ", sc->size(), " entries for ", n, " tokens");
    t.scores_ = std::move(*sc);
  }
  t.types_.assign(n, token_type::normal);
  if (f.has("tokenizer.ggml.token_type")) {
    auto ty = f.get_int_array("tokenizer.ggml.token_type");
    if (!ty || f.array_type("tokenizer.ggml.token_type") == model::gguf_type::boolean)
      return fail(errc::corrupt_data, "tokenizer.ggml.token_type must be an array of integers");
    if (ty->size() != n) return fail(errc::corrupt_data, "tokenizer.ggml.token_type has ", ty->size(), " entries for ", n, " tokens");
    for (std::size_t i = 0; i < n; ++i) {
      std::int64_t v = (*ty)[i];
      t.types_[i] = v >= 1 && v <= 6 ? static_cast<token_type>(v) : token_type::normal;
    }
  }
  t.index_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) t.index_[t.token_text(static_cast<std::int32_t>(i))] = static_cast<std::int32_t>(i);  // a repeated string maps to its last id

  // A special id the metadata gives must name a token (-1: none); a file that says otherwise is
  // corrupt. The padding id is the exception, as in llama.cpp: nothing is generated or parsed
  // with it, and one outside the vocabulary means none. SentencePiece vocabularies follow LLaMA's
  // conventions unless the metadata says otherwise.
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                          "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (!f.has(key)) continue;
    auto v = f.get_int(key);
    if (!v || f.type_of(key) == model::gguf_type::boolean) return fail(errc::corrupt_data, key, " is not an integer");
    if (*v < -1 || *v >= static_cast<std::int64_t>(n))
      return fail(errc::corrupt_data, key, " = ", *v, " is outside the vocabulary of ", n, " tokens");
  }
  auto id_of = [&](const char* key, std::int32_t fallback) {
    auto v = f.get_int(key);
    std::int32_t id = v ? static_cast<std::int32_t>(*v) : fallback;
    return id >= 0 && static_cast<std::size_t>(id) < n ? id : -1;
  };
  t.bos_ = id_of("tokenizer.ggml.bos_token_id", spm ? 1 : -1);
  t.eos_ = id_of("tokenizer.ggml.eos_token_id", spm ? 2 : -1);
  t.unk_ = id_of("tokenizer.ggml.unknown_token_id", spm ? 0 : -1);
  t.eot_ = id_of("tokenizer.ggml.eot_token_id", -1);
  t.pad_ = id_of("tokenizer.ggml.padding_token_id", -1);
  t.add_space_prefix_ = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(spm);
  if (auto ct = f.get_string("tokenizer.chat_template")) t.chat_template_ = std::string(*ct);

  t.byte_tokens_.fill(-1);
  bool default_add_bos = spm;
  if (spm) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      t.byte_tokens_[static_cast<std::size_t>(b)] = t.find(name);
    }
    // When no token has U+2581 right after another character, no merge crosses the start of a
    // word, and each word can be merged on its own (same result, much smaller queues).
    t.spm_words_independent_ = true;
    for (std::int32_t i = 0; i < static_cast<std::int32_t>(n) && t.spm_words_independent_; ++i) {
      std::string_view s = t.token_text(i);
      for (std::size_t p = s.find(k_space_marker, 1); p != std::string_view::npos; p = s.find(k_space_marker, p + 1)) {
        if (p >= 3 && s.substr(p - 3, 3) == k_space_marker) continue;  // inside a run of U+2581
        t.spm_words_independent_ = false;
        break;
      }
    }
  } else {
    auto r = t.load_bpe(f);
    if (!r) return std::move(r).err();
    default_add_bos = t.pre_tokenizer_->adds_bos();
  }
  t.add_bos_ = f.get_bool("tokenizer.ggml.add_bos_token").value_or(default_add_bos);
  t.add_eos_ = f.get_bool("tokenizer.ggml.add_eos_token").value_or(false);

  for (std::string_view name : k_control_by_text)
    if (std::int32_t id = t.find(name); id >= 0) t.types_[static_cast<std::size_t>(id)] = token_type::control;

  // Special tokens, matched in text before the rest is tokenized: bucketed by first byte, longest first.
  t.rstrip_.assign(n, false);
  std::string name(f.get_string("general.name").value_or(""));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool phi3 = name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos;
  for (std::size_t i = 0; i < n; ++i) {
    token_type ty = t.types_[i];
    auto text = t.token_text(static_cast<std::int32_t>(i));
    if ((ty == token_type::control || ty == token_type::user_defined || ty == token_type::unknown) && !text.empty()) {
      t.specials_[static_cast<unsigned char>(text[0])].push_back(static_cast<std::int32_t>(i));
      t.rstrip_[i] = phi3 && std::find(std::begin(k_phi3_keeps_space_after), std::end(k_phi3_keeps_space_after), text) ==
                                 std::end(k_phi3_keeps_space_after);
    }
  }
  for (auto& bucket : t.specials_)
    std::stable_sort(bucket.begin(), bucket.end(), [&](std::int32_t a, std::int32_t b) { return t.token_text(a).size() > t.token_text(b).size(); });

  for (std::int32_t id : {t.eos_, t.eot_, id_of("tokenizer.ggml.eom_token_id", -1)})
    if (id >= 0) t.eog_.push_back(id);
  for (std::string_view s : k_end_of_turn)
    if (std::int32_t id = t.find(s); id >= 0 && t.types_[static_cast<std::size_t>(id)] != token_type::normal) t.eog_.push_back(id);
  std::sort(t.eog_.begin(), t.eog_.end());
  t.eog_.erase(std::unique(t.eog_.begin(), t.eog_.end()), t.eog_.end());
  return t;
}

result<void> tokenizer::load_bpe(const model::gguf_file& f) {
  std::string pre(f.get_string("tokenizer.ggml.pre").value_or("default"));
  auto p = pre_tokenizer::create(pre);
  if (!p && p.err().code == errc::not_found) {
    spdlog::warn("tokenizer: pre-tokenizer '{}' is not known; using the default one", pre);
    pre = "default";
    p = pre_tokenizer::create(pre);
  }
  if (!p) return std::move(p).err();
  pre_ = pre;
  pre_tokenizer_ = std::move(*p);
  ignore_merges_ = pre_tokenizer_->ignore_merges();

  const auto& bl = byte_level::get();
  for (std::size_t b = 0; b < 256; ++b) byte_tokens_[b] = find(bl.encode[b]);

  auto merges = f.get_string_array("tokenizer.ggml.merges");
  if (!merges) return fail(errc::corrupt_data, "tokenizer.ggml.merges is missing for a gpt2 tokenizer");
  merges_.reserve(merges->size());
  std::string joined;
  for (std::size_t i = 0; i < merges->size(); ++i) {
    std::string_view m = (*merges)[i];
    std::size_t space = m.find(' ', 1);
    if (space == std::string_view::npos) continue;
    std::int32_t left = find(m.substr(0, space)), right = find(m.substr(space + 1));
    joined.assign(m.substr(0, space));
    joined.append(m.substr(space + 1));
    std::int32_t merged = find(joined);
    if (left < 0 || right < 0 || merged < 0) continue;  // a merge into no token can never be emitted
    std::uint64_t key = (static_cast<std::uint64_t>(left) << 32) | static_cast<std::uint32_t>(right);
    merges_.emplace(key, merge{static_cast<std::int32_t>(i), merged});
  }
  return {};
}

std::int32_t tokenizer::find(std::string_view text) const {
  auto it = index_.find(text);
  return it == index_.end() ? -1 : it->second;
}

std::string_view tokenizer::token_text(std::int32_t id) const {
  if (id < 0 || id >= n_vocab()) return {};
  auto i = static_cast<std::size_t>(id);
  return std::string_view(text_.data() + offsets_[i], offsets_[i + 1] - offsets_[i]);
}

token_type tokenizer::type(std::int32_t id) const {
  if (id < 0 || id >= n_vocab()) return token_type::unused;
  return types_[static_cast<std::size_t>(id)];
}

bool tokenizer::is_eog(std::int32_t id) const { return std::binary_search(eog_.begin(), eog_.end(), id); }

std::int32_t tokenizer::match_special(std::string_view text, std::size_t pos, bool parse_special) const {
  for (std::int32_t id : specials_[static_cast<unsigned char>(text[pos])]) {
    token_type ty = types_[static_cast<std::size_t>(id)];
    if (!parse_special && ty != token_type::user_defined) continue;
    std::string_view s = token_text(id);
    if (text.size() - pos >= s.size() && text.compare(pos, s.size(), s) == 0) return id;
  }
  return -1;
}

std::vector<std::int32_t> tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<std::int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && add_bos_ && bos_ >= 0) out.push_back(bos_);
  // Special tokens split the text; each stretch between them is tokenized on its own.
  std::size_t start = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    if (specials_[static_cast<unsigned char>(text[pos])].empty()) {
      ++pos;
      continue;
    }
    std::int32_t id = match_special(text, pos, parse_special);
    if (id < 0) {
      ++pos;
      continue;
    }
    if (pos > start) encode_fragment(text.substr(start, pos - start), out);
    out.push_back(id);
    pos += token_text(id).size();
    if (rstrip_[static_cast<std::size_t>(id)])
      while (pos < text.size() && is_space(text[pos])) ++pos;
    start = pos;
  }
  if (start < text.size()) encode_fragment(text.substr(start), out);
  if (add_special && add_eos_ && eos_ >= 0) out.push_back(eos_);
  return out;
}

void tokenizer::encode_fragment(std::string_view text, std::vector<std::int32_t>& out) const {
  if (model_ == "llama") encode_spm(text, out);
  else encode_bpe(text, out);
}

std::string tokenizer::token_to_piece(std::int32_t id, bool render_special) const {
  if (id < 0 || id >= n_vocab()) return {};
  std::string_view t = token_text(id);
  switch (types_[static_cast<std::size_t>(id)]) {
    case token_type::control:
    case token_type::unknown:
    case token_type::unused:
      return render_special ? std::string(t) : std::string();
    case token_type::user_defined:
      return std::string(t);
    case token_type::byte:
      if (t.size() == 6 && t.substr(0, 3) == "<0x" && t[5] == '>' && hex_digit(t[3]) >= 0 && hex_digit(t[4]) >= 0)
        return std::string(1, static_cast<char>(hex_digit(t[3]) * 16 + hex_digit(t[4])));
      break;
    case token_type::normal:
      break;
  }
  std::string out;
  out.reserve(t.size());
  if (model_ == "llama") {
    for (std::size_t i = 0; i < t.size();) {
      if (t.substr(i, 3) == k_space_marker) {
        out += ' ';
        i += 3;
      } else {
        out += t[i++];
      }
    }
    return out;
  }
  // Byte-level BPE: each code point of the alphabet is one byte; anything else is kept as it is.
  const auto& bl = byte_level::get();
  for (std::size_t i = 0; i < t.size();) {
    auto c = static_cast<unsigned char>(t[i]);
    std::size_t n = std::min(utf8::lead_length(c), t.size() - i);
    std::uint32_t cp = c;
    if (n == 2) cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(t[i + 1]) & 0x3Fu);
    if ((n == 1 || n == 2) && cp < byte_level::k_code_points && bl.decode[cp] >= 0) out += static_cast<char>(bl.decode[cp]);
    else out.append(t.substr(i, n));
    i += n;
  }
  return out;
}

std::string tokenizer::decode(std::span<const std::int32_t> ids, bool render_special) const {
  std::string out;
  // SentencePiece put a space before the text; the first piece that renders gives it back.
  bool strip = add_space_prefix_ && model_ == "llama";
  for (std::int32_t id : ids) {
    std::string p = token_to_piece(id, render_special);
    if (strip && !p.empty()) {
      if (p[0] == ' ') p.erase(0, 1);
      strip = false;
    }
    out += p;
  }
  return out;
}

}  // namespace strata::tokenizer
