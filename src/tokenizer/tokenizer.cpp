#include "src/tokenizer/tokenizer.hpp"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "src/tokenizer/pre_tokenizer.hpp"

namespace strata::tokenizer {
namespace {

/// GPT-2's reversible byte <-> printable code point mapping.
struct byte_map {
  std::string encode[256];              // byte -> UTF-8 of its code point
  std::unordered_map<std::uint32_t, std::uint8_t> decode;  // code point -> byte
  byte_map() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      std::uint32_t cp = printable ? static_cast<std::uint32_t>(b) : static_cast<std::uint32_t>(256 + n++);
      std::string u;
      if (cp < 0x80) {
        u += static_cast<char>(cp);
      } else {
        u += static_cast<char>(0xC0 | (cp >> 6));
        u += static_cast<char>(0x80 | (cp & 0x3F));
      }
      encode[b] = u;
      decode[cp] = static_cast<std::uint8_t>(b);
    }
  }
};

const byte_map& bytes() {
  static const byte_map m;
  return m;
}

std::size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c >> 5) == 6) return 2;
  if ((c >> 4) == 14) return 3;
  if ((c >> 3) == 30) return 4;
  return 1;
}

/// A merge candidate: two adjacent symbols whose union is a token (SPM) or a ranked pair (BPE).
struct bigram {
  int left, right;
  float score;       // SPM: higher first; BPE: -rank
  std::size_t size;  // bytes of the union, to detect stale entries
  bool operator<(const bigram& o) const { return score < o.score || (score == o.score && left > o.left); }
};

struct symbol {
  int prev, next;
  const char* text;
  std::size_t n;
};

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
  auto toks = f.get_string_array("tokenizer.ggml.tokens");
  if (!toks || toks->empty()) return fail(errc::corrupt_data, "tokenizer.ggml.tokens is missing or empty");
  const std::size_t n = toks->size();
  t.tokens_.reserve(n);
  for (auto s : *toks) t.tokens_.emplace_back(s);
  t.scores_.assign(n, 0.0f);
  if (auto sc = f.get_float_array("tokenizer.ggml.scores")) {
    if (sc->size() != n) return fail(errc::corrupt_data, "tokenizer.ggml.scores has ", sc->size(), " entries for ", n, " tokens");
    t.scores_ = std::move(*sc);
  }
  t.types_.assign(n, token_type::normal);
  if (auto ty = f.get_int_array("tokenizer.ggml.token_type")) {
    if (ty->size() != n) return fail(errc::corrupt_data, "tokenizer.ggml.token_type has ", ty->size(), " entries for ", n, " tokens");
    for (std::size_t i = 0; i < n; ++i) t.types_[i] = static_cast<token_type>((*ty)[i]);
  }
  t.index_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) t.index_.emplace(t.tokens_[i], static_cast<std::int32_t>(i));
  auto id_of = [&](const char* key, std::int32_t fallback) {
    auto v = f.get_int(key);
    return v && *v >= 0 && *v < static_cast<std::int64_t>(n) ? static_cast<std::int32_t>(*v) : fallback;
  };
  const bool spm = t.model_ == "llama";
  t.bos_ = id_of("tokenizer.ggml.bos_token_id", spm ? 1 : -1);
  t.eos_ = id_of("tokenizer.ggml.eos_token_id", spm ? 2 : -1);
  t.unk_ = id_of("tokenizer.ggml.unknown_token_id", spm ? 0 : -1);
  t.add_bos_ = f.get_bool("tokenizer.ggml.add_bos_token").value_or(spm);
  t.add_eos_ = f.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
  t.add_space_prefix_ = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(spm);
  if (auto ct = f.get_string("tokenizer.chat_template")) t.chat_template_ = std::string(*ct);

  std::fill(std::begin(t.byte_tokens_), std::end(t.byte_tokens_), -1);
  if (spm) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      t.byte_tokens_[b] = t.find(name);
    }
  } else {
    auto merges = f.get_string_array("tokenizer.ggml.merges");
    if (!merges) return fail(errc::corrupt_data, "tokenizer.ggml.merges is missing for a gpt2 tokenizer");
    t.merge_rank_.reserve(merges->size());
    for (std::size_t i = 0; i < merges->size(); ++i) t.merge_rank_.emplace(std::string((*merges)[i]), static_cast<std::int32_t>(i));
    std::string pre(f.get_string("tokenizer.ggml.pre").value_or("default"));
    auto p = pre_tokenizer::create(pre);
    if (!p) return std::move(p).err();
    t.pre_ = pre;
    t.pre_tokenizer_ = std::move(*p);
  }

  for (std::size_t i = 0; i < n; ++i) {
    if (t.types_[i] == token_type::control || t.types_[i] == token_type::user_defined)
      if (!t.tokens_[i].empty()) t.specials_.push_back(static_cast<std::int32_t>(i));
  }
  std::sort(t.specials_.begin(), t.specials_.end(), [&](std::int32_t a, std::int32_t b) {
    return t.tokens_[static_cast<std::size_t>(a)].size() > t.tokens_[static_cast<std::size_t>(b)].size();
  });
  if (t.eos_ >= 0) t.eog_.push_back(t.eos_);
  if (auto eot = f.get_int("tokenizer.ggml.eot_token_id")) t.eog_.push_back(static_cast<std::int32_t>(*eot));
  for (const char* s : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|EOT|>", "<|end_of_text|>"}) {
    std::int32_t id = t.find(s);
    if (id >= 0 && t.types_[static_cast<std::size_t>(id)] == token_type::control) t.eog_.push_back(id);
  }
  return t;
}

