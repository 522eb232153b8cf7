#include "src/kv/prefix_hash.hpp"

#include <bit>
#include <cstring>
#include <stdexcept>

#include <openssl/evp.h>
#include <xxhash.h>

namespace strata::kv {
namespace {

static_assert(std::endian::native == std::endian::little,
              "block hashes feed token ids as little-endian int32: the SSD tier's records depend on it");

constexpr char k_root_tag[] = "strata.kv.root/1";
constexpr char k_block_tag[] = "strata.kv.block/1";
constexpr char k_salt_tag[] = "strata.kv.salt/1";

EVP_MD_CTX* as_ctx(void* p) { return static_cast<EVP_MD_CTX*>(p); }

}  // namespace

std::string block_hash::hex() const {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (auto word : w) {
    // Bytes in digest order: each word holds 8 digest bytes, little-endian.
    for (int b = 0; b < 8; ++b) {
      auto byte = static_cast<unsigned>((word >> (8 * b)) & 0xff);
      s.push_back(digits[byte >> 4]);
      s.push_back(digits[byte & 15]);
    }
  }
  return s;
}

prefix_hasher::prefix_hasher() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_) throw std::bad_alloc();
}

prefix_hasher::~prefix_hasher() { EVP_MD_CTX_free(as_ctx(ctx_)); }

prefix_hasher::prefix_hasher(prefix_hasher&& o) noexcept : ctx_(o.ctx_) { o.ctx_ = nullptr; }

prefix_hasher& prefix_hasher::operator=(prefix_hasher&& o) noexcept {
  if (this != &o) {
    EVP_MD_CTX_free(as_ctx(ctx_));
    ctx_ = o.ctx_;
    o.ctx_ = nullptr;
  }
  return *this;
}

void prefix_hasher::begin() {
  if (EVP_DigestInit_ex(as_ctx(ctx_), EVP_sha256(), nullptr) != 1) throw std::runtime_error("SHA-256 init failed");
}

void prefix_hasher::update(const void* data, std::size_t n) {
  if (n != 0 && EVP_DigestUpdate(as_ctx(ctx_), data, n) != 1) throw std::runtime_error("SHA-256 update failed");
}

block_hash prefix_hasher::end() {
  unsigned char digest[32];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(as_ctx(ctx_), digest, &len) != 1 || len != sizeof digest) {
    throw std::runtime_error("SHA-256 final failed");
  }
  block_hash h;
  std::memcpy(h.w.data(), digest, sizeof digest);
  return h;
}

block_hash prefix_hasher::root(const cache_namespace& ns) {
  begin();
  update(k_root_tag, sizeof k_root_tag);
  update(ns.model.data(), sizeof ns.model);
  const auto format = static_cast<std::uint8_t>(ns.format);
  update(&format, 1);
  if (ns.format == kv_format::q4_0) {
    update(&k_q4_layout_revision, 1);
    update(ns.q4_keys.data(), sizeof ns.q4_keys);
  }
  update(&ns.block_tokens, sizeof ns.block_tokens);
  const std::uint64_t extra_len = ns.extra.size();
  update(&extra_len, sizeof extra_len);
  update(ns.extra.data(), ns.extra.size());
  return end();
}

block_hash prefix_hasher::chain(const block_hash& parent, std::span<const std::int32_t> tokens) {
  begin();
  update(k_block_tag, sizeof k_block_tag);
  update(parent.w.data(), sizeof parent.w);
  const std::uint32_t n = static_cast<std::uint32_t>(tokens.size());
  update(&n, sizeof n);
  update(tokens.data(), tokens.size_bytes());
  return end();
}

block_hash prefix_hasher::sha256(std::span<const std::byte> bytes) {
  begin();
  update(bytes.data(), bytes.size());
  return end();
}

cache_salt make_cache_salt(std::string_view key_salt, std::string_view request_salt) {
  cache_salt salt;
  if (key_salt.empty() && request_salt.empty()) return salt;
  // SHA-256 rather than xxh3, for the reason given in the header: the request's part is chosen by
  // a client, who must not be able to search for one that lands on another tenant's digest. Each
  // part goes in with its length, so ("ab", "c") and ("a", "bc") differ, as do a salt given by the
  // key and the same salt given by the request.
  std::string input(k_salt_tag, sizeof k_salt_tag);
  for (std::string_view part : {key_salt, request_salt}) {
    const std::uint64_t n = part.size();
    input.append(reinterpret_cast<const char*>(&n), sizeof n);
    input.append(part);
  }
  const block_hash h = prefix_hasher().sha256(std::as_bytes(std::span<const char>(input.data(), input.size())));
  salt.w = {h.w[0], h.w[1]};
  if (salt.empty()) salt.w[0] = 1;  // all zero means "no salt"
  return salt;
}

cache_namespace cache_namespace::salted(const cache_salt& salt) const {
  cache_namespace ns = *this;
  if (!salt.empty()) ns.extra.append(reinterpret_cast<const char*>(salt.w.data()), sizeof salt.w);
  return ns;
}

std::vector<block_hash> chain_hashes(prefix_hasher& hasher, const cache_namespace& ns, const cache_salt& salt,
                                     std::span<const std::int32_t> tokens) {
  std::vector<block_hash> out;
  const auto bt = static_cast<std::size_t>(ns.block_tokens);
  if (bt == 0) return out;
  out.reserve(tokens.size() / bt);
  block_hash parent = hasher.root(ns.salted(salt));
  for (std::size_t i = 0; (i + 1) * bt <= tokens.size(); ++i) out.push_back(parent = hasher.chain(parent, tokens.subspan(i * bt, bt)));
  return out;
}

std::array<std::uint64_t, 2> model_fingerprint(std::span<const std::byte> file, const std::function<void(double)>& progress) {
  // The streaming form gives the same hash as the one-shot call over the whole file.
  constexpr std::size_t chunk = 64u << 20;
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  for (std::size_t at = 0; at < file.size(); at += chunk) {
    const std::size_t n = std::min(chunk, file.size() - at);
    XXH3_128bits_update(state, file.data() + at, n);
    if (progress) progress(static_cast<double>(at + n) / static_cast<double>(file.size()));
  }
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return {h.low64, h.high64};
}

}  // namespace strata::kv
