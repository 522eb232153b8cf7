// The q4_0 mean keys file: a round trip gives the means bit for bit; a short, long, corrupt or
// other key's file is refused; q4_key_means_kept takes the means once, reads them after, and takes
// them again (the same means) whenever the file is not usable; and an engine's second load reads
// what its first took, as strata perplexity and bench do (q4_key_means_kept_for).

#include "server/engine/q4_key_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/compute_pool.hpp"
#include "kernels/simd.hpp"
#include "server/engine/engine.hpp"
#include "src/kv/kv_format.hpp"
#include "src/kv/prefix_hash.hpp"
#include "tests/support/test_seed.hpp"
#include "tests/support/temp_dir.hpp"

namespace strata::engine {
namespace {

using test_support::temp_dir;

/// Sets an environment variable for a scope and puts back what was there.
struct scoped_env {
  std::string name;
  std::optional<std::string> old;
  scoped_env(std::string n, const std::string& value) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) old = v;
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~scoped_env() {
    if (old)
      ::setenv(name.c_str(), old->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

q4_key_file_key some_key(std::mt19937_64& rng) {
  q4_key_file_key k = q4_key_file_key_for({rng(), rng()}, 1 + static_cast<std::int32_t>(rng() % 40),
                                          32 * (1 + static_cast<std::int32_t>(rng() % 8)));
  return k;
}

model::q4_key_means some_means(const q4_key_file_key& k, std::mt19937_64& rng) {
  model::q4_key_means m;
  m.kv_dim = k.kv_dim;
  m.m.resize(static_cast<std::size_t>(k.n_layer) * static_cast<std::size_t>(k.kv_dim));
  std::normal_distribution<float> d(0.0f, 0.7f);
  for (float& x : m.m) x = d(rng);
  return m;
}

std::vector<std::byte> read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}

void write_all(const std::filesystem::path& p, std::span<const std::byte> b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

bool same_bits(const model::q4_key_means& a, const model::q4_key_means& b) {
  return a.kv_dim == b.kv_dim && a.m.size() == b.m.size() && std::memcmp(a.m.data(), b.m.data(), a.m.size() * sizeof(float)) == 0;
}

TEST(q4_key_file, a_written_file_reads_back_the_same_means_bit_for_bit) {
  std::mt19937_64 rng(test_seed());
  temp_dir dir;
  for (int round = 0; round < 5; ++round) {
    const auto key = some_key(rng);
    const auto means = some_means(key, rng);
    const auto bytes = encode_q4_key_file(key, means);
    EXPECT_EQ(bytes.size(), k_q4_key_file_header + means.m.size() * sizeof(float) + 8);
    auto decoded = decode_q4_key_file(bytes, key);
    ASSERT_TRUE(decoded) << decoded.err().message;
    EXPECT_TRUE(same_bits(*decoded, means));

    auto path = write_q4_key_file(dir.path / "sub", key, means);
    ASSERT_TRUE(path) << path.err().message;
    EXPECT_EQ(*path, dir.path / "sub" / q4_key_file_name(key));
    EXPECT_EQ(read_all(*path), bytes);
    auto read = read_q4_key_file(*path, key);
    ASSERT_TRUE(read) << read.err().message;
    EXPECT_TRUE(same_bits(*read, means));
  }
  // Only the named files: the temporary ones were renamed.
  for (const auto& f : std::filesystem::directory_iterator(dir.path / "sub"))
    EXPECT_EQ(f.path().extension(), ".q4keys") << f.path();
}

TEST(q4_key_file, the_key_and_the_isa_in_use_name_the_file) {
  q4_key_file_key k = q4_key_file_key_for({0x1111, 0x2222}, 30, 192);
  EXPECT_EQ(k.revision, kv::k_q4_layout_revision);
  EXPECT_EQ(k.isa, kernels::simd_level_name(kernels::configured_simd_level().level));
  EXPECT_EQ(k.text, kv::model_fingerprint(std::as_bytes(std::span<const char>(model::q4_calibration_text()))));
  const std::string name = q4_key_file_name(k);
  EXPECT_NE(name.find("00000000000022220000000000001111"), std::string::npos) << name;
  EXPECT_NE(name.find("-" + k.isa + "-"), std::string::npos) << name;
  EXPECT_NE(name.find("-r" + std::to_string(k.revision) + "-"), std::string::npos) << name;
  EXPECT_NE(name.find("30x192"), std::string::npos) << name;
  std::set<std::string> names{name};
  auto other = k;
  other.isa = "scalar" == k.isa ? "avx2" : "scalar";
  names.insert(q4_key_file_name(other));
  other = k;
  other.text[0] ^= 1;
  names.insert(q4_key_file_name(other));
  other = k;
  other.revision += 1;
  names.insert(q4_key_file_name(other));
  other = k;
  other.model[1] ^= 1;
  names.insert(q4_key_file_name(other));
  EXPECT_EQ(names.size(), 5u);
}

TEST(q4_key_file, a_short_long_or_corrupt_file_is_corrupt_data) {
  std::mt19937_64 rng(test_seed());
  const auto key = some_key(rng);
  const auto means = some_means(key, rng);
  const auto good = encode_q4_key_file(key, means);
  for (std::size_t n : {std::size_t{0}, std::size_t{7}, k_q4_key_file_header, good.size() - 1,
                        static_cast<std::size_t>(rng() % good.size())}) {
    auto r = decode_q4_key_file(std::span(good).first(n), key);
    ASSERT_FALSE(r) << n << " bytes";
    EXPECT_EQ(r.err().code, errc::corrupt_data) << n << " bytes: " << r.err().message;
  }
  auto longer = good;
  longer.push_back(std::byte{0});
  EXPECT_FALSE(decode_q4_key_file(longer, key));
  for (int i = 0; i < 64; ++i) {
    auto bad = good;
    const std::size_t at = static_cast<std::size_t>(rng() % bad.size());
    bad[at] ^= static_cast<std::byte>(1u << (rng() % 8));
    auto r = decode_q4_key_file(bad, key);
    ASSERT_FALSE(r) << "a bit flipped at byte " << at;
    EXPECT_EQ(r.err().code, errc::corrupt_data) << at << ": " << r.err().message;
  }
  // A checksum that verifies over a mean that is not finite.
  auto nan_means = means;
  nan_means.m[static_cast<std::size_t>(rng() % nan_means.m.size())] = std::nanf("");
  auto r = decode_q4_key_file(encode_q4_key_file(key, nan_means), key);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::corrupt_data) << r.err().message;
}

TEST(q4_key_file, a_file_of_another_key_is_refused) {
  std::mt19937_64 rng(test_seed());
  const auto key = some_key(rng);
  const auto means = some_means(key, rng);
  std::vector<q4_key_file_key> others(7, key);
  others[0].model[0] ^= 1;
  others[1].text[1] ^= 1;
  others[2].isa = key.isa == "scalar" ? "avx512" : "scalar";
  others[3].revision = key.revision - 1;
  others[4].n_layer += 1;
  others[5].kv_dim += 32;
  others[6].model = {rng(), rng()};
  for (const auto& other : others) {
    // A whole, well-formed file, but of `other`.
    auto r = decode_q4_key_file(encode_q4_key_file(other, some_means(other, rng)), key);
    ASSERT_FALSE(r) << q4_key_file_name(other);
    EXPECT_EQ(r.err().code, errc::unsupported) << r.err().message;
  }
  auto good = encode_q4_key_file(key, means);
  EXPECT_TRUE(decode_q4_key_file(good, key));
  temp_dir dir;
  auto missing = read_q4_key_file(dir.path / q4_key_file_name(key), key);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.err().code, errc::not_found);
}

TEST(q4_key_file, means_that_do_not_fit_the_key_are_not_written) {
  std::mt19937_64 rng(test_seed());
  const auto key = some_key(rng);
  auto means = some_means(key, rng);
  means.m.pop_back();
  temp_dir dir;
  EXPECT_FALSE(write_q4_key_file(dir.path, key, means));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path));
}

