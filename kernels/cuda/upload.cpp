// Upload of GGUF weight rows into the device layout that matvec.hpp describes.

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/matvec.hpp"
#include "kernels/quants.hpp"

namespace strata::kernels::cuda {
namespace {

/// The split of one GGUF row into its quants (q) and side scales (s).
struct split_sizes {
  std::size_t q = 0, s = 0;
};

split_sizes split_row_bytes(dtype t, std::int64_t k) {
  const auto blocks = static_cast<std::size_t>(k / block_elements(t));
  switch (t) {
    case dtype::q8_0: return {blocks * 32, blocks * 2};
    case dtype::q4_0: return {blocks * 16, blocks * 2};
    case dtype::q4_1: return {blocks * 16, blocks * 4};
    case dtype::q6_k: return {blocks * 208, blocks * 2};
    default: return {row_bytes(t, k), 0};
  }
}

/// Splits one GGUF row (k values) into q and s.
void split_row(dtype t, const std::byte* src, std::int64_t k, std::byte* q, std::byte* s) {
  const std::int64_t nb = k / block_elements(t);
  for (std::int64_t i = 0; i < nb; ++i) {
    switch (t) {
      case dtype::q8_0: {
        const auto* b = reinterpret_cast<const block_q8_0*>(src) + i;
        std::memcpy(q + i * 32, b->qs, 32);
        std::memcpy(s + i * 2, &b->d, 2);
        break;
      }
      case dtype::q4_0: {
        const auto* b = reinterpret_cast<const block_q4_0*>(src) + i;
        std::memcpy(q + i * 16, b->qs, 16);
        std::memcpy(s + i * 2, &b->d, 2);
        break;
      }
      case dtype::q4_1: {
        const auto* b = reinterpret_cast<const block_q4_1*>(src) + i;
        std::memcpy(q + i * 16, b->qs, 16);
        std::memcpy(s + i * 4, &b->d, 2);
        std::memcpy(s + i * 4 + 2, &b->m, 2);
        break;
      }
      case dtype::q6_k: {
        const auto* b = reinterpret_cast<const block_q6_k*>(src) + i;
        std::byte* o = q + i * 208;
        std::memcpy(o, b->ql, 128);
        std::memcpy(o + 128, b->qh, 64);
        std::memcpy(o + 192, b->scales, 16);
        std::memcpy(s + i * 2, &b->d, 2);
        break;
      }
      default: return;
    }
  }
}

}  // namespace

bool matvec_supports(dtype t) {
  switch (t) {
    case dtype::f16: case dtype::bf16: case dtype::q8_0: case dtype::q4_0: case dtype::q4_1:
    case dtype::q4_k: case dtype::q5_k: case dtype::q6_k: return true;
    default: return false;
  }
}

std::int64_t matvec_k_multiple(dtype t) {
  switch (t) {
    case dtype::f16: case dtype::bf16: return 8;   // one 16-byte load: 8 values
    case dtype::q4_k: case dtype::q5_k: case dtype::q6_k: return 256;
    default: return 32;
  }
}

device_matrix upload_matrix(dtype t, const void* rows, std::int64_t n_rows, std::int64_t k, cudaStream_t stream) {
  if (!matvec_supports(t)) throw std::invalid_argument(std::string("matvec: unsupported weight type ") + dtype_name(t));
  if (k <= 0 || k % matvec_k_multiple(t) != 0 || n_rows <= 0)
    throw std::invalid_argument("matvec: k must be a positive multiple of " + std::to_string(matvec_k_multiple(t)) + " for " +
                                dtype_name(t));
  device_matrix m;
  m.type = t;
  m.rows = n_rows;
  m.k = k;
  const split_sizes sz = split_row_bytes(t, k);
  m.q_row_bytes = sz.q;
  m.s_row_bytes = sz.s;
  m.q = device_buffer(sz.q * static_cast<std::size_t>(n_rows));
  const auto* src = static_cast<const std::byte*>(rows);
  if (sz.s == 0) {
    m.q.upload(src, m.q.bytes(), stream);
  } else {
    m.s = device_buffer(sz.s * static_cast<std::size_t>(n_rows));
    std::vector<std::byte> q(m.q.bytes()), s(m.s.bytes());
    const std::size_t in_row = row_bytes(t, k);
    for (std::int64_t r = 0; r < n_rows; ++r)
      split_row(t, src + static_cast<std::size_t>(r) * in_row, k, q.data() + static_cast<std::size_t>(r) * sz.q,
                s.data() + static_cast<std::size_t>(r) * sz.s);
    m.q.upload(q.data(), q.size(), stream);
    m.s.upload(s.data(), s.size(), stream);
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (upload_matrix)");
  return m;
}

act_q8 make_act_q8(std::int64_t k, int max_rows) {
  if (k <= 0 || k % 32 != 0 || max_rows <= 0) throw std::invalid_argument("make_act_q8: k must be a positive multiple of 32");
  act_q8 a;
  a.k = k;
  a.max_rows = max_rows;
  a.q = device_buffer(static_cast<std::size_t>(k) * static_cast<std::size_t>(max_rows));
  a.ds = device_buffer(static_cast<std::size_t>(k / 32) * static_cast<std::size_t>(max_rows) * 2 * sizeof(float));
  return a;
}

}  // namespace strata::kernels::cuda
