#include "src/model/session.hpp"

#include <algorithm>
#include <numeric>

namespace strata::model {

session::session(std::shared_ptr<const model> m, kernels::compute_pool& pool, std::int32_t max_tokens,
                 std::int32_t page_tokens, std::int32_t max_batch, kv::kv_format format)
    : m_(std::move(m)), pool_(pool), max_tokens_(max_tokens), scratch_(m_->hp, std::min(max_batch, std::max(1, max_tokens))) {
  const std::int32_t pages = (max_tokens + page_tokens - 1) / page_tokens;
  kv_.reserve(static_cast<std::size_t>(m_->hp.n_layer));
  kv::block_space space;
  space.capacity[static_cast<std::size_t>(kv::format_index(format))] = pages;
  for (int i = 0; i < m_->hp.n_layer; ++i) kv_.emplace_back(space, page_tokens, m_->hp.kv_dim());
  blocks_.resize(static_cast<std::size_t>(pages));
  std::iota(blocks_.begin(), blocks_.end(), space.base(format));
  hidden_.resize(static_cast<std::size_t>(scratch_.max_rows()) * static_cast<std::size_t>(m_->hp.n_embd));
  if (m_->hp.has_recurrent()) state_ = std::make_unique<recurrent_state>(m_->hp, 1);
}

result<std::vector<float>> session::append(std::span<const std::int32_t> tokens, bool all_logits, std::int32_t chunk,
                                           std::int32_t every) {
  every = std::max(every, 1);
  const hparams& h = m_->hp;
  if (pos_ + static_cast<std::int64_t>(tokens.size()) > max_tokens_)
    return fail(errc::limit_exceeded, "sequence of ", pos_ + tokens.size(), " tokens exceeds the session's ", max_tokens_);
  for (std::int32_t t : tokens)
    if (t < 0 || t >= h.n_vocab) return fail(errc::invalid_argument, "token id ", t, " is outside the vocabulary (", h.n_vocab, ")");
  chunk = std::clamp(chunk, 1, scratch_.max_rows());
  std::vector<float> logits;
  std::vector<std::int32_t> rows;
  std::size_t done = 0;
  while (done < tokens.size()) {
    const auto n = static_cast<std::int32_t>(std::min<std::size_t>(static_cast<std::size_t>(chunk), tokens.size() - done));
    embed(m_->weights, h, tokens.data() + done, n, hidden_.data());
    const seq_rows s{blocks_.data(), static_cast<std::int32_t>(blocks_.size()), 0, n, pos_};
    const batch_view b{tokens.data() + done, n, std::span<const seq_rows>(&s, 1)};
    for (int il = 0; il < h.n_layer; ++il)
      layer_forward(m_->weights.layers[static_cast<std::size_t>(il)], h, il, b, hidden_.data(), kv_[static_cast<std::size_t>(il)],
                    scratch_, pool_, state_.get());
    pos_ += n;
    done += static_cast<std::size_t>(n);
    rows.clear();
    if (all_logits) {
      const auto first = static_cast<std::int32_t>(done) - n;  // index in `tokens` of the chunk's first row
      for (std::int32_t r = 0; r < n; ++r)
        if ((first + r) % every == every - 1) rows.push_back(r);
    } else if (done == tokens.size()) {
      rows.push_back(n - 1);
    }
    if (!rows.empty()) {
      const std::size_t at = logits.size();
      logits.resize(at + rows.size() * static_cast<std::size_t>(h.n_vocab));
      output_logits(m_->weights, h, hidden_.data(), rows, logits.data() + at, scratch_, pool_);
    }
  }
  return logits;
}

}  // namespace strata::model
