#pragma once
// model: a loaded GGUF model (the mapping, its hyperparameters and weight views). Immutable after
// load, so every layer actor may share it.

#include <filesystem>
#include <memory>

#include "src/model/gguf_file.hpp"
#include "src/model/hparams.hpp"
#include "src/model/weights.hpp"

namespace strata::model {

struct model {
  gguf_file file;
  hparams hp;
  model_weights weights;

  static result<std::shared_ptr<const model>> load(const std::filesystem::path& path);
  static result<std::shared_ptr<const model>> from_file(gguf_file f);
};

}  // namespace strata::model
