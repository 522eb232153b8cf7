#pragma once
// session: one sequence run straight through the forward pass, without the actor pipeline
// (`strata logits`, `strata bench`, the golden test). Pages are assigned in order.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/compute_pool.hpp"
#include "src/model/forward.hpp"
#include "src/model/layer_kv.hpp"
#include "src/model/model.hpp"
#include "src/model/q4_kv.hpp"
#include "src/model/recurrent_state.hpp"

namespace strata::model {

class session {
 public:
  /// Room for max_tokens positions; steps of up to max_batch rows.
  session(std::shared_ptr<const model> m, kernels::compute_pool& pool, std::int32_t max_tokens,
          std::int32_t page_tokens = 32, std::int32_t max_batch = 512, kv::kv_format format = kv::kv_format::f16);

  /// q4_0 KV without the smoothing and rotations of src/model/q4_kv.hpp (to measure what they buy).
  void set_rotate_q4(bool on) {
    for (auto& l : kv_) l.set_rotate_q4(on);
  }

  /// Centers q4_0 keys with `means` (calibrate_q4_keys; kept alive by the caller), or stops when null.
  void set_q4_key_means(const q4_key_means* means) {
    for (int il = 0; il < static_cast<int>(kv_.size()); ++il) kv_[static_cast<std::size_t>(il)].set_q4_key_mean(means ? means->layer(il) : nullptr);
  }
  /// Layer il's pages.
  const layer_kv& layer(int il) const { return kv_[static_cast<std::size_t>(il)]; }

  /// Appends tokens (in chunks of at most `chunk` rows) and returns the logits of every appended
  /// position (tokens.size() x n_vocab) when all_logits, else only of the last one. With
  /// all_logits and every > 1, only of the appended positions p with p % every == every - 1.
  result<std::vector<float>> append(std::span<const std::int32_t> tokens, bool all_logits, std::int32_t chunk = 512,
                                    std::int32_t every = 1);

  std::int32_t position() const { return pos_; }
  /// Starts over at position 0 (recurrent layers' states zeroed).
  void reset() {
    pos_ = 0;
    if (state_) state_->clear(0);
  }
  const model& mdl() const { return *m_; }

 private:
  std::shared_ptr<const model> m_;
  kernels::compute_pool& pool_;
  std::int32_t max_tokens_;
  std::vector<layer_kv> kv_;
  std::unique_ptr<recurrent_state> state_;  // one slot, for models with recurrent layers
  std::vector<std::int32_t> blocks_;
  scratch scratch_;
  std::vector<float> hidden_;
  std::int32_t pos_ = 0;
};

}  // namespace strata::model
