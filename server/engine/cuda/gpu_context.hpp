#pragma once
// What the GPU stages of one model share (--device cuda): the CUDA stream every stage queues its
// kernels on, a lock that keeps one stage's kernel sequence whole on that stream (the stages run
// on different actor threads and share the activation scratch), the scratch itself, sized for the
// largest batch seen, and, per step in flight, the hidden states and the batch's index arrays on
// the device.
//
// The hidden states stay on the device between the layer actors: the first layer that sees a step
// uploads its embeddings and the batch's positions, KV slots and block tables once; every layer
// transforms the step's device rows in place, queueing without waiting; the last layer copies the
// rows back into the forward message (the one wait of the step, besides the logits). The host
// vector of the rows in between is left as the first layer found it: only the GPU stages read it.
// KV blocks saved to or restored from host RAM move on a stream of their own (page_transfer).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <cuda_runtime_api.h>

#include "actors/pipeline/messages.hpp"
#include "kernels/cuda/device.hpp"
#include "kernels/cuda/matvec.hpp"
#include "kernels/cuda/prefill_attention.hpp"
#include "server/engine/cuda/page_transfer.hpp"
#include "src/kv/kv_format.hpp"
#include "src/model/hparams.hpp"

namespace strata::engine::gpu {

namespace cu = kernels::cuda;

/// Whether the rows of a prefill take prefill_attention (else every row takes decode_attention):
/// on unless STRATA_CUDA_PREFILL_ATTENTION=0.
bool prefill_attention_enabled();

/// Whether KV pages move to and from host RAM through page_transfer (pinned chunks on a stream of
/// their own): on unless STRATA_CUDA_STAGED_TRANSFERS=0, which copies a page at a time on the
/// compute stream (the first version, kept for comparison).
bool staged_transfers();

/// Grows b to at least `bytes` (its contents are lost; the old buffer is freed, which waits for
/// the device).
void ensure(cu::device_buffer& b, std::size_t bytes);

/// One step's device state, made by the first stage that sees the step.
struct step_state {
  std::uint64_t step = 0;
  std::int32_t n_rows = 0;
  cu::device_buffer hidden;  // n_rows x n_embd f32
  cu::device_buffer pos;     // int32 per row: its position
  cu::device_buffer slots;   // int32 per row: the f16 page slot its K and V go to (page * page_tokens + offset), or -1
  cu::device_buffer slots_q8;  // int32 per row: its q8_0 page slot (page index within the q8_0 pool), or -1
  cu::device_buffer first;   // int32 per row: 0 (no sliding window on the GPU path)
  cu::device_buffer last;    // int32 per row: its position
  cu::device_buffer blocks;  // the rows' block tables, blocks_stride apart (0: one table for every row); a q8_0 row's
                             // blocks as indices within the q8_0 ids (its pool's pages)
  std::int32_t blocks_stride = 0;
  std::int32_t max_positions = 0;  // of the rows decode_attention takes
  /// The rows of sequences with many rows (a prefill), as prefill_attention's tiles, the longest
  /// first, of f16 pages (`tiles`) and of q8_0 pages (`tiles_q8`); the other rows' indices for
  /// decode_attention, per format (`decode_rows`, `decode_rows_q8`, only when decode_subsets:
  /// else every row is a decode row of the one format the step holds).
  cu::device_buffer tiles, decode_rows, tiles_q8, decode_rows_q8;
  std::int32_t n_tiles = 0, n_decode = 0, n_tiles_q8 = 0, n_decode_q8 = 0;
  std::int32_t max_positions_q8 = 0;  // of the q8_0 rows decode_attention takes
  bool has_f16 = true, has_q8 = false, decode_subsets = false;
};

/// The activations of one layer's kernels, for up to `rows` rows.
struct scratch {
  std::int32_t rows = 0;
  cu::device_buffer cur, q, k, v, attn, out, gate, up, x16, workspace;
  cu::act_q8 xq_embd, xq_q, xq_ff;  // matvec inputs of decode rows (n <= k_matvec_max_batch)
};

class gpu_context {
 public:
  /// Picks device 0 and makes the stream. Throws cu::cuda_error without a usable GPU.
  gpu_context(const model::hparams& h, std::int32_t page_tokens);
  ~gpu_context();
  gpu_context(const gpu_context&) = delete;
  gpu_context& operator=(const gpu_context&) = delete;

  cudaStream_t stream() const { return stream_; }
  /// Held while a stage queues work or touches the scratch or the steps.
  std::mutex& mutex() { return mu_; }
  const model::hparams& hp() const { return hp_; }
  std::int32_t page_tokens() const { return page_tokens_; }
  /// The block ids' formats (the layer stages' pools); f16 only until set.
  void set_block_space(const kv::block_space& space) { space_ = space; }
  const kv::block_space& block_space() const { return space_; }
  /// The GPU's name, for the startup log.
  const std::string& device_name() const { return name_; }

  /// The scratch, grown for n rows (under mutex()).
  scratch& reserve(std::int32_t n);
  /// The step's state (under mutex()): made, with the host rows uploaded, when no stage has seen
  /// the step yet. `hidden` holds layout.n_rows() x n_embd values then.
  step_state& step(const pipeline::batch_layout& layout, const std::vector<float>& hidden);
  /// Copies the step's rows into hidden, waits for them, and forgets the step (under mutex()).
  void finish_step(const pipeline::batch_layout& layout, std::vector<float>& hidden);
  /// KV pages to and from host RAM, on a stream of their own (not under mutex()).
  page_transfer& transfer() { return transfer_; }

 private:
  /// A step's rows for the two attention kernels (see step_state).
  struct row_split {
    std::vector<cu::prefill_tile> tiles, tiles_q8;
    std::vector<std::int32_t> decode, decode_q8;
    std::int32_t decode_positions = 0, decode_positions_q8 = 0;  // the decode rows' longest reach, plus one
  };
  row_split split_rows(const pipeline::batch_layout& layout, const std::vector<std::int32_t>& pos) const;

  model::hparams hp_;
  std::int32_t page_tokens_;
  kv::block_space space_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  std::mutex mu_;
  scratch s_;
  std::unordered_map<std::uint64_t, std::unique_ptr<step_state>> live_;
  std::vector<std::unique_ptr<step_state>> spare_;  // finished steps' buffers, reused
  page_transfer transfer_;
};

}  // namespace strata::engine::gpu
