// The two merge algorithms of tokenizer::encode.
//
// Both start from one symbol per character (SentencePiece) or per byte (byte-level BPE), kept in a
// doubly linked list, and repeatedly merge the best adjacent pair taken from a priority queue.
// A queued pair goes stale when one of its symbols has merged since; it is skipped when popped.
// SentencePiece: the best pair is the one whose union is the vocabulary token of highest score.
// BPE: the best pair is the one of lowest merge rank. Ties go to the leftmost pair.

#include <algorithm>

#include "src/common/utf8.hpp"
#include "src/tokenizer/byte_level.hpp"
#include "src/tokenizer/pre_tokenizer.hpp"
#include "src/tokenizer/tokenizer.hpp"

namespace strata::tokenizer {
namespace {

struct spm_symbol {
  int prev, next;
  std::uint32_t start, n;  // bytes of the escaped text; n == 0 once merged into its left neighbour
};

struct spm_pair {
  float score;
  int left, right;
  std::uint32_t size;
};

/// Heap order: the top is the highest score, then the leftmost.
bool spm_lower(const spm_pair& a, const spm_pair& b) { return a.score < b.score || (a.score == b.score && a.left > b.left); }

struct bpe_symbol {
  int prev, next;
  std::int32_t id;  // -1 once merged into its left neighbour, or for a byte with no token
};

struct bpe_pair {
  std::int32_t rank;
  int left, right;
  std::int32_t left_id, right_id, merged;
};

/// Heap order: the top is the lowest rank, then the leftmost.
bool bpe_lower(const bpe_pair& a, const bpe_pair& b) { return a.rank > b.rank || (a.rank == b.rank && a.left > b.left); }

}  // namespace

void tokenizer::byte_fallback(std::string_view bytes, std::vector<std::int32_t>& out) const {
  for (unsigned char c : bytes) {
    std::int32_t id = byte_tokens_[c];
    if (id < 0) id = find(std::string_view(reinterpret_cast<const char*>(&c), 1));
    if (id < 0) id = unk_;
    if (id >= 0) out.push_back(id);
  }
}

void tokenizer::encode_spm(std::string_view raw, std::vector<std::int32_t>& out) const {
  // Spaces become U+2581; a space goes in front when the vocabulary asks for it.
  std::string text;
  text.reserve(raw.size() + raw.size() / 4 + 3);
  if (add_space_prefix_) text += "\xE2\x96\x81";
  for (char c : raw) {
    if (c == ' ') text += "\xE2\x96\x81";
    else text += c;
  }
  if (!spm_words_independent_) {
    spm_merge(text, out);
    return;
  }
  // Words start at a U+2581 that follows another character.
  const std::string_view all = text, marker = "\xE2\x96\x81";
  std::size_t start = 0;
  for (std::size_t p = all.find(marker, 1); p != std::string_view::npos; p = all.find(marker, p + 1)) {
    if (p >= 3 && all.substr(p - 3, 3) == marker) continue;  // inside a run of U+2581
    if (p > start) spm_merge(all.substr(start, p - start), out);
    start = p;
  }
  spm_merge(all.substr(start), out);
}

void tokenizer::spm_merge(std::string_view text, std::vector<std::int32_t>& out) const {
  thread_local std::vector<spm_symbol> sym;
  thread_local std::vector<spm_pair> heap;
  sym.clear();
  heap.clear();
  sym.reserve(text.size());
  // One symbol per character; a byte that does not start a valid character is a symbol of its
  // own, so that invalid UTF-8 still falls back to exactly its own bytes.
  for (std::size_t i = 0; i < text.size();) {
    auto n = static_cast<std::uint32_t>(std::max<std::size_t>(utf8::valid_char(text.substr(i)), 1));
    int k = static_cast<int>(sym.size());
    sym.push_back({k - 1, k + 1, static_cast<std::uint32_t>(i), n});
    i += n;
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const spm_symbol& a = sym[static_cast<std::size_t>(l)];
    const spm_symbol& b = sym[static_cast<std::size_t>(r)];
    std::int32_t id = find(text.substr(a.start, a.n + b.n));  // a and b are adjacent in text
    if (id < 0) return;
    heap.push_back({scores_[static_cast<std::size_t>(id)], l, r, a.n + b.n});
    std::push_heap(heap.begin(), heap.end(), spm_lower);
  };
  for (std::size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), spm_lower);
    spm_pair p = heap.back();
    heap.pop_back();
    spm_symbol& l = sym[static_cast<std::size_t>(p.left)];
    spm_symbol& r = sym[static_cast<std::size_t>(p.right)];
    if (l.n == 0 || r.n == 0 || l.n + r.n != p.size || l.next != p.right) continue;  // stale
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[static_cast<std::size_t>(r.next)].prev = p.left;
    try_add(l.prev, p.left);
    try_add(p.left, l.next);
  }
  // Every merged symbol is a token; a single character that is not falls back to byte tokens.
  for (int i = 0; i != -1; i = sym[static_cast<std::size_t>(i)].next) {
    const spm_symbol& s = sym[static_cast<std::size_t>(i)];
    std::string_view piece = text.substr(s.start, s.n);
    std::int32_t id = find(piece);
    if (id >= 0) out.push_back(id);
    else byte_fallback(piece, out);
  }
}

