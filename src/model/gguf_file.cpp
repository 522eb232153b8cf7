#include "src/model/gguf_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <limits>
#include <optional>
#include <type_traits>

#include "kernels/types.hpp"

namespace strata::model {
namespace {

constexpr std::uint64_t k_max_string = 1ull << 30;
constexpr int k_max_dims = 4;

const char* type_name(gguf_type t) {
  static const char* const names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<std::uint32_t>(t);
  return i < 13 ? names[i] : "unknown";
}

std::size_t scalar_size(gguf_type t) {
  switch (t) {
    case gguf_type::u8: case gguf_type::i8: case gguf_type::boolean: return 1;
    case gguf_type::u16: case gguf_type::i16: return 2;
    case gguf_type::u32: case gguf_type::i32: case gguf_type::f32: return 4;
    case gguf_type::u64: case gguf_type::i64: case gguf_type::f64: return 8;
    default: return 0;
  }
}

/// Bounds-checked little-endian reader over the file bytes.
class cursor {
 public:
  cursor(const std::byte* p, std::uint64_t n) : p_(p), n_(n) {}
  std::uint64_t pos() const { return pos_; }
  std::uint64_t left() const { return n_ - pos_; }

  template <class T>
  result<T> read(const char* what) {
    if (left() < sizeof(T)) return fail(errc::corrupt_data, "truncated file: ", what, " at byte ", pos_, " runs past the end (", n_, " bytes)");
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  result<std::string_view> read_string(const char* what) {
    auto len = read<std::uint64_t>(what);
    if (!len) return std::move(len).err();
    if (*len > k_max_string || *len > left())
      return fail(errc::corrupt_data, what, " at byte ", pos_ - 8, ": string length ", *len, " exceeds the ", left(), " bytes left");
    std::string_view s(reinterpret_cast<const char*>(p_ + pos_), *len);
    pos_ += *len;
    return s;
  }
  result<void> skip(std::uint64_t n, const char* what) {
    if (n > left()) return fail(errc::corrupt_data, "truncated file: ", what, " at byte ", pos_, " needs ", n, " bytes, ", left(), " left");
    pos_ += n;
    return {};
  }

 private:
  const std::byte* p_;
  std::uint64_t n_;
  std::uint64_t pos_ = 0;
};

result<gguf_type> read_type(cursor& c, const std::string& key) {
  auto t = c.read<std::uint32_t>("value type");
  if (!t) return std::move(t).err();
  if (*t > 12) return fail(errc::corrupt_data, "key '", key, "': unknown value type ", *t);
  return static_cast<gguf_type>(*t);
}

/// Skips one value of type t (validating strings and nested arrays).
result<void> skip_value(cursor& c, gguf_type t, const std::string& key, int depth) {
  if (t == gguf_type::string) {
    auto s = c.read_string("string value");
    if (!s) return fail(errc::corrupt_data, "key '", key, "': ", s.err().message);
    return {};
  }
  if (t == gguf_type::array) {
    if (depth > 2) return fail(errc::corrupt_data, "key '", key, "': arrays nested too deeply");
    auto et = read_type(c, key);
    if (!et) return std::move(et).err();
    auto n = c.read<std::uint64_t>("array length");
    if (!n) return fail(errc::corrupt_data, "key '", key, "': ", n.err().message);
    if (std::size_t sz = scalar_size(*et)) {
      if (*n > c.left() / sz) return fail(errc::corrupt_data, "key '", key, "': array of ", *n, " ", type_name(*et), " runs past the end of the file");
      return c.skip(*n * sz, "array");
    }
    // Each string or nested array takes at least 8 bytes: reject impossible counts before looping.
    if (*n > c.left() / 8) return fail(errc::corrupt_data, "key '", key, "': array of ", *n, " elements runs past the end of the file");
    for (std::uint64_t i = 0; i < *n; ++i) {
      if (auto r = skip_value(c, *et, key, depth + 1); !r) return r;
    }
    return {};
  }
  return c.skip(scalar_size(t), "value");
}

template <class T>
T read_le(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

/// Calls f with the scalar of type t at p, as its own C++ type (boolean as bool); nullopt for a
/// type that is not a scalar.
template <class R, class F>
std::optional<R> visit_scalar(gguf_type t, const std::byte* p, F f) {
  switch (t) {
    case gguf_type::u8: return f(read_le<std::uint8_t>(p));
    case gguf_type::i8: return f(read_le<std::int8_t>(p));
    case gguf_type::u16: return f(read_le<std::uint16_t>(p));
    case gguf_type::i16: return f(read_le<std::int16_t>(p));
    case gguf_type::u32: return f(read_le<std::uint32_t>(p));
    case gguf_type::i32: return f(read_le<std::int32_t>(p));
    case gguf_type::u64: return f(read_le<std::uint64_t>(p));
    case gguf_type::i64: return f(read_le<std::int64_t>(p));
    case gguf_type::f32: return f(read_le<float>(p));
    case gguf_type::f64: return f(read_le<double>(p));
    case gguf_type::boolean: return f(read_le<std::uint8_t>(p) != 0);
    default: return std::nullopt;
  }
}

std::optional<double> scalar_as_double(gguf_type t, const std::byte* p) {
  return visit_scalar<double>(t, p, [](auto v) -> std::optional<double> { return static_cast<double>(v); });
}

/// Integers and booleans; floats are not integers, and a u64 above the int64 range has none.
std::optional<std::int64_t> scalar_as_int(gguf_type t, const std::byte* p) {
  return visit_scalar<std::int64_t>(t, p, [](auto v) -> std::optional<std::int64_t> {
    using V = decltype(v);
    if constexpr (std::is_floating_point_v<V>) {
      return std::nullopt;
    } else if constexpr (std::is_same_v<V, std::uint64_t>) {
      if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
      return static_cast<std::int64_t>(v);
    } else {
      return static_cast<std::int64_t>(v);
    }
  });
}

}  // namespace

gguf_file::gguf_file(gguf_file&& o) noexcept { *this = std::move(o); }

gguf_file& gguf_file::operator=(gguf_file&& o) noexcept {
  if (this != &o) {
    unmap();
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, false);
    version_ = o.version_;
    alignment_ = o.alignment_;
    kv_ = std::move(o.kv_);
    key_order_ = std::move(o.key_order_);
    tensors_ = std::move(o.tensors_);
    tensor_index_ = std::move(o.tensor_index_);
  }
  return *this;
}

gguf_file::~gguf_file() { unmap(); }

void gguf_file::unmap() {
  if (mapped_ && base_) ::munmap(const_cast<std::byte*>(base_), size_);
  mapped_ = false;
  base_ = nullptr;
}

result<gguf_file> gguf_file::open(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(errc::io_error, "cannot open ", path.string(), ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return fail(errc::io_error, "cannot stat ", path.string(), ": ", std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail(errc::invalid_argument, path.string(), " is not a regular file");
  }
  if (st.st_size < 24) {
    ::close(fd);
    return fail(errc::corrupt_data, path.string(), ": ", st.st_size, " bytes is too small for a GGUF file");
  }
  void* p = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) return fail(errc::io_error, "cannot map ", path.string(), ": ", std::strerror(e));
  gguf_file f;
  f.base_ = static_cast<const std::byte*>(p);
  f.size_ = static_cast<std::uint64_t>(st.st_size);
  f.mapped_ = true;
  if (auto r = f.load(); !r) return fail(r.err().code, path.string(), ": ", r.err().message);
  return f;
}

result<gguf_file> gguf_file::parse(std::span<const std::byte> bytes) {
  gguf_file f;
  f.base_ = bytes.data();
  f.size_ = bytes.size();
  if (auto r = f.load(); !r) return std::move(r).err();
  return f;
}

result<void> gguf_file::load() {
  cursor c(base_, size_);
  auto magic = c.read<std::uint32_t>("magic");
  if (!magic) return std::move(magic).err();
  if (*magic != 0x46554747u) return fail(errc::corrupt_data, "not a GGUF file (bad magic)");
  auto version = c.read<std::uint32_t>("version");
  if (!version) return std::move(version).err();
  if (*version == 0x02000000u || *version == 0x03000000u) return fail(errc::unsupported, "big-endian GGUF files are not supported");
  if (*version != 2 && *version != 3) return fail(errc::unsupported, "GGUF version ", *version, " is not supported (2 and 3 are)");
  version_ = *version;
  auto n_tensors = c.read<std::uint64_t>("tensor count");
  if (!n_tensors) return std::move(n_tensors).err();
  auto n_kv = c.read<std::uint64_t>("metadata count");
  if (!n_kv) return std::move(n_kv).err();
  // Every kv takes at least 12 bytes and every tensor info at least 24: counts that cannot fit
  // in the file are rejected before anything is allocated.
  if (*n_kv > c.left() / 12) return fail(errc::corrupt_data, "metadata count ", *n_kv, " cannot fit in ", size_, " bytes");
  if (*n_tensors > c.left() / 24) return fail(errc::corrupt_data, "tensor count ", *n_tensors, " cannot fit in ", size_, " bytes");

  kv_.reserve(*n_kv);
  for (std::uint64_t i = 0; i < *n_kv; ++i) {
    auto key = c.read_string("metadata key");
    if (!key) return fail(errc::corrupt_data, "metadata entry ", i, ": ", key.err().message);
    std::string k(*key);
    if (k.empty()) return fail(errc::corrupt_data, "metadata entry ", i, " has an empty key");
    auto t = read_type(c, k);
    if (!t) return std::move(t).err();
    value_ref ref{*t, {}, 0, 0, c.pos(), 0};
    if (*t == gguf_type::array) {
      std::uint64_t start = c.pos();  // the element type, then the count, then the elements
      if (auto r = skip_value(c, gguf_type::array, k, 0); !r) return r;
      ref.elem = static_cast<gguf_type>(read_le<std::uint32_t>(base_ + start));
      ref.count = read_le<std::uint64_t>(base_ + start + 4);
      ref.pos = start + 12;
    } else {
      ref.pos = c.pos();
      if (auto r = skip_value(c, *t, k, 0); !r) return r;
    }
    ref.end = c.pos();
    if (!kv_.emplace(k, ref).second) return fail(errc::corrupt_data, "duplicate metadata key '", k, "'");
    key_order_.push_back(std::move(k));
  }

  if (auto a = type_of("general.alignment")) {
    auto v = get_int("general.alignment");
    if (!v || *v <= 0 || (*v & (*v - 1)) != 0 || *v > (1 << 20))
      return fail(errc::corrupt_data, "general.alignment must be a power of two, got ", v ? std::to_string(*v) : "a non-integer");
    alignment_ = static_cast<std::uint64_t>(*v);
  }

  tensors_.reserve(*n_tensors);
  tensor_index_.reserve(*n_tensors);
  for (std::uint64_t i = 0; i < *n_tensors; ++i) {
    auto name = c.read_string("tensor name");
    if (!name) return fail(errc::corrupt_data, "tensor ", i, ": ", name.err().message);
    gguf_tensor t;
    t.name = std::string(*name);
    if (t.name.empty()) return fail(errc::corrupt_data, "tensor ", i, " has an empty name");
    auto nd = c.read<std::uint32_t>("tensor dimension count");
    if (!nd) return std::move(nd).err();
    if (*nd == 0 || *nd > k_max_dims) return fail(errc::corrupt_data, "tensor '", t.name, "': ", *nd, " dimensions (1 to 4 allowed)");
    t.n_dims = static_cast<int>(*nd);
    std::uint64_t elements = 1;
    for (int d = 0; d < t.n_dims; ++d) {
      auto ne = c.read<std::uint64_t>("tensor dimension");
      if (!ne) return std::move(ne).err();
      if (*ne == 0 || *ne > (1ull << 40)) return fail(errc::corrupt_data, "tensor '", t.name, "': dimension ", d, " is ", *ne);
      if (elements > (1ull << 50) / *ne) return fail(errc::corrupt_data, "tensor '", t.name, "': element count overflows");
      elements *= *ne;
      t.ne[d] = static_cast<std::int64_t>(*ne);
    }
    auto type = c.read<std::uint32_t>("tensor type");
    if (!type) return std::move(type).err();
    t.type = *type;
    auto offset = c.read<std::uint64_t>("tensor offset");
    if (!offset) return std::move(offset).err();
    t.offset = *offset;
    auto dt = kernels::dtype_from_id(t.type);
    if (!dt) return fail(errc::unsupported, "tensor '", t.name, "' has type ", kernels::ggml_type_name(t.type), " (", t.type, "), which strata does not support");
    if (t.ne[0] % kernels::block_elements(*dt) != 0)
      return fail(errc::corrupt_data, "tensor '", t.name, "': row length ", t.ne[0], " is not a multiple of the ", kernels::dtype_name(*dt), " block size");
    t.n_bytes = kernels::row_bytes(*dt, t.ne[0]) * static_cast<std::uint64_t>(elements / static_cast<std::uint64_t>(t.ne[0]));
    if (t.offset % alignment_ != 0) return fail(errc::corrupt_data, "tensor '", t.name, "': offset ", t.offset, " is not aligned to ", alignment_);
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) return fail(errc::corrupt_data, "duplicate tensor name '", t.name, "'");
    tensors_.push_back(std::move(t));
  }

