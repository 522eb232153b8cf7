#pragma once
// gguf_writer: builds a GGUF version 3 file from metadata and tensors. Tensor data may come from
// a callback that produces it piece by piece while the file is written, so a large model is never
// held in memory whole.
//
//   header | kv pairs (in the order added) | tensor infos | pad to 32 | tensor 0 | pad | tensor 1 ...

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/error.hpp"
#include "src/model/gguf_file.hpp"

namespace strata::model {

class gguf_writer {
 public:
  /// Alignment of the data section and of every tensor; written as general.alignment.
  static constexpr std::uint64_t k_alignment = 32;

  /// Receives the next piece of a tensor's bytes.
  using tensor_sink = std::function<result<void>(std::span<const std::byte>)>;
  /// Produces a tensor's bytes, in order, by calling the sink one or more times.
  using tensor_source = std::function<result<void>(const tensor_sink&)>;
  /// Called after each tensor is written: (tensors done, tensor count, bytes written, total bytes).
  using progress_fn = std::function<void(std::size_t, std::size_t, std::uint64_t, std::uint64_t)>;

  // Metadata. Adding a key that exists replaces its value in place (its position stays).
  void add_u8(std::string_view key, std::uint8_t v);
  void add_i8(std::string_view key, std::int8_t v);
  void add_u16(std::string_view key, std::uint16_t v);
  void add_i16(std::string_view key, std::int16_t v);
  void add_u32(std::string_view key, std::uint32_t v);
  void add_i32(std::string_view key, std::int32_t v);
  void add_u64(std::string_view key, std::uint64_t v);
  void add_i64(std::string_view key, std::int64_t v);
  void add_f32(std::string_view key, float v);
  void add_f64(std::string_view key, double v);
  void add_bool(std::string_view key, bool v);
  void add_string(std::string_view key, std::string_view v);
  void add_string_array(std::string_view key, std::span<const std::string> v);
  void add_string_array(std::string_view key, std::span<const std::string_view> v);
  void add_i32_array(std::string_view key, std::span<const std::int32_t> v);
  void add_i64_array(std::string_view key, std::span<const std::int64_t> v);
  void add_u32_array(std::string_view key, std::span<const std::uint32_t> v);
  void add_f32_array(std::string_view key, std::span<const float> v);
  void add_f64_array(std::string_view key, std::span<const double> v);
  void add_bool_array(std::string_view key, std::span<const bool> v);
  /// Copies the key's value, whatever its type (nested arrays included), from another file.
  result<void> copy_kv(const gguf_file& from, std::string_view key);
  bool has(std::string_view key) const;
  void remove(std::string_view key);

  /// Declares a tensor whose bytes `source` produces when the file is written. `ne` lists the
  /// element counts, row length first (1 to 4 dimensions). The type must be one strata supports
  /// and the row length a multiple of its block size.
  result<void> add_tensor(std::string_view name, std::uint32_t type, std::span<const std::int64_t> ne, tensor_source source);
  /// Declares a tensor with its bytes (copied); their count must match the shape and type.
  result<void> add_tensor(std::string_view name, std::uint32_t type, std::span<const std::int64_t> ne, std::span<const std::byte> data);
  result<void> add_tensor(std::string_view name, std::uint32_t type, std::initializer_list<std::int64_t> ne, std::span<const std::byte> data) {
    return add_tensor(name, type, std::span<const std::int64_t>(ne.begin(), ne.size()), data);
  }

  std::size_t tensor_count() const { return tensors_.size(); }
  /// Bytes the whole file will take.
  std::uint64_t file_size() const;

  /// Writes the file: first to `path` + ".part", renamed over `path` once complete.
  result<void> write_file(const std::filesystem::path& path, const progress_fn& progress = {}) const;
  /// The whole file in memory (tests, small files).
  result<std::vector<std::byte>> write_memory() const;

 private:
  struct kv_entry {
    std::string key;
    gguf_type type;
    std::vector<std::byte> value;  // the encoded value after the type field
  };
  struct tensor_entry {
    std::string name;
    std::uint32_t type;
    std::vector<std::int64_t> ne;
    std::uint64_t n_bytes;
    std::uint64_t offset;  // within the data section
    tensor_source source;
  };
  class output;

  void set(std::string_view key, gguf_type type, std::vector<std::byte> value);
  template <class T>
  void set_scalar(std::string_view key, gguf_type type, T v);
  template <class T>
  void set_array(std::string_view key, gguf_type elem, std::span<const T> v);
  std::vector<std::byte> header_bytes() const;
  result<void> write_to(output& out, const progress_fn& progress) const;

  std::vector<kv_entry> kvs_;
  std::vector<tensor_entry> tensors_;
  std::uint64_t data_size_ = 0;
};

}  // namespace strata::model
