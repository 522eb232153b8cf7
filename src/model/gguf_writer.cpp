#include "src/model/gguf_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "kernels/types.hpp"

namespace strata::model {
namespace {

constexpr std::uint32_t k_magic = 0x46554747u;  // "GGUF" read as a little-endian u32
constexpr std::uint32_t k_version = 3;
constexpr std::size_t k_buffer_bytes = 4u << 20;

template <class T>
void put(std::vector<std::byte>& b, T v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  b.insert(b.end(), p, p + sizeof(T));
}

void put_string(std::vector<std::byte>& b, std::string_view s) {
  put(b, static_cast<std::uint64_t>(s.size()));
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  b.insert(b.end(), p, p + s.size());
}

std::uint64_t align_up(std::uint64_t n) { return (n + gguf_writer::k_alignment - 1) / gguf_writer::k_alignment * gguf_writer::k_alignment; }

}  // namespace

/// Where the bytes go: a file (buffered, through write(2)) or a vector.
class gguf_writer::output {
 public:
  explicit output(std::vector<std::byte>* memory) : memory_(memory) {}
  explicit output(int fd) : fd_(fd) { buffer_.reserve(k_buffer_bytes); }

  result<void> write(std::span<const std::byte> b) {
    written_ += b.size();
    if (memory_) {
      memory_->insert(memory_->end(), b.begin(), b.end());
      return {};
    }
    if (buffer_.size() + b.size() > k_buffer_bytes) {
      if (auto r = flush(); !r) return r;
      if (b.size() >= k_buffer_bytes) return write_fd(b);
    }
    buffer_.insert(buffer_.end(), b.begin(), b.end());
    return {};
  }
  result<void> pad_to_alignment() {
    static const std::byte zeros[k_alignment] = {};
    return write(std::span<const std::byte>(zeros, align_up(written_) - written_));
  }
  result<void> flush() {
    if (memory_ || buffer_.empty()) return {};
    auto r = write_fd(buffer_);
    buffer_.clear();
    return r;
  }
  std::uint64_t written() const { return written_; }

 private:
  result<void> write_fd(std::span<const std::byte> b) {
    while (!b.empty()) {
      ssize_t n = ::write(fd_, b.data(), b.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return fail(errc::io_error, "write failed: ", std::strerror(errno));
      }
      b = b.subspan(static_cast<std::size_t>(n));
    }
    return {};
  }

