#pragma once
// model: a loaded GGUF model (the mapping, its hyperparameters and weight views). Immutable after
// load, so every layer actor may share it.

#include <filesystem>
#include <memory>

#include "src/model/gguf_file.hpp"
#include "src/model/hparams.hpp"
#include "src/model/huge_pages.hpp"
#include "src/model/weights.hpp"

namespace strata::model {

struct model {
  gguf_file file;
  hparams hp;
  model_weights weights;
  /// The model's own copy of its weights, made at load where the CPU has a packed kernel: the
  /// q8_0 matrices repacked (tensor_view::packed points into it), every other tensor copied
  /// (its view's data does). Empty otherwise: the views point into the file mapping.
  huge_pages packed;
  /// Whether every view points into `packed`, so that nothing reads the file mapping's pages.
  bool owns_weights = false;

  /// Lets the OS drop the file mapping's pages when the model owns its weights (anything that read
  /// the whole file, such as the fingerprint, should run first; a page read again later, the
  /// metadata's, only costs a fault).
  void drop_file_pages() const;

  static result<std::shared_ptr<const model>> load(const std::filesystem::path& path);
  static result<std::shared_ptr<const model>> from_file(gguf_file f);
};

}  // namespace strata::model
