#pragma once
// The weight types strata computes with, identified by their GGML type ids as GGUF stores them.

#include <cstddef>
#include <cstdint>
#include <optional>

namespace strata::kernels {

enum class dtype : std::uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q4_k = 12, q5_k = 13, q6_k = 14, iq4_nl = 20, bf16 = 30,
  mxfp4 = 39
};

/// nullopt for a GGML type id strata does not support.
std::optional<dtype> dtype_from_id(std::uint32_t ggml_type);
/// "f16", "q4_K", ...
const char* dtype_name(dtype t);
/// The name of any GGML type id ("iq2_xs", "unknown(77)"; the latter lives in a per-thread
/// buffer until the next unknown id on the same thread).
const char* ggml_type_name(std::uint32_t ggml_type);
/// Elements per block (1 for f32/f16/bf16, 32 for q4_0/q4_1/q5_0/q5_1/q8_0/iq4_nl/mxfp4, 256
/// for K-quants).
std::int64_t block_elements(dtype t);
std::size_t block_bytes(dtype t);
/// Bytes of a row of n elements; n must be a multiple of block_elements.
inline std::size_t row_bytes(dtype t, std::int64_t n) {
  return static_cast<std::size_t>(n / block_elements(t)) * block_bytes(t);
}

}  // namespace strata::kernels
