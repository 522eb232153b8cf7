#include "src/config/config.hpp"

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace strata::config {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(config, shipped_strata_toml_states_exactly_the_built_in_defaults) {
  auto parsed = load_file("conf/strata.toml");
  ASSERT_TRUE(parsed) << parsed.err().message;
  server_config d;
  const server_config& c = *parsed;
  EXPECT_EQ(c.server.host, d.server.host);
  EXPECT_EQ(c.server.port, d.server.port);
  EXPECT_EQ(c.server.threads, d.server.threads);
  EXPECT_EQ(c.server.api_keys, d.server.api_keys);
  EXPECT_EQ(c.server.metrics_public, d.server.metrics_public);
  EXPECT_EQ(c.server.cors_origins, d.server.cors_origins);
  EXPECT_EQ(c.model.path, d.model.path);
  EXPECT_EQ(c.model.ctx, d.model.ctx);
  EXPECT_EQ(c.model.compute_threads, d.model.compute_threads);
  EXPECT_EQ(c.model.device, d.model.device);
  EXPECT_EQ(c.model.served_names, d.model.served_names);
  EXPECT_EQ(c.cache.mode, d.cache.mode);
  EXPECT_EQ(c.cache.dir, d.cache.dir);
  EXPECT_EQ(c.cache.hot_memory, d.cache.hot_memory);
  EXPECT_EQ(c.cache.host_memory, d.cache.host_memory);
  EXPECT_EQ(c.cache.ssd_max, d.cache.ssd_max);
  EXPECT_EQ(c.cache.write_through, d.cache.write_through);
  EXPECT_EQ(c.kv.memory, d.kv.memory);
  EXPECT_EQ(c.kv.block_tokens, d.kv.block_tokens);
  EXPECT_EQ(c.kv.default_bits, d.kv.default_bits);
  EXPECT_EQ(c.kv.prefault_tokens, d.kv.prefault_tokens);
  EXPECT_EQ(c.scheduler.token_budget, d.scheduler.token_budget);
  EXPECT_EQ(c.scheduler.prefill_while_decoding, d.scheduler.prefill_while_decoding);
  EXPECT_EQ(c.scheduler.max_running, d.scheduler.max_running);
  EXPECT_EQ(c.scheduler.max_queued, d.scheduler.max_queued);
  EXPECT_EQ(c.limits.max_body, d.limits.max_body);
  EXPECT_EQ(c.limits.max_connections, d.limits.max_connections);
  EXPECT_EQ(c.limits.header_timeout, d.limits.header_timeout);
  EXPECT_EQ(c.limits.idle_timeout, d.limits.idle_timeout);
  EXPECT_EQ(c.limits.request_timeout, d.limits.request_timeout);
  EXPECT_EQ(c.limits.shutdown_grace, d.limits.shutdown_grace);
  EXPECT_EQ(c.log.level, d.log.level);
  EXPECT_EQ(c.log.json, d.log.json);
  EXPECT_EQ(c.cluster.directory_ttl, d.cluster.directory_ttl);
  EXPECT_EQ(c.cluster.fetch_timeout, d.cluster.fetch_timeout);
  EXPECT_EQ(c.cluster.redis_value_max, d.cluster.redis_value_max);
}

TEST(config, shipped_strata_toml_documents_every_known_key) {
  std::string text = read_file("conf/strata.toml");
  for (const auto& key : known_keys()) {
    auto dot = key.find('.');
    std::string section = "[" + key.substr(0, dot) + "]";
    std::string name = "\n" + key.substr(dot + 1) + " ";
    EXPECT_NE(text.find(section), std::string::npos) << section;
    EXPECT_NE(text.find(name), std::string::npos) << key << " is not documented in conf/strata.toml";
  }
}

TEST(config, reads_sizes_with_binary_and_decimal_units) {
  EXPECT_EQ(parse_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_size("4GiB"), 4ull << 30);
  EXPECT_EQ(parse_size("1.5GB"), 1'500'000'000ull);
  EXPECT_EQ(parse_size("1024"), 1024ull);
  EXPECT_EQ(parse_size(" 2 KiB "), 2048ull);
  EXPECT_FALSE(parse_size("lots"));
  EXPECT_FALSE(parse_size("12 parsecs"));
  EXPECT_FALSE(parse_size("-5MiB"));
  EXPECT_FALSE(parse_size("1e30GiB"));
}

TEST(config, reads_durations) {
  using std::chrono::milliseconds;
  EXPECT_EQ(parse_duration("250ms"), milliseconds(250));
  EXPECT_EQ(parse_duration("10s"), milliseconds(10'000));
  EXPECT_EQ(parse_duration("5m"), milliseconds(300'000));
  EXPECT_EQ(parse_duration("1h"), milliseconds(3'600'000));
  EXPECT_FALSE(parse_duration("soon"));
  EXPECT_FALSE(parse_duration("3 fortnights"));
}

TEST(config, keys_present_override_the_defaults_and_others_stay) {
  auto c = parse_toml("[server]\nport = 9000\n[cache]\nmode = \"tiered\"\nhot_memory = \"2GiB\"\n", "t");
  ASSERT_TRUE(c) << c.err().message;
  EXPECT_EQ(c->server.port, 9000);
  EXPECT_EQ(c->cache.mode, cache_mode::tiered);
  EXPECT_EQ(c->cache.hot_memory, 2ull << 30);
  EXPECT_EQ(c->server.host, "127.0.0.1");
}

TEST(config, host_memory_is_auto_by_default_on_for_the_gpu_off_for_the_cpu_and_a_size_when_given) {
  server_config d;
  EXPECT_FALSE(d.cache.host_memory);
  EXPECT_EQ(d.host_memory_bytes(), 0u) << "the CPU's pool is in RAM already";
  d.model.device = "cuda";
  EXPECT_GT(d.host_memory_bytes(), 0u);
  EXPECT_LE(d.host_memory_bytes(), host_memory_auto_gpu);
  d.cache.mode = cache_mode::off;
  EXPECT_EQ(d.host_memory_bytes(), 0u) << "nothing is cached with cache.mode = off";

  auto c = parse_toml("[cache]\nhost_memory = \"3GiB\"\n", "t");
  ASSERT_TRUE(c) << c.err().message;
  EXPECT_EQ(c->host_memory_bytes(), 3ull << 30) << "allowed on the CPU when asked for";
  c = parse_toml("[model]\ndevice = \"cuda\"\n[cache]\nhost_memory = 0\n", "t");
  ASSERT_TRUE(c) << c.err().message;
  EXPECT_EQ(c->host_memory_bytes(), 0u) << "0 turns it off on the GPU";
  c = parse_toml("[cache]\nhost_memory = \"auto\"\n", "t");
  ASSERT_TRUE(c) << c.err().message;
  EXPECT_FALSE(c->cache.host_memory);
  c = parse_toml("[cache]\nhost_memory = \"2GiB\"\nmode = \"off\"\n", "t");
  ASSERT_TRUE(c) << c.err().message;
  EXPECT_EQ(c->host_memory_bytes(), 0u) << "like cache.hot_memory, unused with cache.mode = off";
  EXPECT_TRUE(parse_host_memory("auto"));
  EXPECT_FALSE(parse_host_memory("lots"));
  EXPECT_FALSE(parse_host_memory(""));
}

TEST(config, metrics_are_private_by_default_and_public_when_set) {
  EXPECT_FALSE(server_config{}.server.metrics_public);
  auto c = parse_toml("[server]\napi_keys = [\"k1\"]\nmetrics_public = true\n", "t");
  ASSERT_TRUE(c) << c.err().message;
  EXPECT_TRUE(c->server.metrics_public);
  EXPECT_EQ(c->server.api_keys, std::vector<api_key>{{"k1"}});
}

void expect_error_naming(std::string_view toml, std::string_view key) {
  auto c = parse_toml(toml, "t");
  ASSERT_FALSE(c) << toml;
  EXPECT_EQ(c.err().code, errc::invalid_argument);
  EXPECT_NE(c.err().message.find(key), std::string::npos) << c.err().message;
}

TEST(config, unknown_keys_and_bad_values_are_errors_that_name_the_key) {
  expect_error_naming("[server]\nprot = 80\n", "server.prot");
  expect_error_naming("[nonsense]\nx = 1\n", "nonsense.x");
  expect_error_naming("nonsense = 1\n", "nonsense");
  expect_error_naming("[server]\nport = 70000\n", "server.port");
  expect_error_naming("[server]\nport = \"80\"\n", "server.port");
  expect_error_naming("[cache]\nmode = \"lukewarm\"\n", "cache.mode");
  expect_error_naming("[cache]\nhot_memory = \"much\"\n", "cache.hot_memory");
  expect_error_naming("[cache]\nhost_memory = \"plenty\"\n", "cache.host_memory");
  expect_error_naming("[cache]\nhost_memory = -1\n", "cache.host_memory");
  expect_error_naming("[cache]\nhost_memory = true\n", "cache.host_memory");
  expect_error_naming("[kv]\ndefault_bits = 5\n", "kv.default_bits");
  expect_error_naming("[kv]\nprefault_tokens = -1\n", "kv.prefault_tokens");
  expect_error_naming("[limits]\nidle_timeout = 60\n", "limits.idle_timeout");
  expect_error_naming("[log]\nlevel = \"loud\"\n", "log.level");
  expect_error_naming("[server]\napi_keys = [1, 2]\n", "server.api_keys");
  expect_error_naming("[server]\nmetrics_public = \"yes\"\n", "server.metrics_public");
  expect_error_naming("[server]\nmetrics_public = 1\n", "server.metrics_public");
  expect_error_naming("[scheduler]\ntoken_budget = 4\nmax_running = 16\n", "scheduler.token_budget");
}

TEST(config, api_keys_are_strings_or_tables_with_a_name_and_a_salt) {
  auto c = parse_toml(R"([server]
api_keys = ["sk-plain", { key = "sk-a", name = "team-a", salt = "s3cret" }, { key = "sk-b", name = "b.2" }, { key = "sk-c", salt = "x" }]
)", "t");
  ASSERT_TRUE(c) << c.err().message;
  EXPECT_EQ(c->server.api_keys, (std::vector<api_key>{{"sk-plain", "", ""}, {"sk-a", "team-a", "s3cret"}, {"sk-b", "b.2", ""}, {"sk-c", "", "x"}}));
  expect_error_naming("[server]\napi_keys = [{ name = \"a\" }]\n", "server.api_keys[0].key");
  expect_error_naming("[server]\napi_keys = [\"k\", { key = \"k2\", role = \"admin\" }]\n", "server.api_keys[1].role");
  expect_error_naming("[server]\napi_keys = [{ key = \"k\", salt = \"\" }]\n", "server.api_keys[0].salt");
  expect_error_naming("[server]\napi_keys = [{ key = \"k\", salt = 7 }]\n", "server.api_keys[0].salt");
  expect_error_naming("[server]\napi_keys = [{ key = \"k\", name = \"two words\" }]\n", "server.api_keys[0].name");
  expect_error_naming("[server]\napi_keys = [\"\"]\n", "server.api_keys[0]");
  expect_error_naming("[server]\napi_keys = \"k\"\n", "server.api_keys");
}

TEST(config, reads_cors_origins_and_refuses_what_is_not_an_origin) {
  auto c = parse_toml("[server]\ncors_origins = [\"https://app.example\", \"http://localhost:3000\", \"*\"]\n", "t");
  ASSERT_TRUE(c) << c.err().message;
  EXPECT_EQ(c->server.cors_origins,
            (std::vector<std::string>{"https://app.example", "http://localhost:3000", "*"}));
  EXPECT_TRUE(server_config{}.server.cors_origins.empty());
  expect_error_naming("[server]\ncors_origins = \"*\"\n", "server.cors_origins");
  expect_error_naming("[server]\ncors_origins = [1]\n", "server.cors_origins");
  expect_error_naming("[server]\ncors_origins = [\"\"]\n", "server.cors_origins");
  expect_error_naming("[server]\ncors_origins = [\"app.example\"]\n", "server.cors_origins");
  expect_error_naming("[server]\ncors_origins = [\"https://app.example/\"]\n", "server.cors_origins");
  expect_error_naming("[server]\ncors_origins = [\"https://app.example/path\"]\n", "server.cors_origins");
  expect_error_naming("[server]\ncors_origins = [\"https://\"]\n", "server.cors_origins");
}

TEST(config, reads_served_model_names_and_refuses_empty_ones) {
  auto c = parse_toml("[model]\nserved_names = [\"tiny\", \"tiny-alias\"]\n", "t");
  ASSERT_TRUE(c) << c.err().message;
  EXPECT_EQ(c->model.served_names, (std::vector<std::string>{"tiny", "tiny-alias"}));
  expect_error_naming("[model]\nserved_names = \"tiny\"\n", "model.served_names");
  expect_error_naming("[model]\nserved_names = [\"\"]\n", "model.served_names");
  expect_error_naming("[model]\nserved_names = [1]\n", "model.served_names");
}

TEST(config, reads_the_device_and_refuses_one_it_does_not_know) {
  EXPECT_EQ(server_config{}.model.device, "cpu");
  auto c = parse_toml("[model]\ndevice = \"cuda\"\n", "t");
  ASSERT_TRUE(c) << c.err().message;
  EXPECT_EQ(c->model.device, "cuda");
  expect_error_naming("[model]\ndevice = \"gpu\"\n", "model.device");
  expect_error_naming("[model]\ndevice = 1\n", "model.device");
}

TEST(config, an_empty_cache_dir_is_an_error_not_the_working_directory) {
  expect_error_naming("[cache]\ndir = \"\"\n", "cache.dir");
  server_config c;
  c.cache.dir.clear();
  auto v = c.validate();
  ASSERT_FALSE(v);
  EXPECT_NE(v.err().message.find("cache.dir"), std::string::npos) << v.err().message;
}

TEST(config, malformed_toml_reports_the_line) {
  auto c = parse_toml("[server]\nport = = 3\n", "bad.toml");
  ASSERT_FALSE(c);
  EXPECT_NE(c.err().message.find("bad.toml:2"), std::string::npos) << c.err().message;
}

TEST(config, expands_a_leading_tilde_in_the_cache_dir) {
  server_config c;
  c.cache.dir = "~/x/y";
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(c.cache_dir(), std::filesystem::path("/home/someone/x/y"));
  c.cache.dir = "/var/cache/strata";
  EXPECT_EQ(c.cache_dir(), std::filesystem::path("/var/cache/strata"));
}

}  // namespace
}  // namespace strata::config
