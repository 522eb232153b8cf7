#include "src/grammar/grammar_matcher.hpp"

#include <algorithm>
#include <limits>

#include <dlpack/dlpack.h>
#include <xgrammar/xgrammar.h>

#include "src/grammar/compiled_grammar.hpp"

namespace strata::grammar {

struct grammar_matcher::impl {
  std::shared_ptr<const compiled_grammar> g;
  xgrammar::GrammarMatcher m;
  std::vector<std::uint32_t> mask;  // reused between steps: a step allocates nothing

  explicit impl(std::shared_ptr<const compiled_grammar> grammar)
      : g(std::move(grammar)), m(g->xg(), g->stop_tokens()), mask(static_cast<std::size_t>(xgrammar::GetBitmaskSize(g->vocab_size()))) {}
};

grammar_matcher::grammar_matcher(std::shared_ptr<const compiled_grammar> g) : impl_(std::make_unique<impl>(std::move(g))) {}
grammar_matcher::~grammar_matcher() = default;
grammar_matcher::grammar_matcher(grammar_matcher&&) noexcept = default;
grammar_matcher& grammar_matcher::operator=(grammar_matcher&&) noexcept = default;

std::int32_t grammar_matcher::mask_words() const noexcept { return static_cast<std::int32_t>(impl_->mask.size()); }

void grammar_matcher::fill_mask(std::span<std::uint32_t> mask) {
  if (impl_->m.IsTerminated()) {
    // Past the end the engine fills nothing: only the stop tokens may follow.
    std::fill(mask.begin(), mask.end(), 0u);
    for (auto t : impl_->g->stop_tokens())
      if (static_cast<std::size_t>(t / 32) < mask.size()) mask[static_cast<std::size_t>(t / 32)] |= 1u << (t % 32);
    return;
  }
  // The engine writes into a DLTensor: one row of int32 words.
  std::int64_t shape[1] = {static_cast<std::int64_t>(mask.size())};
  DLTensor t{};
  t.data = mask.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = DLDataType{kDLInt, 32, 1};
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  impl_->m.FillNextTokenBitmask(&t);
}

void grammar_matcher::mask_logits(float* logits, std::int32_t n_logits) {
  fill_mask(impl_->mask);
  constexpr float ninf = -std::numeric_limits<float>::infinity();
  const auto n = static_cast<std::size_t>(n_logits);
  const std::size_t covered = std::min(n, impl_->mask.size() * 32);
  const std::size_t whole = covered / 32;
  for (std::size_t w = 0; w < whole; ++w) {
    const std::uint32_t allowed = impl_->mask[w];
    if (allowed == ~0u) continue;  // every token of the word allowed (inside a JSON string, most are)
    float* x = logits + w * 32;
    if (allowed == 0) {
      std::fill(x, x + 32, ninf);  // outside strings, nearly every word
      continue;
    }
    for (int b = 0; b < 32; ++b) x[b] = (allowed >> b) & 1u ? x[b] : ninf;
  }
  for (std::size_t i = whole * 32; i < covered; ++i)
    if (!((impl_->mask[i / 32] >> (i % 32)) & 1u)) logits[i] = ninf;
  std::fill(logits + covered, logits + n, ninf);
}

bool grammar_matcher::accept(std::int32_t token) {
  if (impl_->m.IsTerminated()) {
    const auto& stops = impl_->g->stop_tokens();
    return std::find(stops.begin(), stops.end(), token) != stops.end();
  }
  return impl_->m.AcceptToken(token);
}

bool grammar_matcher::terminated() const { return impl_->m.IsTerminated(); }
bool grammar_matcher::completed() const { return impl_->m.IsCompleted(); }
const std::vector<std::int32_t>& grammar_matcher::stop_tokens() const { return impl_->g->stop_tokens(); }

}  // namespace strata::grammar