TEST(q4_key_file, the_folder_is_beside_the_ssd_tier_else_under_xdg_cache_home) {
  config::server_config cfg;
  cfg.cache.dir = "/srv/strata-cache";
  EXPECT_EQ(q4_key_dir(cfg, true), std::filesystem::path("/srv/strata-cache/q4-keys"));
  {
    scoped_env xdg("XDG_CACHE_HOME", "/var/tmp/xdg");
    EXPECT_EQ(q4_key_dir(cfg, false), std::filesystem::path("/var/tmp/xdg/strata/q4-keys"));
  }
  {
    scoped_env xdg("XDG_CACHE_HOME", "");
    scoped_env home("HOME", "/home/someone");
    EXPECT_EQ(q4_key_dir(cfg, false), std::filesystem::path("/home/someone/.cache/strata/q4-keys"));
  }
}

/// q4_key_means_kept with a `take` that counts its calls and returns the same random means each time.
struct counting_take {
  model::q4_key_means means;
  int calls = 0;
  std::function<result<model::q4_key_means>()> fn() {
    return [this]() -> result<model::q4_key_means> {
      ++calls;
      return means;
    };
  }
};

TEST(q4_key_means_kept, takes_the_means_once_then_reads_them_and_takes_them_again_for_a_bad_file) {
  std::mt19937_64 rng(test_seed());
  temp_dir dir;
  const auto key = some_key(rng);
  counting_take take{some_means(key, rng)};
  const auto file = dir.path / "q4-keys" / q4_key_file_name(key);

  auto first = q4_key_means_kept(dir.path / "q4-keys", key, take.fn());
  ASSERT_TRUE(first) << first.err().message;
  EXPECT_FALSE(first->read);
  EXPECT_EQ(first->file, file);
  EXPECT_EQ(take.calls, 1);
  EXPECT_TRUE(same_bits(first->means, take.means));

  auto second = q4_key_means_kept(dir.path / "q4-keys", key, take.fn());
  ASSERT_TRUE(second) << second.err().message;
  EXPECT_TRUE(second->read);
  EXPECT_EQ(second->file, file);
  EXPECT_EQ(take.calls, 1) << "read, not taken";
  EXPECT_TRUE(same_bits(second->means, take.means));

  const auto good = read_all(file);
  auto flipped = good;
  flipped[static_cast<std::size_t>(rng() % flipped.size())] ^= std::byte{0x10};
  auto other_key = key;
  other_key.model[0] ^= 1;
  const std::vector<std::vector<std::byte>> bad_files = {
      flipped,
      std::vector<std::byte>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(rng() % good.size())),
      encode_q4_key_file(other_key, some_means(other_key, rng)),
      {},
  };
  for (std::size_t i = 0; i < bad_files.size(); ++i) {
    write_all(file, bad_files[i]);
    const int before = take.calls;
    auto again = q4_key_means_kept(dir.path / "q4-keys", key, take.fn());
    ASSERT_TRUE(again) << again.err().message;
    EXPECT_FALSE(again->read) << "bad file " << i;
    EXPECT_EQ(take.calls, before + 1) << "bad file " << i;
    EXPECT_TRUE(same_bits(again->means, take.means)) << "bad file " << i;
    EXPECT_EQ(read_all(file), good) << "bad file " << i << " written anew";
  }
  std::filesystem::remove(file);
  auto missing = q4_key_means_kept(dir.path / "q4-keys", key, take.fn());
  ASSERT_TRUE(missing);
  EXPECT_FALSE(missing->read);
  EXPECT_EQ(read_all(file), good);
}

