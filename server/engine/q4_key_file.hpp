#pragma once
// The small file that keeps a model's q4_0 mean keys (model::calibrate_q4_keys) from one load to
// the next, so that only the first load of a model on a machine pays the calibration prefill.
//
// Its name and its header carry everything the means depend on: the model file's fingerprint
// (weights and tokenizer), the digest of the calibration text, the kernels' ISA level (float sums
// differ by level) and the q4_0 layout revision (which also moves whenever the calibration's own
// rules change). A file that is missing, short, corrupt or made for another key is never trusted:
// the means are taken again and the file written anew.
//
//   offset  bytes          field
//   0       8              magic "strq4key"
//   8       4              file version (k_q4_key_file_version)
//   12      4              q4_0 layout revision (kv::k_q4_layout_revision)
//   16      4              n_layer
//   20      4              kv_dim
//   24      16             model fingerprint (kv::model_fingerprint of the GGUF file)
//   40      16             calibration text digest (kv::model_fingerprint of its bytes)
//   56      16             ISA level name (kernels::simd_level_name), zero-padded
//   72      4 n_layer kv_dim   the means, f32, layer by layer (model::q4_key_means::m)
//   end-8   8              XXH3-64 of every byte before it
//
// Little-endian (strata runs on x86-64 only). Written to a temporary file in the same folder and
// renamed over the name, so a reader sees the old file, the new one, or none.

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "src/common/error.hpp"
#include "src/config/config.hpp"
#include "src/model/q4_kv.hpp"

namespace strata::engine {

inline constexpr std::uint32_t k_q4_key_file_version = 1;
/// Bytes before the means.
inline constexpr std::size_t k_q4_key_file_header = 72;

/// What a means file must match to be used.
struct q4_key_file_key {
  std::array<std::uint64_t, 2> model{};
  std::array<std::uint64_t, 2> text{};
  std::string isa;  // at most 15 characters
  std::uint32_t revision = 0;
  std::int32_t n_layer = 0;
  std::int32_t kv_dim = 0;
  bool operator==(const q4_key_file_key&) const = default;
};

/// The key for a model of this fingerprint and shape, here: the built-in calibration text's
/// digest, the ISA level the kernels run at and the current q4_0 layout revision.
q4_key_file_key q4_key_file_key_for(const std::array<std::uint64_t, 2>& model_fingerprint, std::int32_t n_layer,
                                    std::int32_t kv_dim);

/// The file's name in its folder: every part of the key, so that keys never share a file.
std::string q4_key_file_name(const q4_key_file_key& key);

/// Where means files live: beside the SSD tier (cache.dir/q4-keys) when it is on, else
/// $XDG_CACHE_HOME/strata/q4-keys ($HOME/.cache/strata/q4-keys without XDG_CACHE_HOME).
std::filesystem::path q4_key_dir(const config::server_config& cfg, bool ssd_tier_on);

/// The file's bytes. `means` must have key.n_layer rows of key.kv_dim values.
std::vector<std::byte> encode_q4_key_file(const q4_key_file_key& key, const model::q4_key_means& means);

/// The means in `bytes` when they are a whole file of `key`: errc::corrupt_data for a short or
/// long file, a bad magic or checksum, or values that are not finite; errc::unsupported for a
/// well-formed file of another version or key.
result<model::q4_key_means> decode_q4_key_file(std::span<const std::byte> bytes, const q4_key_file_key& key);

/// decode_q4_key_file of the file at `path`; errc::not_found when there is none.
result<model::q4_key_means> read_q4_key_file(const std::filesystem::path& path, const q4_key_file_key& key);

/// Writes the file (creating `dir`): a temporary file in `dir`, then renamed to
/// q4_key_file_name(key). errc::io_error, with the OS's reason, when it cannot.
result<std::filesystem::path> write_q4_key_file(const std::filesystem::path& dir, const q4_key_file_key& key,
                                                const model::q4_key_means& means);

/// Mean keys for `key`: read from `dir` when its file holds them, else taken by `take` and written
/// there (a folder that cannot be written only logs a warning; a corrupt file too).
struct q4_kept_means {
  model::q4_key_means means;
  std::filesystem::path file;  // the file read or written (empty when none could be written)
  bool read = false;           // true: read from `file`; false: taken by `take`
  double seconds = 0;          // what taking them cost (0 when read)
};
result<q4_kept_means> q4_key_means_kept(const std::filesystem::path& dir, const q4_key_file_key& key,
                                        const std::function<result<model::q4_key_means>()>& take);

}  // namespace strata::engine
