#pragma once
// recurrent_state: what a recurrent (Gated DeltaNet or Mamba-2) layer carries from one position to
// the next, for each of n_slots sequences: the convolution's last conv_kernel - 1 input rows
// (conv_dim values each) and the scan's state (ssm_inner x ssm_state: the delta rule's v_heads
// matrices of state x state, or Mamba-2's heads of head_dim x d_state), all f32. Unlike
// attention KV it does not grow with the sequence, and it cannot be cut back to an earlier
// position: a sequence's slot holds its state after its last position, zero before its first.
// A batch row names its sequence's slot in seq_rows::state_slot. Layers use disjoint memory, so
// each layer's actor may update its own layer's states while the others run.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/delta_rule.hpp"
#include "src/model/hparams.hpp"

namespace strata::model {

class recurrent_state {
 public:
  /// Zeroed states for n_slots sequences in every recurrent layer of h, or only in layer
  /// `only_layer` when it is >= 0 (what one layer's actor owns).
  recurrent_state(const hparams& h, std::int32_t n_slots, int only_layer = -1);

  std::int32_t slots() const { return n_slots_; }
  /// Floats per slot in one recurrent layer: the convolution's rows, then the scan's state.
  std::size_t conv_floats() const { return conv_floats_; }
  std::size_t delta_floats() const { return delta_floats_; }
  /// Bytes one sequence's state takes over all recurrent layers.
  std::size_t bytes_per_slot() const { return n_recurrent_ * (conv_floats_ + delta_floats_) * sizeof(float); }

  /// Layer il's (a recurrent layer) convolution rows and scan (delta rule or Mamba-2) state of a slot.
  float* conv(int il, std::int32_t slot) { return at(il, slot); }
  float* delta(int il, std::int32_t slot) { return at(il, slot) + conv_floats_; }

  /// Zeroes a slot in every layer: its next sequence starts from position 0.
  void clear(std::int32_t slot);
  /// Bytes of one slot in one recurrent layer (its convolution rows, then its delta state).
  std::size_t layer_slot_bytes() const { return (conv_floats_ + delta_floats_) * sizeof(float); }

  /// The chunk length of the delta rule and the Mamba-2 scan in prefill (kernels::delta_rule_chunked,
  /// kernels::ssm_scan_chunked): their chunks start at positions that are multiples of it. A server
  /// sets kernels::delta_rule_chunk_for(block_tokens).
  int rule_chunk() const { return rule_chunk_; }
  void set_rule_chunk(int rows) { rule_chunk_ = rows; }

 private:
  float* at(int il, std::int32_t slot) {
    return layers_[static_cast<std::size_t>(il)].data() + static_cast<std::size_t>(slot) * (conv_floats_ + delta_floats_);
  }
  std::int32_t n_slots_;
  std::size_t conv_floats_, delta_floats_, n_recurrent_ = 0;
  std::vector<std::vector<float>> layers_;  // per layer; empty for attention layers
  int rule_chunk_ = kernels::k_delta_rule_max_chunk;
};

}  // namespace strata::model