  std::uint64_t data_start = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (tensors_.empty()) return {};
  if (data_start > size_) return fail(errc::corrupt_data, "truncated file: the data section would start at byte ", data_start, " past the end (", size_, " bytes)");
  std::uint64_t data_size = size_ - data_start;
  // llama.cpp's layout rule: the tensors lie in the order of the table, each at the end of the one
  // before rounded up to the alignment. So the bytes a tensor owns are exactly what its type and
  // shape take, and a type that does not match them shows as a gap, an overlap or leftover bytes.
  std::uint64_t expected = 0;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    gguf_tensor& t = tensors_[i];
    if (t.offset > data_size)
      return fail(errc::corrupt_data, "tensor '", t.name, "': data starts at offset ", t.offset, " past the end of the data section (", data_size, " bytes)");
    if (t.n_bytes > data_size - t.offset)
      return fail(errc::corrupt_data, "tensor '", t.name, "': data ends at byte ", data_start + t.offset + t.n_bytes,
                  " past the end of the file (", size_, " bytes)");
    if (t.offset != expected) {
      if (i == 0) return fail(errc::corrupt_data, "tensor '", t.name, "': data starts at offset ", t.offset, ", expected 0 (the first tensor)");
      const gguf_tensor& prev = tensors_[i - 1];
      if (t.offset < expected)
        return fail(errc::corrupt_data, "tensors '", prev.name, "' and '", t.name, "' overlap: '", prev.name, "' (", kernels::ggml_type_name(prev.type),
                    ", ", prev.n_bytes, " bytes) ends at offset ", prev.offset + prev.n_bytes, ", '", t.name, "' starts at ", t.offset);
      return fail(errc::corrupt_data, "tensor '", prev.name, "': type ", kernels::ggml_type_name(prev.type), " does not match its ",
                  t.offset - prev.offset, " bytes (its shape takes ", prev.n_bytes, "; the next tensor '", t.name, "' starts at offset ", t.offset, ")");
    }
    t.data = base_ + data_start + t.offset;
    expected = (t.offset + t.n_bytes + alignment_ - 1) / alignment_ * alignment_;
  }
  const gguf_tensor& last = tensors_.back();
  if (data_size > expected)
    return fail(errc::corrupt_data, "tensor '", last.name, "': type ", kernels::ggml_type_name(last.type), " does not match its ",
                data_size - last.offset, " bytes (its shape takes ", last.n_bytes, "; the file goes on past it)");
  return {};
}

