#include "src/kv/prefix_hash.hpp"

#include <random>
#include <set>
#include <string_view>

#include <gtest/gtest.h>
#include <xxhash.h>

#include "tests/support/test_seed.hpp"

namespace strata::kv {
namespace {

block_hash sha(prefix_hasher& hasher, std::string_view text) {
  return hasher.sha256(std::as_bytes(std::span<const char>(text.data(), text.size())));
}

TEST(prefix_hash, sha256_matches_the_standard_test_vectors) {
  prefix_hasher hasher;
  // FIPS 180-2, appendix B, and the empty message.
  EXPECT_EQ(sha(hasher, "abc").hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha(hasher, "").hex(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha(hasher, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq").hex(),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(prefix_hash, a_chain_is_a_function_of_its_whole_prefix) {
  prefix_hasher hasher;
  cache_namespace ns;
  ns.model = {1, 2};
  const block_hash root = hasher.root(ns);
  const std::vector<std::int32_t> a{1, 2, 3, 4}, b{1, 2, 3, 5}, c{5, 6, 7, 8};
  const block_hash ha = hasher.chain(root, a);
  EXPECT_EQ(hasher.chain(root, a), ha) << "deterministic";
  EXPECT_NE(hasher.chain(root, b), ha) << "one token differs";
  const block_hash hac = hasher.chain(ha, c), hbc = hasher.chain(hasher.chain(root, b), c);
  EXPECT_NE(hac, hbc) << "same block, different parents";
  // Token boundaries are part of the input: {1,2,3} + {4} is not {1,2} + {3,4}.
  const std::vector<std::int32_t> p3{1, 2, 3}, s1{4}, p2{1, 2}, s2{3, 4};
  EXPECT_NE(hasher.chain(hasher.chain(root, p3), s1), hasher.chain(hasher.chain(root, p2), s2));
}

TEST(prefix_hash, every_part_of_the_namespace_separates_caches) {
  prefix_hasher hasher;
  cache_namespace base;
  base.model = {0x1234, 0x5678};
  std::set<std::string> roots{hasher.root(base).hex()};
  auto add = [&](cache_namespace ns, const char* what) { EXPECT_TRUE(roots.insert(hasher.root(ns).hex()).second) << what; };
  auto ns = base;
  ns.model[1] ^= 1;
  add(ns, "model fingerprint");
  ns = base;
  ns.format = kv_format::q8_0;
  add(ns, "kv format q8_0");
  ns.format = kv_format::q4_0;
  add(ns, "kv format q4_0");
  ns = base;
  ns.block_tokens = 16;
  add(ns, "block tokens");
  ns = base;
  ns.extra = "tenant-a";
  add(ns, "extra keys");
  ns.extra = "tenant-b";
  add(ns, "other extra keys");
  EXPECT_EQ(hasher.root(base).hex(), *roots.find(hasher.root(base).hex()));
}

/// The bytes a root hashes, written out here (tag, model, format, [q4_0 layout revision and mean
/// keys' digest], block tokens, extra length, extra), so that the layout of a root is pinned down
/// by the test.
std::vector<std::byte> root_bytes(const cache_namespace& ns, bool with_revision) {
  std::vector<std::byte> b;
  auto put = [&](const void* p, std::size_t n) {
    const auto* c = static_cast<const std::byte*>(p);
    b.insert(b.end(), c, c + n);
  };
  const char tag[] = "strata.kv.root/1";
  put(tag, sizeof tag);
  put(ns.model.data(), sizeof ns.model);
  const auto format = static_cast<std::uint8_t>(ns.format);
  put(&format, 1);
  if (with_revision) {
    put(&k_q4_layout_revision, 1);
    put(ns.q4_keys.data(), sizeof ns.q4_keys);
  }
  put(&ns.block_tokens, sizeof ns.block_tokens);
  const std::uint64_t extra_len = ns.extra.size();
  put(&extra_len, sizeof extra_len);
  put(ns.extra.data(), ns.extra.size());
  return b;
}

TEST(prefix_hash, a_q4_0_root_names_the_q4_layout_revision_so_older_q4_blocks_never_match) {
  prefix_hasher hasher;
  cache_namespace ns;
  ns.model = {0x1234, 0x5678};
  ns.extra = "tenant";
  EXPECT_EQ(hasher.root(ns), hasher.sha256(root_bytes(ns, false))) << "f16 roots are unchanged";
  ns.format = kv_format::q8_0;
  EXPECT_EQ(hasher.root(ns), hasher.sha256(root_bytes(ns, false))) << "q8_0 roots are unchanged";
  ns.format = kv_format::q4_0;
  EXPECT_EQ(hasher.root(ns), hasher.sha256(root_bytes(ns, true)));
  EXPECT_NE(hasher.root(ns), hasher.sha256(root_bytes(ns, false))) << "a revision-1 q4_0 root";
  EXPECT_EQ(k_q4_layout_revision, 3) << "revision 3: centered keys";
}

TEST(prefix_hash, a_q4_0_root_names_its_mean_keys_so_pages_centered_with_another_m_never_match) {
  prefix_hasher hasher;
  cache_namespace ns;
  ns.model = {0x1234, 0x5678};
  ns.format = kv_format::q4_0;
  const block_hash none = hasher.root(ns);
  ns.q4_keys = {0xabcd, 0xef01};
  const block_hash some = hasher.root(ns);
  EXPECT_EQ(some, hasher.sha256(root_bytes(ns, true)));
  EXPECT_NE(some, none);
  ns.q4_keys[1] ^= 1;
  EXPECT_NE(hasher.root(ns), some) << "another machine's m (one bit of its digest)";
  // Other formats do not read it: their pages do not depend on m.
  for (kv_format f : {kv_format::f16, kv_format::q8_0}) {
    ns.format = f;
    ns.q4_keys = {};
    const block_hash a = hasher.root(ns);
    ns.q4_keys = {0xabcd, 0xef01};
    EXPECT_EQ(hasher.root(ns), a) << static_cast<int>(f);
  }
}

TEST(prefix_hash, different_salts_never_share_a_block_and_one_salt_gives_one_chain) {
  prefix_hasher hasher;
  cache_namespace ns;
  ns.model = {7, 8};
  const std::vector<std::int32_t> b0{1, 2, 3, 4}, b1{5, 6, 7, 8};
  auto first_two = [&](const cache_salt& salt) {
    const block_hash h0 = hasher.chain(hasher.root(ns.salted(salt)), b0);
    return std::pair{h0, hasher.chain(h0, b1)};
  };
  EXPECT_TRUE(make_cache_salt("", "").empty());
  EXPECT_EQ(first_two(make_cache_salt("", "")), first_two({})) << "no salt: the chain every unsalted request shares";
  const cache_salt a = make_cache_salt("", "tenant-a");
  EXPECT_EQ(make_cache_salt("", "tenant-a"), a);
  EXPECT_EQ(first_two(a), first_two(make_cache_salt("", "tenant-a"))) << "the same salt: the same chain";
  // Each distinct salt gives another first block (and so another chain): the key's salt and the
  // request's are kept apart, and the split between strings counts.
  std::set<std::string> firsts;
  for (const auto& [key, request] : std::vector<std::pair<std::string, std::string>>{
           {"", ""}, {"", "tenant-a"}, {"", "tenant-b"}, {"tenant-a", ""}, {"tenant-a", "x"}, {"tenant-ax", ""}, {"tenant-b", "x"}}) {
    const auto [h0, h1] = first_two(make_cache_salt(key, request));
    EXPECT_TRUE(firsts.insert(h0.hex()).second) << "key salt '" << key << "', request salt '" << request << "'";
  }
}

TEST(prefix_hash, random_chains_do_not_collide) {
  prefix_hasher hasher;
  const auto seed = test_seed();
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  const block_hash root = hasher.root({});
  std::set<std::string> seen;
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::int32_t> t(1 + rng() % 64);
    for (auto& x : t) x = static_cast<std::int32_t>(rng() % 50000);
    // Duplicated inputs hash equal; the set only grows with distinct (tokens) inputs.
    seen.insert(hasher.chain(root, t).hex() + ":" + std::to_string(t.size()) + ":" + std::to_string(t[0]));
  }
  std::set<std::string> hashes;
  for (const auto& s : seen) hashes.insert(s.substr(0, 64));
  EXPECT_EQ(hashes.size(), seen.size());
}

TEST(prefix_hash, model_fingerprint_changes_with_any_byte) {
  std::vector<std::byte> file(4096, std::byte{7});
  const auto a = model_fingerprint(file);
  file[4000] = std::byte{8};
  EXPECT_NE(model_fingerprint(file), a);
}

TEST(prefix_hash, a_large_file_is_fingerprinted_in_chunks_to_the_same_hash_with_its_progress_reported) {
  std::vector<std::byte> file((64u << 20) + 12345);
  for (std::size_t i = 0; i < file.size(); i += 4093) file[i] = static_cast<std::byte>(i >> 12);
  const XXH128_hash_t whole = XXH3_128bits(file.data(), file.size());
  std::vector<double> seen;
  const auto chunked = model_fingerprint(file, [&](double f) { seen.push_back(f); });
  EXPECT_EQ(chunked[0], whole.low64);
  EXPECT_EQ(chunked[1], whole.high64);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_LT(seen[0], 1.0);
  EXPECT_DOUBLE_EQ(seen[1], 1.0);
}

}  // namespace
}  // namespace strata::kv