TEST(q4_key_means_kept, a_folder_that_cannot_be_written_still_gives_the_means) {
  std::mt19937_64 rng(test_seed());
  temp_dir dir;
  const auto key = some_key(rng);
  counting_take take{some_means(key, rng)};
  // A regular file where the folder should be: no folder can be made there (root included).
  write_all(dir.path / "not-a-dir", std::vector<std::byte>(3));
  auto kept = q4_key_means_kept(dir.path / "not-a-dir" / "q4-keys", key, take.fn());
  ASSERT_TRUE(kept) << kept.err().message;
  EXPECT_FALSE(kept->read);
  EXPECT_TRUE(kept->file.empty());
  EXPECT_TRUE(same_bits(kept->means, take.means));
  EXPECT_EQ(take.calls, 1);
}

TEST(q4_key_means_kept, a_failing_take_fails_and_writes_nothing) {
  std::mt19937_64 rng(test_seed());
  temp_dir dir;
  const auto key = some_key(rng);
  auto kept = q4_key_means_kept(dir.path, key, []() -> result<model::q4_key_means> { return fail(errc::invalid_argument, "no"); });
  ASSERT_FALSE(kept);
  EXPECT_EQ(kept.err().message, "no");
  EXPECT_TRUE(std::filesystem::is_empty(dir.path));
}

const std::string k_model = std::string(STRATA_SHARED_DIR) + "/models/tiny-llama-spm-f16.gguf";