void tokenizer::encode_bpe(std::string_view text, std::vector<std::int32_t>& out) const {
  std::vector<std::string_view> words;
  pre_tokenizer_->split(text, words);
  for (std::string_view w : words) bpe_word(w, out);
}

void tokenizer::bpe_word(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {  // a word that is a token as a whole is that token
    const auto& bl = byte_level::get();
    std::string mapped;
    for (unsigned char c : word) mapped += bl.encode[c];
    if (std::int32_t id = find(mapped); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() == 1) {
    if (std::int32_t id = byte_tokens_[static_cast<unsigned char>(word[0])]; id >= 0) out.push_back(id);
    else if (unk_ >= 0) out.push_back(unk_);
    return;
  }
  thread_local std::vector<bpe_symbol> sym;
  thread_local std::vector<bpe_pair> heap;
  sym.clear();
  heap.clear();
  for (std::size_t i = 0; i < word.size(); ++i) {
    int k = static_cast<int>(i);
    sym.push_back({k - 1, k + 1, byte_tokens_[static_cast<unsigned char>(word[i])]});
  }
  sym.back().next = -1;
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    std::int32_t a = sym[static_cast<std::size_t>(l)].id, b = sym[static_cast<std::size_t>(r)].id;
    if (a < 0 || b < 0) return;
    auto it = merges_.find((static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint32_t>(b));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, l, r, a, b, it->second.merged});
    std::push_heap(heap.begin(), heap.end(), bpe_lower);
  };
  for (std::size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), bpe_lower);
    bpe_pair p = heap.back();
    heap.pop_back();
    bpe_symbol& l = sym[static_cast<std::size_t>(p.left)];
    bpe_symbol& r = sym[static_cast<std::size_t>(p.right)];
    // Stale unless both sides are still the symbols it was made of (a symbol's id only grows).
    if (l.next != p.right || l.id != p.left_id || r.id != p.right_id) continue;
    l.id = p.merged;
    r.id = -1;
    l.next = r.next;
    if (r.next >= 0) sym[static_cast<std::size_t>(r.next)].prev = p.left;
    try_add(l.prev, p.left);
    try_add(p.left, l.next);
  }
  for (int i = 0; i != -1; i = sym[static_cast<std::size_t>(i)].next) {
    std::int32_t id = sym[static_cast<std::size_t>(i)].id;
    if (id >= 0) out.push_back(id);
    else if (unk_ >= 0) out.push_back(unk_);  // a byte the vocabulary has no token for
  }
}

}  // namespace strata::tokenizer