  std::vector<std::byte>* memory_ = nullptr;
  int fd_ = -1;
  std::vector<std::byte> buffer_;
  std::uint64_t written_ = 0;
};

void gguf_writer::set(std::string_view key, gguf_type type, std::vector<std::byte> value) {
  for (kv_entry& e : kvs_) {
    if (e.key == key) {
      e.type = type;
      e.value = std::move(value);
      return;
    }
  }
  kvs_.push_back({std::string(key), type, std::move(value)});
}

template <class T>
void gguf_writer::set_scalar(std::string_view key, gguf_type type, T v) {
  std::vector<std::byte> b;
  put(b, v);
  set(key, type, std::move(b));
}

template <class T>
void gguf_writer::set_array(std::string_view key, gguf_type elem, std::span<const T> v) {
  std::vector<std::byte> b;
  b.reserve(12 + v.size() * sizeof(T));
  put(b, static_cast<std::uint32_t>(elem));
  put(b, static_cast<std::uint64_t>(v.size()));
  for (const T& x : v) put(b, x);
  set(key, gguf_type::array, std::move(b));
}

void gguf_writer::add_u8(std::string_view key, std::uint8_t v) { set_scalar(key, gguf_type::u8, v); }
void gguf_writer::add_i8(std::string_view key, std::int8_t v) { set_scalar(key, gguf_type::i8, v); }
void gguf_writer::add_u16(std::string_view key, std::uint16_t v) { set_scalar(key, gguf_type::u16, v); }
void gguf_writer::add_i16(std::string_view key, std::int16_t v) { set_scalar(key, gguf_type::i16, v); }
void gguf_writer::add_u32(std::string_view key, std::uint32_t v) { set_scalar(key, gguf_type::u32, v); }
void gguf_writer::add_i32(std::string_view key, std::int32_t v) { set_scalar(key, gguf_type::i32, v); }
void gguf_writer::add_u64(std::string_view key, std::uint64_t v) { set_scalar(key, gguf_type::u64, v); }
void gguf_writer::add_i64(std::string_view key, std::int64_t v) { set_scalar(key, gguf_type::i64, v); }
void gguf_writer::add_f32(std::string_view key, float v) { set_scalar(key, gguf_type::f32, v); }
void gguf_writer::add_f64(std::string_view key, double v) { set_scalar(key, gguf_type::f64, v); }
void gguf_writer::add_bool(std::string_view key, bool v) { set_scalar(key, gguf_type::boolean, static_cast<std::uint8_t>(v ? 1 : 0)); }

void gguf_writer::add_string(std::string_view key, std::string_view v) {
  std::vector<std::byte> b;
  put_string(b, v);
  set(key, gguf_type::string, std::move(b));
}

void gguf_writer::add_string_array(std::string_view key, std::span<const std::string> v) {
  std::vector<std::string_view> views(v.begin(), v.end());
  add_string_array(key, std::span<const std::string_view>(views));
}

void gguf_writer::add_string_array(std::string_view key, std::span<const std::string_view> v) {
  std::vector<std::byte> b;
  std::size_t total = 12;
  for (std::string_view s : v) total += 8 + s.size();
  b.reserve(total);
  put(b, static_cast<std::uint32_t>(gguf_type::string));
  put(b, static_cast<std::uint64_t>(v.size()));
  for (std::string_view s : v) put_string(b, s);
  set(key, gguf_type::array, std::move(b));
}

void gguf_writer::add_i32_array(std::string_view key, std::span<const std::int32_t> v) { set_array(key, gguf_type::i32, v); }
void gguf_writer::add_i64_array(std::string_view key, std::span<const std::int64_t> v) { set_array(key, gguf_type::i64, v); }
void gguf_writer::add_u32_array(std::string_view key, std::span<const std::uint32_t> v) { set_array(key, gguf_type::u32, v); }
void gguf_writer::add_f32_array(std::string_view key, std::span<const float> v) { set_array(key, gguf_type::f32, v); }
void gguf_writer::add_f64_array(std::string_view key, std::span<const double> v) { set_array(key, gguf_type::f64, v); }

void gguf_writer::add_bool_array(std::string_view key, std::span<const bool> v) {
  std::vector<std::uint8_t> bytes(v.begin(), v.end());
  set_array(key, gguf_type::boolean, std::span<const std::uint8_t>(bytes));
}

result<void> gguf_writer::copy_kv(const gguf_file& from, std::string_view key) {
  auto type = from.type_of(key);
  auto raw = from.raw_value(key);
  if (!type || !raw) return fail(errc::not_found, "metadata key '", key, "' is not in the source file");
  set(key, *type, std::vector<std::byte>(raw->begin(), raw->end()));
  return {};
}

bool gguf_writer::has(std::string_view key) const {
  return std::any_of(kvs_.begin(), kvs_.end(), [&](const kv_entry& e) { return e.key == key; });
}

void gguf_writer::remove(std::string_view key) {
  std::erase_if(kvs_, [&](const kv_entry& e) { return e.key == key; });
}

result<void> gguf_writer::add_tensor(std::string_view name, std::uint32_t type, std::span<const std::int64_t> ne, tensor_source source) {
  if (name.empty()) return fail(errc::invalid_argument, "a tensor needs a name");
  for (const tensor_entry& t : tensors_) {
    if (t.name == name) return fail(errc::invalid_argument, "tensor '", name, "' was added twice");
  }
  auto dt = kernels::dtype_from_id(type);
  if (!dt) return fail(errc::unsupported, "tensor '", name, "': type ", kernels::ggml_type_name(type), " is not supported");
  if (ne.empty() || ne.size() > 4) return fail(errc::invalid_argument, "tensor '", name, "': ", ne.size(), " dimensions (1 to 4 allowed)");
  std::uint64_t rows = 1;
  for (std::int64_t n : ne) {
    if (n <= 0) return fail(errc::invalid_argument, "tensor '", name, "': dimension ", n, " is not positive");
  }
  for (std::size_t d = 1; d < ne.size(); ++d) rows *= static_cast<std::uint64_t>(ne[d]);
  if (ne[0] % kernels::block_elements(*dt) != 0)
    return fail(errc::invalid_argument, "tensor '", name, "': row length ", ne[0], " is not a multiple of the ", kernels::dtype_name(*dt),
                " block size ", kernels::block_elements(*dt));
  if (!source) return fail(errc::invalid_argument, "tensor '", name, "' has no data source");
  tensor_entry t{std::string(name), type, std::vector<std::int64_t>(ne.begin(), ne.end()), kernels::row_bytes(*dt, ne[0]) * rows, 0, std::move(source)};
  t.offset = data_size_;
  data_size_ = align_up(data_size_ + t.n_bytes);
  tensors_.push_back(std::move(t));
  return {};
}

result<void> gguf_writer::add_tensor(std::string_view name, std::uint32_t type, std::span<const std::int64_t> ne, std::span<const std::byte> data) {
  auto copy = std::make_shared<std::vector<std::byte>>(data.begin(), data.end());
  auto r = add_tensor(name, type, ne, [copy](const tensor_sink& sink) { return sink(*copy); });
  if (!r) return r;
  if (tensors_.back().n_bytes != data.size()) {
    std::uint64_t expected = tensors_.back().n_bytes;
    data_size_ = tensors_.back().offset;
    tensors_.pop_back();
    return fail(errc::invalid_argument, "tensor '", name, "': ", data.size(), " bytes given, its shape and type take ", expected);
  }
  return {};
}

std::vector<std::byte> gguf_writer::header_bytes() const {
  std::vector<std::byte> b;
  const bool own_alignment = !has("general.alignment");
  put(b, k_magic);
  put(b, k_version);
  put(b, static_cast<std::uint64_t>(tensors_.size()));
  put(b, static_cast<std::uint64_t>(kvs_.size() + (own_alignment ? 1 : 0)));
  for (const kv_entry& e : kvs_) {
    put_string(b, e.key);
    if (e.key == "general.alignment") {
      // The layout below is aligned to k_alignment whatever value a caller set.
      put(b, static_cast<std::uint32_t>(gguf_type::u32));
      put(b, static_cast<std::uint32_t>(k_alignment));
      continue;
    }
    put(b, static_cast<std::uint32_t>(e.type));
    b.insert(b.end(), e.value.begin(), e.value.end());
  }
  if (own_alignment) {
    put_string(b, "general.alignment");
    put(b, static_cast<std::uint32_t>(gguf_type::u32));
    put(b, static_cast<std::uint32_t>(k_alignment));
  }
  for (const tensor_entry& t : tensors_) {
    put_string(b, t.name);
    put(b, static_cast<std::uint32_t>(t.ne.size()));
    for (std::int64_t n : t.ne) put(b, static_cast<std::uint64_t>(n));
    put(b, t.type);
    put(b, t.offset);
  }
  return b;
}

std::uint64_t gguf_writer::file_size() const {
  std::uint64_t header = header_bytes().size();
  if (tensors_.empty()) return header;
  const tensor_entry& last = tensors_.back();
  return align_up(header) + last.offset + last.n_bytes;
}

result<void> gguf_writer::write_to(output& out, const progress_fn& progress) const {
  std::vector<std::byte> header = header_bytes();
  if (auto r = out.write(header); !r) return r;
  if (tensors_.empty()) return out.flush();
  if (auto r = out.pad_to_alignment(); !r) return r;
  const std::uint64_t data_start = out.written();
  const std::uint64_t total = align_up(header.size()) + tensors_.back().offset + tensors_.back().n_bytes;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const tensor_entry& t = tensors_[i];
    if (auto r = out.pad_to_alignment(); !r) return r;
    std::uint64_t start = out.written();
    if (start - data_start != t.offset) return fail(errc::bad_state, "tensor '", t.name, "' would start at the wrong offset");
    std::uint64_t got = 0;
    tensor_sink sink = [&](std::span<const std::byte> piece) -> result<void> {
      if (piece.size() > t.n_bytes - got)
        return fail(errc::invalid_argument, "tensor '", t.name, "': its source produced more than its ", t.n_bytes, " bytes");
      got += piece.size();
      return out.write(piece);
    };
    if (auto r = t.source(sink); !r) return fail(r.err().code, "tensor '", t.name, "': ", r.err().message);
    if (got != t.n_bytes)
      return fail(errc::invalid_argument, "tensor '", t.name, "': its source produced ", got, " bytes, expected ", t.n_bytes);
    if (progress) progress(i + 1, tensors_.size(), out.written(), total);
  }
  return out.flush();
}

result<void> gguf_writer::write_file(const std::filesystem::path& path, const progress_fn& progress) const {
  std::filesystem::path part = path;
  part += ".part";
  int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail(errc::io_error, "cannot create ", part.string(), ": ", std::strerror(errno));
  output out(fd);
  auto r = write_to(out, progress);
  if (r && ::fsync(fd) != 0) r = fail(errc::io_error, "cannot sync ", part.string(), ": ", std::strerror(errno));
  if (::close(fd) != 0 && r) r = fail(errc::io_error, "cannot close ", part.string(), ": ", std::strerror(errno));
  if (r) {
    std::error_code ec;
    std::filesystem::rename(part, path, ec);
    if (ec) r = fail(errc::io_error, "cannot rename ", part.string(), " to ", path.string(), ": ", ec.message());
  }
  if (!r) {
    std::error_code ignored;
    std::filesystem::remove(part, ignored);
    return fail(r.err().code, path.string(), ": ", r.err().message);
  }
  return {};
}

result<std::vector<std::byte>> gguf_writer::write_memory() const {
  std::vector<std::byte> bytes;
  output out(&bytes);
  if (auto r = write_to(out, {}); !r) return std::move(r).err();
  return bytes;
}

}  // namespace strata::model