std::optional<gguf_type> gguf_file::type_of(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  if (it == kv_.end()) return std::nullopt;
  return it->second.type;
}

std::optional<std::string_view> gguf_file::get_string(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  if (it == kv_.end() || it->second.type != gguf_type::string) return std::nullopt;
  auto len = read_le<std::uint64_t>(base_ + it->second.pos);
  return std::string_view(reinterpret_cast<const char*>(base_ + it->second.pos + 8), len);
}

std::optional<std::int64_t> gguf_file::get_int(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  if (it == kv_.end()) return std::nullopt;
  return scalar_as_int(it->second.type, base_ + it->second.pos);
}

std::optional<double> gguf_file::get_float(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  if (it == kv_.end()) return std::nullopt;
  return scalar_as_double(it->second.type, base_ + it->second.pos);
}

std::optional<bool> gguf_file::get_bool(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  if (it == kv_.end() || it->second.type != gguf_type::boolean) return std::nullopt;
  return read_le<std::uint8_t>(base_ + it->second.pos) != 0;
}

std::optional<std::uint64_t> gguf_file::array_size(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  if (it == kv_.end() || it->second.type != gguf_type::array) return std::nullopt;
  return it->second.count;
}

std::optional<gguf_type> gguf_file::array_type(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  if (it == kv_.end() || it->second.type != gguf_type::array) return std::nullopt;
  return it->second.elem;
}