config::server_config engine_config(config::cache_mode mode, const std::filesystem::path& cache_dir) {
  config::server_config cfg;
  cfg.cache.mode = mode;
  cfg.cache.dir = cache_dir.string();
  cfg.kv.memory = 16ull << 20;
  cfg.cache.hot_memory = 8ull << 20;
  cfg.kv.block_tokens = 16;
  cfg.model.compute_threads = 2;
  cfg.model.ctx = 256;
  return cfg;
}

TEST(q4_key_file, an_engine_reads_on_its_second_load_the_means_its_first_load_took) {
  temp_dir dir;
  scoped_env xdg("XDG_CACHE_HOME", (dir.path / "xdg").string());
  for (auto mode : {config::cache_mode::off, config::cache_mode::hot, config::cache_mode::tiered}) {
    SCOPED_TRACE(config::to_string(mode));
    const auto cache_dir = dir.path / ("cache-" + std::string(config::to_string(mode)));
    const auto keys_dir = mode == config::cache_mode::tiered ? cache_dir / "q4-keys" : dir.path / "xdg" / "strata" / "q4-keys";
    std::error_code ec;
    std::filesystem::remove_all(keys_dir, ec);

    auto first = engine::load(engine_config(mode, cache_dir), k_model);
    ASSERT_TRUE(first) << first.err().message;
    ASSERT_TRUE((*first)->supports_kv_bits(4)) << "the test model must take q4_0 KV";
    const auto digest = (*first)->q4_keys_digest();
    EXPECT_NE(digest, (std::array<std::uint64_t, 2>{}));
    std::vector<std::filesystem::path> files;
    for (const auto& f : std::filesystem::directory_iterator(keys_dir)) files.push_back(f.path());
    ASSERT_EQ(files.size(), 1u);
    const auto& hp = (*first)->mdl().hp;
    const auto fp = kv::model_fingerprint((*first)->mdl().file.bytes());
    const auto key = q4_key_file_key_for(fp, hp.n_layer, static_cast<std::int32_t>(hp.kv_dim()));
    EXPECT_EQ(files[0].filename(), q4_key_file_name(key));
    // What the file holds is what a calibration here gives.
    auto m = model::model::load(k_model);
    ASSERT_TRUE(m) << m.err().message;
    kernels::compute_pool pool(2);
    auto fresh = q4_key_means_of(*m, (*first)->tok(), pool);
    ASSERT_TRUE(fresh) << fresh.err().message;
    auto stored = read_q4_key_file(files[0], key);
    ASSERT_TRUE(stored) << stored.err().message;
    EXPECT_TRUE(same_bits(*stored, *fresh));
    // The file's key leaves out the thread count: the means must not depend on it.
    kernels::compute_pool one(1);
    auto alone = q4_key_means_of(*m, (*first)->tok(), one);
    ASSERT_TRUE(alone) << alone.err().message;
    EXPECT_TRUE(same_bits(*alone, *fresh)) << "one thread against two";
    if (mode != config::cache_mode::tiered) {
      // strata perplexity and bench read the file a server without the SSD tier keeps.
      auto tools = q4_key_means_kept_for(*m, (*first)->tok(), pool, q4_key_dir(config::server_config{}, false));
      ASSERT_TRUE(tools) << tools.err().message;
      EXPECT_TRUE(tools->read);
      EXPECT_EQ(tools->file, files[0]);
      EXPECT_TRUE(same_bits(tools->means, *fresh));
    }
    first->reset();

    const auto before = std::filesystem::last_write_time(files[0]);
    auto second = engine::load(engine_config(mode, cache_dir), k_model);
    ASSERT_TRUE(second) << second.err().message;
    EXPECT_EQ((*second)->q4_keys_digest(), digest);
    EXPECT_EQ(std::filesystem::last_write_time(files[0]), before) << "read, not written again";
    second->reset();

    // A corrupt file: taken again, the same means.
    auto bytes = read_all(files[0]);
    bytes[k_q4_key_file_header + 5] ^= std::byte{0x40};
    write_all(files[0], bytes);
    auto third = engine::load(engine_config(mode, cache_dir), k_model);
    ASSERT_TRUE(third) << third.err().message;
    EXPECT_EQ((*third)->q4_keys_digest(), digest);
    EXPECT_TRUE(read_q4_key_file(files[0], key)) << "written anew";
  }
}

}  // namespace
}  // namespace strata::engine
