#include "src/engine/stages.hpp"

namespace strata::engine {

layer_stage::layer_stage(std::shared_ptr<const model::model> m, int layer, const kv::block_space& pages, std::int32_t page_tokens,
                         std::shared_ptr<kernels::compute_pool> pool)
    : m_(std::move(m)), layer_(layer), kv_(pages, page_tokens, m_->hp.kv_dim()), pool_(std::move(pool)) {}

void layer_stage::run(const pipeline::batch_layout& layout, std::vector<float>& hidden) {
  const auto n = layout.n_rows();
  if (hidden.empty()) {
    hidden.resize(static_cast<std::size_t>(n) * m_->hp.n_embd);
    model::embed(*m_, layout.tokens.data(), n, hidden.data());
  }
  rows_.clear();
  for (const auto& s : layout.seqs)
    rows_.push_back({s.blocks.data(), static_cast<std::int32_t>(s.blocks.size()), s.first_row, s.n_rows, s.start_pos});
  model::batch_view b{layout.tokens.data(), n, rows_};
  model::layer_forward(*m_, layer_, b, hidden.data(), kv_, *pool_);
}

output_stage::output_stage(std::shared_ptr<const model::model> m, std::shared_ptr<kernels::compute_pool> pool)
    : m_(std::move(m)), pool_(std::move(pool)) {}

void output_stage::logits(const std::vector<float>& hidden, const std::vector<std::int32_t>& rows, std::vector<float>& out) {
  out.resize(rows.size() * static_cast<std::size_t>(m_->hp.n_vocab));
  model::output_logits(*m_, hidden.data(), rows, out.data(), *pool_);
}

sequence_sampler::sequence_sampler(const pipeline::open_sampler& o) : id_(o.id), s_(o.settings, o.history) {}

pipeline::sampled_token sequence_sampler::draw(float* logits, std::int32_t n_vocab) {
  auto c = s_.draw(logits, n_vocab);
  return pipeline::sampled_token{id_, c.token, c.logprob, std::move(c.top_logprobs)};
}

}  // namespace strata::engine
