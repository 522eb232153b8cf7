#pragma once
// granitehybrid's Mamba-2 layers (llama.cpp's build_mamba2_layer); forward.cpp runs the rest of the
// layer (norms, residuals with Granite's multiplier, the FFN).
//
// For the normed input of each row:
//   z | xBC | dt = W_in x                   (d_inner | d_inner + 2 n_group d_state | heads)
//   xBC = silu(causal_conv(xBC) + conv_bias); x | B | C split
//   y = selective scan (kernels/ssm_scan.hpp) per head, with step softplus(dt + dt_bias), decay A,
//       B and C of the head's group (head h reads group h / (heads / n_group)), then y += D x
//   out = W_out (grouped_rms_norm(y * silu(z)) * ssm_norm)   (groups of d_inner / n_group values)
// Each sequence continues from its slot's convolution rows and scan state, and leaves them updated:
// a sequence's rows in one step go through the chunked scan, a single row (decode) through the
// recurrence.

#include "kernels/compute_pool.hpp"
#include "src/model/forward.hpp"
#include "src/model/hparams.hpp"
#include "src/model/recurrent_state.hpp"
#include "src/model/weights.hpp"

namespace strata::model {

/// Layer il's mixer over the batch: cur (n_rows x n_embd, the normed input) gives out (n_rows x
/// n_embd, before the residual). Reads and updates the states of the batch's slots in layer il.
void mamba2_mixer(const layer_weights& w, const hparams& h, int il, const batch_view& batch, const float* cur, float* out,
                  recurrent_state& state, kernels::compute_pool& pool);

}  // namespace strata::model