std::int32_t tokenizer::find(std::string_view text) const {
  auto it = index_.find(std::string(text));
  return it == index_.end() ? -1 : it->second;
}

std::string_view tokenizer::token_text(std::int32_t id) const {
  if (id < 0 || id >= n_vocab()) return {};
  return tokens_[static_cast<std::size_t>(id)];
}

token_type tokenizer::type(std::int32_t id) const {
  if (id < 0 || id >= n_vocab()) return token_type::unused;
  return types_[static_cast<std::size_t>(id)];
}

bool tokenizer::is_eog(std::int32_t id) const { return std::find(eog_.begin(), eog_.end(), id) != eog_.end(); }

std::vector<std::int32_t> tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<std::int32_t> out;
  if (add_special && add_bos_ && bos_ >= 0) out.push_back(bos_);
  // Split on special tokens first: control tokens only when parse_special, user-defined always.
  bool prev_special = true;
  std::size_t pos = 0, text_start = 0;
  auto flush_text = [&](std::size_t end) {
    if (end > text_start) {
      std::string_view frag = text.substr(text_start, end - text_start);
      if (model_ == "llama") {
        std::string s = add_space_prefix_ && prev_special ? " " : "";
        s += frag;
        encode_spm(s, out);
      } else {
        encode_bpe(frag, out);
      }
      prev_special = false;
    }
  };
  while (pos < text.size()) {
    std::int32_t hit = -1;
    if (!specials_.empty()) {
      for (std::int32_t id : specials_) {
        const std::string& s = tokens_[static_cast<std::size_t>(id)];
        if (types_[static_cast<std::size_t>(id)] == token_type::control && !parse_special) continue;
        if (text.compare(pos, s.size(), s) == 0) {
          hit = id;
          break;
        }
      }
    }
    if (hit < 0) {
      ++pos;
      continue;
    }
    flush_text(pos);
    out.push_back(hit);
    prev_special = true;
    pos += tokens_[static_cast<std::size_t>(hit)].size();
    text_start = pos;
  }
  flush_text(text.size());
  if (add_special && add_eos_ && eos_ >= 0) out.push_back(eos_);
  return out;
}

void tokenizer::byte_fallback(std::string_view bytes_in, std::vector<std::int32_t>& out) const {
  for (unsigned char c : bytes_in) {
    std::int32_t id = byte_tokens_[c];
    out.push_back(id >= 0 ? id : unk_);
  }
}

void tokenizer::encode_spm(std::string_view raw, std::vector<std::int32_t>& out) const {
  std::string text;
  text.reserve(raw.size() + 8);
  for (char c : raw) {
    if (c == ' ') text += "\xE2\x96\x81";  // U+2581
    else text += c;
  }
  std::vector<symbol> sym;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t n = std::min(utf8_len(static_cast<unsigned char>(text[i])), text.size() - i);
    sym.push_back({static_cast<int>(sym.size()) - 1, static_cast<int>(sym.size()) + 1, text.data() + i, n});
    i += n;
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  std::priority_queue<bigram> q;
  std::unordered_map<std::string, std::pair<int, int>> rev;  // merged text -> its two parts, for resegmenting
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    std::string s(sym[static_cast<std::size_t>(l)].text, sym[static_cast<std::size_t>(l)].n + sym[static_cast<std::size_t>(r)].n);
    std::int32_t id = find(s);
    if (id < 0) return;
    q.push({l, r, scores_[static_cast<std::size_t>(id)], s.size()});
  };
  for (std::size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!q.empty()) {
    bigram b = q.top();
    q.pop();
    symbol& L = sym[static_cast<std::size_t>(b.left)];
    symbol& R = sym[static_cast<std::size_t>(b.right)];
    if (L.n == 0 || R.n == 0 || L.n + R.n != b.size || L.next != b.right) continue;
    L.n += R.n;
    R.n = 0;
    L.next = R.next;
    if (R.next >= 0) sym[static_cast<std::size_t>(R.next)].prev = b.left;
    try_add(L.prev, b.left);
    try_add(b.left, L.next);
  }
  for (int i = 0; i != -1; i = sym[static_cast<std::size_t>(i)].next) {
    const symbol& s = sym[static_cast<std::size_t>(i)];
    std::int32_t id = find(std::string_view(s.text, s.n));
    if (id >= 0) out.push_back(id);
    else byte_fallback(std::string_view(s.text, s.n), out);
  }
}

