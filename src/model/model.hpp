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
  /// The repacked copies of q8_0 matrices (tensor_view::packed points into them), made at load
  /// where the CPU's kernels take them.
  std::shared_ptr<std::byte> packed;

  /// Lets the OS drop the mapped file pages of the matrices that have a packed copy: they are no
  /// longer read, so the process keeps one copy of the weights resident, not two. Anything that
  /// reads the whole file (the fingerprint) should run first; reading such a page again later
  /// only costs a fault.
  void drop_packed_sources() const;

  static result<std::shared_ptr<const model>> load(const std::filesystem::path& path);
  static result<std::shared_ptr<const model>> from_file(gguf_file f);
};

}  // namespace strata::model
