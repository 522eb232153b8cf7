#include "src/model/model.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>

#include "kernels/packed_x16.hpp"
#include "kernels/quants.hpp"
#include "kernels/simd.hpp"

namespace strata::model {

namespace {

using layer_member = tensor_view layer_weights::*;
/// A layer's matrices that the forward pass multiplies by, and the rest of its tensors.
constexpr layer_member k_layer_products[] = {&layer_weights::wq,   &layer_weights::wk,      &layer_weights::wv,
                                             &layer_weights::wqkv, &layer_weights::wo,      &layer_weights::gate,
                                             &layer_weights::up,   &layer_weights::gate_up, &layer_weights::down,
                                             &layer_weights::attn_gate, &layer_weights::ssm_beta, &layer_weights::ssm_alpha,
                                             &layer_weights::ssm_out, &layer_weights::router, &layer_weights::ssm_in,
                                             &layer_weights::gate_exps, &layer_weights::up_exps, &layer_weights::down_exps};
constexpr layer_member k_layer_others[] = {&layer_weights::attn_norm,     &layer_weights::bq,       &layer_weights::bk,
                                           &layer_weights::bv,            &layer_weights::q_norm,   &layer_weights::k_norm,
                                           &layer_weights::post_attn_norm, &layer_weights::ffn_norm, &layer_weights::post_ffn_norm,
                                           &layer_weights::rope_freqs,    &layer_weights::ssm_conv1d, &layer_weights::ssm_dt,
                                           &layer_weights::ssm_a,         &layer_weights::ssm_norm, &layer_weights::ssm_conv1d_b,
                                           &layer_weights::ssm_d,
                                           &layer_weights::router_b,      &layer_weights::gate_exps_b, &layer_weights::up_exps_b,
                                           &layer_weights::down_exps_b,   &layer_weights::bo,       &layer_weights::attn_sinks};

/// The matrices a forward pass multiplies by (the embedding table is read by rows).
std::vector<tensor_view*> product_matrices(model_weights& w) {
  std::vector<tensor_view*> out;
  for (auto& l : w.layers)
    for (layer_member t : k_layer_products) out.push_back(&(l.*t));
  out.push_back(&w.output);
  return out;
}

/// Every tensor view of the model.
std::vector<tensor_view*> all_views(model_weights& w) {
  std::vector<tensor_view*> out = product_matrices(w);
  out.push_back(&w.token_embd);
  out.push_back(&w.output_norm);
  for (auto& l : w.layers)
    for (layer_member t : k_layer_others) out.push_back(&(l.*t));
  return out;
}

std::size_t tensor_bytes(const tensor_view& t) { return kernels::row_bytes(t.type, t.cols) * static_cast<std::size_t>(t.rows); }

/// The whole pages inside [p, p + n) (rounded in: neighbours may still be read).
void drop_pages(const void* p, std::size_t n) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + n) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

/// Maps in the pages of [p, p + n) in one call: page tables filled in the kernel, not a fault
/// per 4 KiB (a hint: failure is fine).
void populate(const void* p, std::size_t n) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(p) / page * page;
  ::madvise(reinterpret_cast<void*>(begin), reinterpret_cast<std::uintptr_t>(p) + n - begin, MADV_POPULATE_READ);
}

/// Repacks the product matrices of at least 16 rows whose type has a packed kernel on this CPU
/// (pack_x16: q8_0, the 4- and 5-bit 32-value block types, mxfp4, q4_K and q6_K), on every core: each copy holds
/// the row groups, then the rows % 16 left over in the GGUF layout, and takes the place of the
/// mapped matrix. A stack of experts' matrices is packed one expert at a time, each where its GGUF
/// bytes were, so that expert e's packed matrix starts at e times the bytes of one. The model then owns every weight it reads:
/// the other tensors are copied too, and a tied embedding table is read from the packed output.
/// So the file's pages can all be dropped, and one copy of the weights stays resident rather
/// than the copy plus whatever pages of the file small reads would map in.
void pack_weights(model& m) {
  const kernels::kernel_table& kt = kernels::active_kernels();
  auto& w = m.weights;
  std::vector<tensor_view*> todo, rest;
  for (tensor_view* t : product_matrices(w))
    if (*t && kt.packed_gemm[kernels::dtype_slot(t->type)] && t->rows / t->experts >= 16) todo.push_back(t);
  if (todo.empty()) return;
  const bool tied = w.token_embd.data == w.output.data;
  const bool output_packed = std::find(todo.begin(), todo.end(), &w.output) != todo.end();
  for (tensor_view* t : all_views(w)) {
    if (!*t || std::find(todo.begin(), todo.end(), t) != todo.end()) continue;
    if (tied && (t == &w.output || (t == &w.token_embd && output_packed))) continue;  // one copy serves both
    rest.push_back(t);
  }
  // One mapping for everything, in huge pages (a few hundred faults instead of one per 4 KiB),
  // each tensor starting on a cache line.
  const std::size_t n = todo.size() + rest.size();
  auto view = [&](std::size_t i) -> tensor_view& { return i < todo.size() ? *todo[i] : *rest[i - todo.size()]; };
  std::vector<std::size_t> offset(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) offset[i + 1] = offset[i] + (tensor_bytes(view(i)) + 63) / 64 * 64;
  const std::size_t total = offset.back();
  m.packed = map_huge_pages(total);
  if (!m.packed) return;  // no memory for the copies: the GGUF layout serves
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < n; i = next++) {
      const tensor_view& t = view(i);
      std::byte* dst = m.packed.get() + offset[i];
      const std::size_t bytes = tensor_bytes(t);
      populate(t.data, bytes);
      if (i < todo.size()) {
        const std::int64_t rows = t.rows / t.experts;
        const std::size_t one = bytes / static_cast<std::size_t>(t.experts);
        for (std::int64_t e = 0; e < t.experts; ++e)
          kernels::pack_x16(t.type, static_cast<const std::byte*>(t.data) + static_cast<std::size_t>(e) * one, rows, t.cols,
                            dst + static_cast<std::size_t>(e) * one);
      } else {
        std::memcpy(dst, t.data, bytes);
      }
      drop_pages(t.data, bytes);  // at once: a large file never has both copies resident
    }
  };
  std::vector<std::jthread> threads;
  for (unsigned t = 1; t < std::max(1u, std::thread::hardware_concurrency()); ++t) threads.emplace_back(work);
  work();
  threads.clear();
  for (std::size_t i = 0; i < n; ++i) {
    if (i < todo.size()) view(i).packed = m.packed.get() + offset[i];
    else view(i).data = m.packed.get() + offset[i];
  }
  if (tied) {
    if (output_packed) w.token_embd.packed = w.output.packed;
    else w.output.data = w.token_embd.data;
  }
  m.owns_weights = true;
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
  m->drop_file_pages();
  return std::shared_ptr<const model>(std::move(m));
}

void model::drop_file_pages() const {
  if (owns_weights) drop_pages(file.bytes().data(), file.bytes().size());
}

}  // namespace strata::model
