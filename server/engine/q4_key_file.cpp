#include "server/engine/q4_key_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <system_error>

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include "kernels/simd.hpp"
#include "src/kv/kv_format.hpp"
#include "src/kv/prefix_hash.hpp"

namespace strata::engine {
namespace {

constexpr char k_magic[8] = {'s', 't', 'r', 'q', '4', 'k', 'e', 'y'};
constexpr std::size_t k_isa_bytes = 16;

template <class T>
void put(std::vector<std::byte>& out, const T& v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

template <class T>
T get(std::span<const std::byte> in, std::size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

std::size_t file_bytes(std::int32_t n_layer, std::int32_t kv_dim) {
  return k_q4_key_file_header + static_cast<std::size_t>(n_layer) * static_cast<std::size_t>(kv_dim) * sizeof(float) +
         sizeof(std::uint64_t);
}

std::string errno_text(int e) { return std::system_category().message(e); }

}  // namespace

q4_key_file_key q4_key_file_key_for(const std::array<std::uint64_t, 2>& model_fingerprint, std::int32_t n_layer,
                                    std::int32_t kv_dim) {
  q4_key_file_key k;
  k.model = model_fingerprint;
  k.text = kv::model_fingerprint(std::as_bytes(std::span<const char>(model::q4_calibration_text())));
  k.isa = kernels::simd_level_name(kernels::configured_simd_level().level);
  k.revision = kv::k_q4_layout_revision;
  k.n_layer = n_layer;
  k.kv_dim = kv_dim;
  return k;
}

std::string q4_key_file_name(const q4_key_file_key& key) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%016llx%016llx-%.15s-r%u-t%016llx%016llx-%dx%d.q4keys", static_cast<unsigned long long>(key.model[1]),
                static_cast<unsigned long long>(key.model[0]), key.isa.c_str(), key.revision,
                static_cast<unsigned long long>(key.text[1]), static_cast<unsigned long long>(key.text[0]), key.n_layer, key.kv_dim);
  return buf;
}

std::filesystem::path q4_key_dir(const config::server_config& cfg, bool ssd_tier_on) {
  if (ssd_tier_on) return cfg.cache_dir() / "q4-keys";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "strata" / "q4-keys";
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home && *home ? home : "/tmp") / ".cache" / "strata" / "q4-keys";
}

std::vector<std::byte> encode_q4_key_file(const q4_key_file_key& key, const model::q4_key_means& means) {
  std::vector<std::byte> out;
  out.reserve(file_bytes(key.n_layer, key.kv_dim));
  out.insert(out.end(), reinterpret_cast<const std::byte*>(k_magic), reinterpret_cast<const std::byte*>(k_magic) + sizeof k_magic);
  put(out, k_q4_key_file_version);
  put(out, key.revision);
  put(out, key.n_layer);
  put(out, key.kv_dim);
  put(out, key.model);
  put(out, key.text);
  char isa[k_isa_bytes] = {};
  std::memcpy(isa, key.isa.data(), std::min(key.isa.size(), k_isa_bytes - 1));
  put(out, isa);
  const auto* m = reinterpret_cast<const std::byte*>(means.m.data());
  out.insert(out.end(), m, m + means.m.size() * sizeof(float));
  put(out, static_cast<std::uint64_t>(XXH3_64bits(out.data(), out.size())));
  return out;
}