void tokenizer::encode_bpe(std::string_view text, std::vector<std::int32_t>& out) const {
  const byte_map& bm = bytes();
  for (std::string_view piece : pre_tokenizer_->split(text)) {
    std::string mapped;
    for (unsigned char c : piece) mapped += bm.encode[c];
    bpe_piece(mapped, out);
  }
}

void tokenizer::bpe_piece(const std::string& text, std::vector<std::int32_t>& out) const {
  std::vector<symbol> sym;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t n = std::min(utf8_len(static_cast<unsigned char>(text[i])), text.size() - i);
    sym.push_back({static_cast<int>(sym.size()) - 1, static_cast<int>(sym.size()) + 1, text.data() + i, n});
    i += n;
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  std::priority_queue<bigram> q;
  std::string key;
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const symbol& a = sym[static_cast<std::size_t>(l)];
    const symbol& b = sym[static_cast<std::size_t>(r)];
    key.assign(a.text, a.n);
    key += ' ';
    key.append(b.text, b.n);
    auto it = merge_rank_.find(key);
    if (it == merge_rank_.end()) return;
    q.push({l, r, -static_cast<float>(it->second), a.n + b.n});
  };
  for (std::size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!q.empty()) {
    bigram b = q.top();
    q.pop();
    symbol& L = sym[static_cast<std::size_t>(b.left)];
    symbol& R = sym[static_cast<std::size_t>(b.right)];
    if (L.n == 0 || R.n == 0 || L.n + R.n != b.size || L.next != b.right) continue;
    L.n += R.n;
    R.n = 0;
    L.next = R.next;
    if (R.next >= 0) sym[static_cast<std::size_t>(R.next)].prev = b.left;
    try_add(L.prev, b.left);
    try_add(b.left, L.next);
  }
  for (int i = 0; i != -1; i = sym[static_cast<std::size_t>(i)].next) {
    const symbol& s = sym[static_cast<std::size_t>(i)];
    std::int32_t id = find(std::string_view(s.text, s.n));
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not in the vocabulary (a malformed vocab): fall back to one token per mapped character.
    for (std::size_t j = 0; j < s.n;) {
      std::size_t n = std::min(utf8_len(static_cast<unsigned char>(s.text[j])), s.n - j);
      std::int32_t c = find(std::string_view(s.text + j, n));
      if (c >= 0) out.push_back(c);
      else if (unk_ >= 0) out.push_back(unk_);
      j += n;
    }
  }
}

std::string tokenizer::token_to_piece(std::int32_t id, bool render_special) const {
  if (id < 0 || id >= n_vocab()) return {};
  const std::string& t = tokens_[static_cast<std::size_t>(id)];
  token_type ty = types_[static_cast<std::size_t>(id)];
  if (ty == token_type::control || ty == token_type::unknown || ty == token_type::unused) return render_special ? t : std::string();
  if (ty == token_type::user_defined) return t;
  if (model_ == "llama") {
    if (ty == token_type::byte && t.size() == 6) return std::string(1, static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
    std::string out;
    for (std::size_t i = 0; i < t.size();) {
      if (t.compare(i, 3, "\xE2\x96\x81") == 0) {
        out += ' ';
        i += 3;
      } else {
        out += t[i++];
      }
    }
    return out;
  }
  const byte_map& bm = bytes();
  std::string out;
  for (std::size_t i = 0; i < t.size();) {
    auto c = static_cast<unsigned char>(t[i]);
    std::uint32_t cp;
    std::size_t n = utf8_len(c);
    if (n == 1) cp = c;
    else if (n == 2 && i + 1 < t.size()) cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(t[i + 1]) & 0x3Fu);
    else cp = 0xFFFFFFFF;
    auto it = bm.decode.find(cp);
    if (it != bm.decode.end()) out += static_cast<char>(it->second);
    else out.append(t, i, n);
    i += n;
  }
  return out;
}

std::string tokenizer::decode(std::span<const std::int32_t> ids, bool render_special) const {
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::string p = token_to_piece(ids[i], render_special);
    // SentencePiece adds a space before the text; the first word gives it back.
    if (model_ == "llama" && add_space_prefix_ && out.empty() && !p.empty() && p[0] == ' ') p.erase(0, 1);
    out += p;
  }
  return out;
}

}  // namespace strata::tokenizer
