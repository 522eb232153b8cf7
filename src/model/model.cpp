#include "src/model/model.hpp"

namespace strata::model {

result<std::shared_ptr<const model>> model::load(const std::filesystem::path& path) {
  auto f = gguf_file::open(path);
  if (!f) return std::move(f).err();
  auto m = from_file(std::move(*f));
  if (!m) return fail(m.err().code, path.string(), ": ", m.err().message);
  return m;
}

result<std::shared_ptr<const model>> model::from_file(gguf_file f) {
  auto m = std::make_shared<model>(model{std::move(f), {}, {}});
  auto hp = hparams::from_gguf(m->file);
  if (!hp) return std::move(hp).err();
  m->hp = *hp;
  auto w = model_weights::bind(m->file, m->hp);
  if (!w) return std::move(w).err();
  m->weights = std::move(*w);
  return std::shared_ptr<const model>(std::move(m));
}

}  // namespace strata::model
