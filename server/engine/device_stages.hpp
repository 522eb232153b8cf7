#pragma once
// The layer and output stages of a model on a GPU (model.device = cuda), made at load so that a
// model the GPU path cannot run, or a build without CUDA, fails the start with a message.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/pipeline/stage_compute.hpp"
#include "src/common/error.hpp"
#include "src/kv/kv_format.hpp"
#include "src/model/model.hpp"

namespace strata::engine {

struct device_stages {
  std::vector<std::shared_ptr<pipeline::layer_compute>> layers;  // one per layer, in order
  std::shared_ptr<pipeline::output_compute> output;
  /// For the startup log: the GPU's name, and the device memory taken by weights and KV pages.
  std::string summary;
};

/// Uploads every layer's weights and the LM head to the first CUDA device and allocates each
/// layer's f16 KV pages (pages.capacity of the f16 format). Fails (unsupported) in a build without
/// -DSTRATA_CUDA=ON, for a model the GPU path does not run, or when the device cannot take it.
result<device_stages> make_gpu_stages(const std::shared_ptr<const model::model>& m, const kv::block_space& pages,
                                      std::int32_t page_tokens);

}  // namespace strata::engine