result<model::q4_key_means> decode_q4_key_file(std::span<const std::byte> bytes, const q4_key_file_key& key) {
  if (bytes.size() < k_q4_key_file_header + sizeof(std::uint64_t))
    return fail(errc::corrupt_data, "short file (", bytes.size(), " bytes)");
  if (std::memcmp(bytes.data(), k_magic, sizeof k_magic) != 0) return fail(errc::corrupt_data, "not a q4_0 mean keys file (magic)");
  const std::size_t body = bytes.size() - sizeof(std::uint64_t);
  if (get<std::uint64_t>(bytes, body) != XXH3_64bits(bytes.data(), body)) return fail(errc::corrupt_data, "checksum mismatch");
  q4_key_file_key found;
  const auto version = get<std::uint32_t>(bytes, 8);
  found.revision = get<std::uint32_t>(bytes, 12);
  found.n_layer = get<std::int32_t>(bytes, 16);
  found.kv_dim = get<std::int32_t>(bytes, 20);
  found.model = get<std::array<std::uint64_t, 2>>(bytes, 24);
  found.text = get<std::array<std::uint64_t, 2>>(bytes, 40);
  const auto isa = get<std::array<char, k_isa_bytes>>(bytes, 56);
  found.isa.assign(isa.data(), strnlen(isa.data(), k_isa_bytes));
  if (version != k_q4_key_file_version) return fail(errc::unsupported, "file version ", version, ", expected ", k_q4_key_file_version);
  if (!(found == key))
    return fail(errc::unsupported, "made for another key (", q4_key_file_name(found), ", expected ", q4_key_file_name(key), ")");
  if (bytes.size() != file_bytes(key.n_layer, key.kv_dim))
    return fail(errc::corrupt_data, bytes.size(), " bytes for ", key.n_layer, " x ", key.kv_dim, " means");
  model::q4_key_means out;
  out.kv_dim = key.kv_dim;
  out.m.resize(static_cast<std::size_t>(key.n_layer) * static_cast<std::size_t>(key.kv_dim));
  std::memcpy(out.m.data(), bytes.data() + k_q4_key_file_header, out.m.size() * sizeof(float));
  for (float x : out.m)
    if (!std::isfinite(x)) return fail(errc::corrupt_data, "a mean that is not finite");
  return out;
}

result<model::q4_key_means> read_q4_key_file(const std::filesystem::path& path, const q4_key_file_key& key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return fail(errc::not_found, path.string(), ": no such file");
    return fail(errc::io_error, path.string(), ": cannot be opened");
  }
  // No more than a file of this key can hold: a longer one is corrupt, and is not read whole.
  const std::size_t want = file_bytes(key.n_layer, key.kv_dim);
  std::vector<std::byte> bytes(want + 1);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<std::size_t>(in.gcount()));
  if (bytes.size() > want) return fail(errc::corrupt_data, path.string(), ": longer than ", want, " bytes");
  auto r = decode_q4_key_file(bytes, key);
  if (!r) return fail(r.err().code, path.string(), ": ", r.err().message);
  return r;
}

result<std::filesystem::path> write_q4_key_file(const std::filesystem::path& dir, const q4_key_file_key& key,
                                                const model::q4_key_means& means) {
  if (means.kv_dim != key.kv_dim || means.m.size() != static_cast<std::size_t>(key.n_layer) * static_cast<std::size_t>(key.kv_dim))
    return fail(errc::invalid_argument, "mean keys of ", means.m.size(), " values (kv_dim ", means.kv_dim, ") for ", key.n_layer,
                " x ", key.kv_dim);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail(errc::io_error, dir.string(), ": ", ec.message());
  const auto bytes = encode_q4_key_file(key, means);
  const std::filesystem::path path = dir / q4_key_file_name(key);
  // A name of this process's own: two servers starting at once each write their own, then one
  // rename wins (both files hold the same means).
  static std::atomic<unsigned> serial{0};
  const std::filesystem::path tmp =
      dir / ("." + q4_key_file_name(key) + "." + std::to_string(::getpid()) + "." + std::to_string(serial++) + ".tmp");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fail(errc::io_error, tmp.string(), ": ", errno_text(errno));
  std::size_t done = 0;
  int err = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return fail(errc::io_error, path.string(), ": ", errno_text(err));
  }
  return path;
}

result<q4_kept_means> q4_key_means_kept(const std::filesystem::path& dir, const q4_key_file_key& key,
                                        const std::function<result<model::q4_key_means>()>& take) {
  const std::filesystem::path path = dir / q4_key_file_name(key);
  auto found = read_q4_key_file(path, key);
  if (found) return q4_kept_means{std::move(*found), path, true, 0};
  if (found.err().code == errc::corrupt_data || found.err().code == errc::io_error)
    spdlog::warn("q4_0 KV: mean keys file not used, taking them again: {}", found.err().message);
  else if (found.err().code != errc::not_found)
    spdlog::info("q4_0 KV: mean keys file not used, taking them again: {}", found.err().message);
  const auto t0 = std::chrono::steady_clock::now();
  auto means = take();
  if (!means) return std::move(means).err();
  q4_kept_means out{std::move(*means), {}, false, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  if (auto w = write_q4_key_file(dir, key, out.means); w)
    out.file = *w;
  else
    spdlog::warn("q4_0 KV: the mean keys cannot be kept for the next load ({}); they will be taken again then", w.err().message);
  return out;
}

}  // namespace strata::engine