std::optional<std::span<const std::byte>> gguf_file::raw_value(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  if (it == kv_.end()) return std::nullopt;
  return std::span<const std::byte>(base_ + it->second.begin, it->second.end - it->second.begin);
}

std::optional<std::vector<std::string_view>> gguf_file::get_string_array(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  if (it == kv_.end() || it->second.type != gguf_type::array || it->second.elem != gguf_type::string) return std::nullopt;
  std::vector<std::string_view> out;
  out.reserve(it->second.count);
  std::size_t pos = it->second.pos;
  for (std::uint64_t i = 0; i < it->second.count; ++i) {
    auto len = read_le<std::uint64_t>(base_ + pos);
    out.emplace_back(reinterpret_cast<const char*>(base_ + pos + 8), len);
    pos += 8 + len;
  }
  return out;
}

std::optional<std::vector<float>> gguf_file::get_float_array(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  if (it == kv_.end() || it->second.type != gguf_type::array) return std::nullopt;
  std::size_t sz = scalar_size(it->second.elem);
  if (sz == 0) return std::nullopt;
  std::vector<float> out(it->second.count);
  for (std::uint64_t i = 0; i < it->second.count; ++i)
    out[i] = static_cast<float>(*scalar_as_double(it->second.elem, base_ + it->second.pos + i * sz));
  return out;
}

std::optional<std::vector<std::int64_t>> gguf_file::get_int_array(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  if (it == kv_.end() || it->second.type != gguf_type::array) return std::nullopt;
  std::size_t sz = scalar_size(it->second.elem);
  if (sz == 0 || it->second.elem == gguf_type::f32 || it->second.elem == gguf_type::f64) return std::nullopt;
  std::vector<std::int64_t> out(it->second.count);
  for (std::uint64_t i = 0; i < it->second.count; ++i) {
    auto v = scalar_as_int(it->second.elem, base_ + it->second.pos + i * sz);
    if (!v) return std::nullopt;
    out[i] = *v;
  }
  return out;
}

std::vector<std::string> gguf_file::keys() const { return key_order_; }

const gguf_tensor* gguf_file::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::string_view gguf_file::architecture() const { return get_string("general.architecture").value_or(""); }

}  // namespace strata::model
