#pragma once
// The model's layers and LM head on an NVIDIA GPU (--device cuda), behind the same stage
// interfaces as the CPU's layer_stage and output_stage: each layer's weights are uploaded once in
// their GGUF types, its KV pages live in device memory (f16 and q8_0, with the CPU's block ids and
// page layouts, so save_pages / load_pages / copy_pages move the same bytes as the CPU path's), and
// run() queues the layer's kernels: matvecs for up to k_matvec_max_batch rows, the tensor-core
// GEMM for more, the tensor-core prefill attention for the rows of sequences with many rows and
// the paged decode attention for the others; decode rows' kernels as a CUDA graph
// (step_graph). The hidden states stay on the device from the first layer to the last
// (gpu_context).

#include <memory>
#include <string>
#include <vector>

#include "actors/pipeline/stage_compute.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/matvec.hpp"
#include "server/engine/cuda/gpu_context.hpp"
#include "server/engine/cuda/step_graph.hpp"
#include "src/kv/kv_format.hpp"
#include "src/model/model.hpp"

namespace strata::engine::gpu {

/// Why the GPU path cannot run this model (architecture, layer kinds, tensor types or shapes), or
/// an empty string when it can.
std::string unsupported(const model::model& m);

class gpu_layer_stage final : public pipeline::layer_compute {
 public:
  /// Uploads layer `layer`'s weights and allocates its f16 and q8_0 KV pages (pages.capacity[f16]
  /// and pages.capacity[q8_0] of them: each format's id range has its own pool; the GPU path keeps
  /// no q4_0 pages). Throws cu::cuda_error or std::invalid_argument.
  gpu_layer_stage(std::shared_ptr<const model::model> m, int layer, const kv::block_space& pages,
                  std::shared_ptr<gpu_context> ctx);
  void run(const pipeline::batch_layout& layout, std::vector<float>& hidden) override;
  void save_pages(std::vector<pipeline::frozen_block>& saved) override;
  void copy_pages(const std::vector<pipeline::block_copy>& copies) override;
  void load_pages(const std::vector<pipeline::frozen_block>& blocks) override;
  /// Device bytes of this layer's weights and of its KV pages.
  std::size_t weight_bytes() const;
  std::size_t kv_bytes() const { return k_.bytes() + v_.bytes() + k8_.bytes() + v8_.bytes(); }

 private:
  /// Bytes of one page of keys (or values) in f16 or q8_0.
  std::size_t page_bytes(bool q8) const;
  /// Block b's place: in the q8_0 pool or the f16 one, at which page (-1: in neither).
  struct place {
    bool q8 = false;
    std::int32_t page = -1;
  };
  place where(std::int32_t block) const;
  bool holds(std::int32_t block) const { return where(block).page >= 0; }
  /// This layer's KV pages of one format, and the step's rows of that format as the decode
  /// attention kernel takes them.
  cu::kv_pages_f16 pages(bool q8) const;
  cu::decode_rows attention_rows(const step_state& st, scratch& sc, bool q8) const;
  /// Queues the layer's kernels for the step on s; allocates nothing and never waits.
  void queue(const step_state& st, scratch& sc, cudaStream_t s);

  std::shared_ptr<const model::model> m_;
  int layer_;
  bool last_;
  std::shared_ptr<gpu_context> ctx_;
  cu::device_matrix wq_, wk_, wv_, wo_, gate_, up_, down_;
  cu::device_buffer attn_norm_, ffn_norm_, bq_, bk_, bv_, q_norm_, k_norm_, inv_freq_, rope_factors_;
  cu::device_buffer k_, v_;    // n_pages_ f16 pages each
  cu::device_buffer k8_, v8_;  // n_pages_q8_ q8_0 pages each
  std::int32_t n_pages_ = 0, n_pages_q8_ = 0;
  kv::block_space space_;
  step_graph graph_;  // the decode rows' kernels
  /// Recorded after the last kernels queued that touch this layer's pages (run, copy_pages): the
  /// copies of a save or a restore wait for it, not for the whole compute stream, so a restore's
  /// copies for this layer run while the layers before it compute.
  cu::device_event pages_used_;
};

class gpu_output_stage final : public pipeline::output_compute {
 public:
  gpu_output_stage(std::shared_ptr<const model::model> m, std::shared_ptr<gpu_context> ctx);
  std::int32_t n_vocab() const override { return m_->hp.n_vocab; }
  void logits(const std::vector<float>& hidden, const std::vector<std::int32_t>& rows, std::vector<float>& out) override;
  std::size_t weight_bytes() const { return w_.bytes(); }

 private:
  std::shared_ptr<const model::model> m_;
  std::shared_ptr<gpu_context> ctx_;
  cu::device_matrix w_;
  cu::device_buffer norm_, x_, cur_, x16_, y_;
  cu::act_q8 xq_;
  std::vector<float> rows_;
};

}  // namespace strata::engine::gpu
