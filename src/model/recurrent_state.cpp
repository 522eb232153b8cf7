#include "src/model/recurrent_state.hpp"

#include <algorithm>

namespace strata::model {

recurrent_state::recurrent_state(const hparams& h, std::int32_t n_slots, int only_layer)
    : n_slots_(n_slots),
      conv_floats_(static_cast<std::size_t>(std::max(0, h.ssm_conv_kernel - 1)) * static_cast<std::size_t>(h.ssm_conv_dim())),
      delta_floats_(static_cast<std::size_t>(h.ssm_inner) * static_cast<std::size_t>(h.ssm_state)) {
  layers_.resize(static_cast<std::size_t>(h.n_layer));
  for (int il = 0; il < h.n_layer; ++il) {
    if (!h.recurrent(il) || (only_layer >= 0 && il != only_layer)) continue;
    layers_[static_cast<std::size_t>(il)].assign(static_cast<std::size_t>(n_slots) * (conv_floats_ + delta_floats_), 0.0f);
    ++n_recurrent_;
  }
}

void recurrent_state::clear(std::int32_t slot) {
  const std::size_t per = conv_floats_ + delta_floats_;
  for (auto& l : layers_)
    if (!l.empty()) std::fill_n(l.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(slot) * per), per, 0.0f);
}

}  // namespace strata::model
