#include "src/model/model.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>

#include "kernels/quants.hpp"
#include "kernels/simd.hpp"

namespace strata::model {

namespace {

/// The matrices a forward pass multiplies by (the embedding table is read by rows, and stays).
template <class Weights>
auto product_matrices(Weights& w) {
  using view = std::conditional_t<std::is_const_v<Weights>, const tensor_view, tensor_view>;
  std::vector<view*> out;
  for (auto& l : w.layers)
    for (view* t : {&l.wq, &l.wk, &l.wv, &l.wqkv, &l.wo, &l.gate, &l.up, &l.gate_up, &l.down}) out.push_back(t);
  out.push_back(&w.output);
  return out;
}

/// Lets the OS drop the file mapping's pages that lie wholly inside the packed rows of t (its
/// neighbours may still be read; reading a dropped page again only costs a fault).
void drop_source(const tensor_view& t) {
  if (!t.packed) return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(t.data) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(t.data) +
                    kernels::row_bytes(kernels::dtype::q8_0, t.cols) * static_cast<std::size_t>(t.rows / 16 * 16)) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

/// Maps in the whole pages of [p, p + n) of the file mapping (a hint: failure is fine).
void populate(const void* p, std::size_t n) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(p) / page * page;
  ::madvise(reinterpret_cast<void*>(begin), reinterpret_cast<std::uintptr_t>(p) + n - begin, MADV_POPULATE_READ);
}

/// Repacks the q8_0 product matrices of at least 16 rows for the CPU's packed kernel, when it has
/// one, on every core. Each copy takes the place of the mapped rows in matmul; the file mapping
/// stays for the embedding table and the rows % 16 left over.
void pack_weights(model& m) {
  if (!kernels::active_kernels().q8_0_x16) return;
  std::vector<tensor_view*> todo;
  for (tensor_view* t : product_matrices(m.weights))
    if (*t && t->type == kernels::dtype::q8_0 && t->rows >= 16 && !t->packed) todo.push_back(t);
  // One mapping for every copy, in huge pages where the kernel allows (a few hundred faults
  // instead of one per 4 KiB), each copy starting on a cache line.
  std::vector<std::size_t> offset(todo.size() + 1, 0);
  for (std::size_t i = 0; i < todo.size(); ++i) {
    const std::size_t bytes = kernels::row_bytes(kernels::dtype::q8_0, todo[i]->cols) * static_cast<std::size_t>(todo[i]->rows / 16 * 16);
    offset[i + 1] = offset[i] + (bytes + 63) / 64 * 64;
  }
  const std::size_t total = offset.back();
  if (total == 0) return;
  void* base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return;  // no memory for the copies: the GGUF layout serves
  ::madvise(base, total, MADV_HUGEPAGE);
  m.packed = std::shared_ptr<std::byte>(static_cast<std::byte*>(base), [total](std::byte* p) { ::munmap(p, total); });
  std::vector<std::byte*> dst(todo.size());
  for (std::size_t i = 0; i < todo.size(); ++i) dst[i] = m.packed.get() + offset[i];
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < todo.size(); i = next++) {
      // The mapped rows in one call (page tables filled in the kernel, not a fault per 4 KiB).
      populate(todo[i]->data, kernels::row_bytes(kernels::dtype::q8_0, todo[i]->cols) * static_cast<std::size_t>(todo[i]->rows));
      kernels::repack_q8_0_x16(todo[i]->data, todo[i]->rows / 16, todo[i]->cols, dst[i]);
      // At once, so that a large file never has both copies resident.
      tensor_view done = *todo[i];
      done.packed = dst[i];
      drop_source(done);
    }
  };
  std::vector<std::jthread> threads;
  for (unsigned t = 1; t < std::max(1u, std::thread::hardware_concurrency()); ++t) threads.emplace_back(work);
  work();
  threads.clear();
  for (std::size_t i = 0; i < todo.size(); ++i) todo[i]->packed = dst[i];
}

}  // namespace

result<std::shared_ptr<const model>> model::load(const std::filesystem::path& path) {
  auto f = gguf_file::open(path);
  if (!f) return std::move(f).err();
  auto m = from_file(std::move(*f));
  if (!m) return fail(m.err().code, path.string(), ": ", m.err().message);
  return m;
}

result<std::shared_ptr<const model>> model::from_file(gguf_file f) {
  auto m = std::make_shared<model>(model{std::move(f), {}, {}, {}});
  auto hp = hparams::from_gguf(m->file);
  if (!hp) return std::move(hp).err();
  m->hp = *hp;
  auto w = model_weights::bind(m->file, m->hp);
  if (!w) return std::move(w).err();
  m->weights = std::move(*w);
  pack_weights(*m);
  return std::shared_ptr<const model>(std::move(m));
}

void model::drop_packed_sources() const {
  for (const tensor_view* t : product_matrices(weights)) drop_source(*t);
}

}  // namespace strata::model
