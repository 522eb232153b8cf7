#pragma once
// prefix_hash: the identity of a full KV block, chained so that a block's hash names its whole
// prefix. Two blocks match only when every earlier token, the model, the KV format and the block
// size are the same:
//
//   root     = SHA-256("strata.kv.root/1" | model fingerprint | kv format | block tokens | extra keys)
//              (for q4_0, after the format: its layout revision and the digest of its mean keys)
//              (extra keys: the request's cache salt, if any; see make_cache_salt)
//   block[0] = SHA-256("strata.kv.block/1" | root     | token count | tokens[0 .. B))
//   block[i] = SHA-256("strata.kv.block/1" | block[i-1] | token count | tokens[iB .. (i+1)B))
//
// Why SHA-256 rather than xxh3-128: the prefix cache is shared by every client of the server, and
// a collision hands one request the KV of someone else's text. A client who could forge a
// collision could poison another tenant's context or read it back through the model's output.
// xxh3 is built for speed on honest input and has no resistance to a deliberate search; SHA-256
// needs about 2^128 work for any collision. It is cheap here: with SHA-NI one 32-token block
// (about 200 bytes) hashes in well under a microsecond, against milliseconds of compute for the
// same block. The model fingerprint (xxh3-128 of the whole file) hashes files the operator
// chose, not tenants, so a fast non-cryptographic hash is enough there.

#include <array>
#include <functional>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/kv/kv_format.hpp"

namespace strata::kv {

/// A full block's identity: 256 bits.
struct block_hash {
  std::array<std::uint64_t, 4> w{};
  friend bool operator==(const block_hash&, const block_hash&) = default;
  /// Lowercase hex, 64 characters (logs, tests).
  std::string hex() const;
};

struct block_hash_hasher {
  std::size_t operator()(const block_hash& h) const noexcept { return static_cast<std::size_t>(h.w[0]); }
};

/// A tenant's cache salt as the hash chain takes it: 128 bits digested from the salt strings, all
/// zero for none. Requests with different salts never share a block, in RAM or on the SSD; those
/// without one share the cache as before.
struct cache_salt {
  std::array<std::uint64_t, 2> w{};
  bool empty() const { return w[0] == 0 && w[1] == 0; }
  friend bool operator==(const cache_salt&, const cache_salt&) = default;
};

/// The salt of a request made with an API key whose salt is `key_salt` and asking for
/// `request_salt` (the body's cache_salt); an empty string is one not given. Both are mixed in, each
/// in its own place, so a request cannot leave its key's cache by naming a salt of its own. Empty
/// when both are.
cache_salt make_cache_salt(std::string_view key_salt, std::string_view request_salt);

/// What, besides the tokens, decides the contents of a block's KV.
struct cache_namespace {
  /// Fingerprint of the model file (see model_fingerprint).
  std::array<std::uint64_t, 2> model{};
  kv_format format = kv_format::f16;
  /// For q4_0 only: the digest of the mean keys its pages are centered with (src/model/q4_kv.hpp),
  /// which differ with the ISA the server computed them on; pages written under another m never
  /// match.
  std::array<std::uint64_t, 2> q4_keys{};
  std::int32_t block_tokens = 32;
  /// Anything else that must separate caches (a tenant salt, an adapter): raw bytes.
  std::string extra;

  /// This namespace with `salt`'s bytes as `extra` (unchanged when the salt is empty).
  cache_namespace salted(const cache_salt& salt) const;
};

/// Computes chained block hashes. Holds one digest context, reused for every hash: no allocation
/// per block. Not thread-safe; each owner keeps its own.
class prefix_hasher {
 public:
  prefix_hasher();
  ~prefix_hasher();
  prefix_hasher(prefix_hasher&& o) noexcept;
  prefix_hasher& operator=(prefix_hasher&& o) noexcept;
  prefix_hasher(const prefix_hasher&) = delete;
  prefix_hasher& operator=(const prefix_hasher&) = delete;

  /// The parent of a sequence's first block in this namespace.
  block_hash root(const cache_namespace& ns);
  /// The hash of a block holding `tokens` whose prefix hashes to `parent`.
  block_hash chain(const block_hash& parent, std::span<const std::int32_t> tokens);
  /// Plain SHA-256 of bytes, as a block_hash (checked against the standard's test vectors).
  block_hash sha256(std::span<const std::byte> bytes);

 private:
  void begin();
  void update(const void* data, std::size_t n);
  block_hash end();
  void* ctx_ = nullptr;  // EVP_MD_CTX
};

/// The hashes of the full blocks of `tokens` as a replica's cache chains them: rooted in `ns`
/// (model, format, block size, extra keys) salted with `salt`, one per ns.block_tokens tokens, a
/// partial last block left out. What a router or another replica computes to name a prompt's
/// blocks in the cluster directory.
std::vector<block_hash> chain_hashes(prefix_hasher& hasher, const cache_namespace& ns, const cache_salt& salt,
                                     std::span<const std::int32_t> tokens);

/// xxh3-128 of a model file's bytes: the `model` part of a cache_namespace. A large file is read
/// in chunks; `progress`, when set, hears the fraction hashed after each one.
std::array<std::uint64_t, 2> model_fingerprint(std::span<const std::byte> file,
                                               const std::function<void(double)>& progress = {});

}  // namespace strata::kv
