#pragma once
// gguf_file: a validated, memory-mapped GGUF file (versions 2 and 3). Opening reads the header,
// the metadata and the tensor table; tensor data stays in the mapping and is never copied.
//
//   +--------+---------+----------+------------+-----------------------+---------------------+
//   | "GGUF" | version | n_tensor | n_kv (u64) | kv pairs ... tensors  | pad to alignment,   |
//   | u32    | u32     | u64      |            | (name, dims, type,    | then the data       |
//   |        |         |          |            |  offset)              | section             |
//   +--------+---------+----------+------------+-----------------------+---------------------+

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/common/error.hpp"

namespace strata::model {

enum class gguf_type : std::uint32_t { u8 = 0, i8, u16, i16, u32, i32, f32, boolean, string, array, u64, i64, f64 };

/// One tensor's header; `data` points into the mapping.
struct gguf_tensor {
  std::string name;
  std::uint32_t type = 0;  // GGML type id as stored
  std::array<std::int64_t, 4> ne{1, 1, 1, 1};  // ne[0] is the row length; unused dims are 1
  int n_dims = 0;
  std::uint64_t offset = 0;  // relative to the data section
  const std::byte* data = nullptr;
  std::uint64_t n_bytes = 0;
  std::int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class gguf_file {
 public:
  /// Maps and validates the file. Every failure names what is wrong.
  static result<gguf_file> open(const std::filesystem::path& path);
  /// Validates bytes the caller keeps alive (tests, the fuzzer). No copy.
  static result<gguf_file> parse(std::span<const std::byte> bytes);

  gguf_file(gguf_file&& o) noexcept;
  gguf_file& operator=(gguf_file&& o) noexcept;
  gguf_file(const gguf_file&) = delete;
  gguf_file& operator=(const gguf_file&) = delete;
  ~gguf_file();

  std::uint32_t version() const { return version_; }
  bool has(std::string_view key) const { return kv_.contains(std::string(key)); }
  std::optional<gguf_type> type_of(std::string_view key) const;
  std::optional<std::string_view> get_string(std::string_view key) const;
  /// Any integer type (and booleans).
  std::optional<std::int64_t> get_int(std::string_view key) const;
  /// f32/f64 and integers.
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::vector<std::string_view>> get_string_array(std::string_view key) const;
  std::optional<std::vector<float>> get_float_array(std::string_view key) const;
  std::optional<std::vector<std::int64_t>> get_int_array(std::string_view key) const;
  /// Number of elements of an array value, or nullopt.
  std::optional<std::uint64_t> array_size(std::string_view key) const;
  /// Element type of an array value, or nullopt.
  std::optional<gguf_type> array_type(std::string_view key) const;
  /// The value's encoded bytes as stored after its type field (for an array: element type,
  /// count, elements), for copying it into another file.
  std::optional<std::span<const std::byte>> raw_value(std::string_view key) const;
  std::vector<std::string> keys() const;

  const std::vector<gguf_tensor>& tensors() const { return tensors_; }
  const gguf_tensor* find_tensor(std::string_view name) const;
  std::uint64_t file_size() const { return size_; }
  /// The whole file as mapped (header, metadata, tensor data).
  std::span<const std::byte> bytes() const { return {base_, static_cast<std::size_t>(size_)}; }
  std::uint64_t alignment() const { return alignment_; }
  /// general.architecture, "" when absent.
  std::string_view architecture() const;

 private:
  struct value_ref {
    gguf_type type{};
    gguf_type elem{};       // for arrays
    std::uint64_t count = 0;  // for arrays
    std::size_t pos = 0;      // where the value (or the array's first element) starts
    std::size_t begin = 0;    // the encoded value: [begin, end)
    std::size_t end = 0;
  };
  gguf_file() = default;
  result<void> load();
  void unmap();

  const std::byte* base_ = nullptr;
  std::uint64_t size_ = 0;
  bool mapped_ = false;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::unordered_map<std::string, value_ref> kv_;
  std::vector<std::string> key_order_;
  std::vector<gguf_tensor> tensors_;
  std::unordered_map<std::string, std::size_t> tensor_index_;
};

}  // namespace strata::model
