#include "src/config/config.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

// Header-only with exceptions off: parse errors come back as values (the packaged library throws).
#undef TOML_HEADER_ONLY
#undef TOML_SHARED_LIB
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

namespace strata::config {

std::string_view to_string(cache_mode m) {
  switch (m) {
    case cache_mode::off: return "off";
    case cache_mode::hot: return "hot";
    case cache_mode::tiered: return "tiered";
  }
  return "?";
}

std::optional<cache_mode> parse_cache_mode(std::string_view s) {
  if (s == "off") return cache_mode::off;
  if (s == "hot") return cache_mode::hot;
  if (s == "tiered") return cache_mode::tiered;
  return std::nullopt;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

/// Splits "12.5GiB" into 12.5 and "GiB"; false if the number part is malformed.
bool split_number(std::string_view s, double& number, std::string_view& unit) {
  s = trim(s);
  std::size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return false;
  std::string num(s.substr(0, i));
  char* end = nullptr;
  number = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size() || !std::isfinite(number) || number < 0) return false;
  unit = trim(s.substr(i));
  return true;
}

}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view s) {
  double n = 0;
  std::string_view unit;
  if (!split_number(s, n, unit)) return std::nullopt;
  static const std::map<std::string, double, std::less<>> units = {
      {"", 1.0},          {"B", 1.0},
      {"KiB", 1024.0},    {"MiB", 1024.0 * 1024},  {"GiB", 1024.0 * 1024 * 1024},
      {"TiB", 1024.0 * 1024 * 1024 * 1024},
      {"KB", 1e3},        {"MB", 1e6},             {"GB", 1e9},  {"TB", 1e12},
      {"K", 1024.0},      {"M", 1024.0 * 1024},    {"G", 1024.0 * 1024 * 1024},
  };
  auto it = units.find(unit);
  if (it == units.end()) return std::nullopt;
  double bytes = n * it->second;
  if (bytes >= 1.8e19) return std::nullopt;
  return static_cast<std::uint64_t>(std::llround(bytes));
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view s) {
  double n = 0;
  std::string_view unit;
  if (!split_number(s, n, unit)) return std::nullopt;
  double ms = 0;
  if (unit == "ms") ms = n;
  else if (unit == "s" || unit.empty()) ms = n * 1e3;
  else if (unit == "m" || unit == "min") ms = n * 60e3;
  else if (unit == "h") ms = n * 3600e3;
  else return std::nullopt;
  if (ms > 1e15) return std::nullopt;
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(ms)));
}

namespace {

using setter = std::function<result<void>(const toml::node&, server_config&)>;

error bad(std::string_view key, std::string_view what) {
  return fail(errc::invalid_argument, key, ": ", what);
}


template <class Fn>
setter with_string(std::string key, Fn fn) {
  return [key, fn](const toml::node& n, server_config& c) -> result<void> {
    auto v = n.value<std::string>();
    if (!n.is_string() || !v) return bad(key, "expected a string");
    return fn(*v, c);
  };
}

/// A string taken as it is (empty: the feature is off).
setter plain_string(std::string key, std::function<std::string&(server_config&)> field) {
  return with_string(key, [field](const std::string& v, server_config& c) -> result<void> {
    field(c) = v;
    return {};
  });
}

setter int_key(std::string key, long long lo, long long hi, std::function<void(server_config&, long long)> set) {
  return [=](const toml::node& n, server_config& c) -> result<void> {
    if (!n.is_integer()) return bad(key, "expected an integer");
    long long v = n.as_integer()->get();
    if (v < lo || v > hi) {
      return bad(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                          ", got " + std::to_string(v));
    }
    set(c, v);
    return {};
  };
}

/// A number in [0, 1] (a TOML float, or 0 or 1).
setter fraction_key(std::string key, std::function<void(server_config&, double)> set) {
  return [=](const toml::node& n, server_config& c) -> result<void> {
    if (!n.is_number()) return bad(key, "expected a number between 0 and 1");
    const double v = n.is_integer() ? static_cast<double>(n.as_integer()->get()) : n.as_floating_point()->get();
    if (!(v >= 0.0 && v <= 1.0)) return bad(key, "must be between 0 and 1, got " + std::to_string(v));
    set(c, v);
    return {};
  };
}

setter bool_key(std::string key, std::function<void(server_config&, bool)> set) {
  return [=](const toml::node& n, server_config& c) -> result<void> {
    if (!n.is_boolean()) return bad(key, "expected true or false");
    set(c, n.as_boolean()->get());
    return {};
  };
}

setter size_key(std::string key, std::uint64_t lo, std::function<void(server_config&, std::uint64_t)> set) {
  return [=](const toml::node& n, server_config& c) -> result<void> {
    std::optional<std::uint64_t> v;
    if (n.is_integer() && n.as_integer()->get() >= 0) v = static_cast<std::uint64_t>(n.as_integer()->get());
    else if (n.is_string()) v = parse_size(n.as_string()->get());
    if (!v) return bad(key, "expected a size such as \"512MiB\", \"4GiB\" or a byte count");
    if (*v < lo) return bad(key, "must be at least " + std::to_string(lo) + " bytes");
    set(c, *v);
    return {};
  };
}

setter duration_key(std::string key, std::function<void(server_config&, std::chrono::milliseconds)> set) {
  return [=](const toml::node& n, server_config& c) -> result<void> {
    std::optional<std::chrono::milliseconds> v;
    if (n.is_string()) v = parse_duration(n.as_string()->get());
    if (!v) return bad(key, "expected a duration such as \"250ms\", \"10s\" or \"5m\"");
    set(c, *v);
    return {};
  };
}

/// Whether `s` is "*" or an origin as browsers send it: http or https, "://", then a host and an
/// optional port, with no path, no trailing slash and no whitespace.
bool is_origin(std::string_view s) {
  if (s == "*") return true;
  std::string_view rest;
  if (s.starts_with("https://")) rest = s.substr(8);
  else if (s.starts_with("http://")) rest = s.substr(7);
  else return false;
  if (rest.empty()) return false;
  for (char ch : rest) {
    auto u = static_cast<unsigned char>(ch);
    if (ch == '/' || ch == '?' || ch == '#' || ch == '@' || u <= ' ' || u >= 0x7f) return false;
  }
  return true;
}

/// Whether `s` can name an API key in the access log: letters, digits, '.', '_' and '-'.
bool is_key_name(std::string_view s) {
  if (s.empty()) return false;
  for (char ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '-') return false;
  return true;
}

/// Element i of server.api_keys: a key as a string, or a table with key, name and salt.
result<api_key> read_api_key(const toml::node& n, std::size_t i) {
  const std::string at = "server.api_keys[" + std::to_string(i) + "]";
  if (auto s = n.value<std::string>(); n.is_string() && s) {
    if (s->empty()) return bad(at, "must not be empty");
    return api_key{*s, {}, {}};
  }
  const auto* tbl = n.as_table();
  if (!tbl) return bad(at, "expected a string or a table { key = \"...\", name = \"...\", salt = \"...\" }");
  api_key k;
  for (const auto& [member, value] : *tbl) {
    const std::string_view m = member.str();
    const std::string where = at + "." + std::string(m);
    std::string* into = m == "key" ? &k.key : m == "name" ? &k.name : m == "salt" ? &k.salt : nullptr;
    if (!into) return bad(where, "unknown member (expected key, name or salt)");
    auto v = value.value<std::string>();
    if (!value.is_string() || !v || v->empty()) return bad(where, "expected a non-empty string");
    *into = *v;
  }
  if (k.key.empty()) return bad(at + ".key", "is required");
  if (!k.name.empty() && !is_key_name(k.name)) return bad(at + ".name", "may hold only letters, digits, '.', '_' and '-'");
  return k;
}

const std::map<std::string, setter, std::less<>>& setters() {
  static const std::map<std::string, setter, std::less<>> table = {
      {"server.host", with_string("server.host", [](const std::string& v, server_config& c) -> result<void> {
         if (v.empty()) return bad("server.host", "must not be empty");
         c.server.host = v;
         return {};
       })},
      {"server.port", int_key("server.port", 0, 65535, [](server_config& c, long long v) { c.server.port = static_cast<std::uint16_t>(v); })},
      {"server.threads", int_key("server.threads", 0, 1024, [](server_config& c, long long v) { c.server.threads = static_cast<int>(v); })},
      {"server.api_keys", [](const toml::node& n, server_config& c) -> result<void> {
         const auto* arr = n.as_array();
         if (!arr) return bad("server.api_keys", "expected an array of keys (strings or tables)");
         std::vector<api_key> keys;
         for (std::size_t i = 0; i < arr->size(); ++i) {
           auto k = read_api_key(*arr->get(i), i);
           if (!k) return std::move(k).err();
           keys.push_back(std::move(*k));
         }
         c.server.api_keys = std::move(keys);
         return {};
       }},
      {"server.metrics_public", bool_key("server.metrics_public", [](server_config& c, bool v) { c.server.metrics_public = v; })},
      {"server.cors_origins", [](const toml::node& n, server_config& c) -> result<void> {
         const auto* arr = n.as_array();
         if (!arr) return bad("server.cors_origins", "expected an array of strings");
         std::vector<std::string> origins;
         for (const auto& e : *arr) {
           auto s = e.value<std::string>();
           if (!e.is_string() || !s || !is_origin(*s)) {
             return bad("server.cors_origins", "expected \"*\" or origins such as \"https://app.example:8443\" "
                                               "(scheme and host, no path), got " + (s ? "\"" + *s + "\"" : std::string("a non-string")));
           }
           origins.push_back(*s);
         }
         c.server.cors_origins = std::move(origins);
         return {};
       }},
      {"model.path", with_string("model.path", [](const std::string& v, server_config& c) -> result<void> {
         c.model.path = v;
         return {};
       })},
      {"model.ctx", int_key("model.ctx", 0, 1 << 24, [](server_config& c, long long v) { c.model.ctx = static_cast<int>(v); })},
      {"model.device", with_string("model.device", [](const std::string& v, server_config& c) -> result<void> {
         if (v != "cpu" && v != "cuda") return bad("model.device", "expected cpu or cuda, got \"" + v + "\"");
         c.model.device = v;
         return {};
       })},
      {"model.compute_threads", int_key("model.compute_threads", 0, 1024, [](server_config& c, long long v) { c.model.compute_threads = static_cast<int>(v); })},
      {"model.served_names", [](const toml::node& n, server_config& c) -> result<void> {
         const auto* arr = n.as_array();
         if (!arr) return bad("model.served_names", "expected an array of non-empty strings");
         std::vector<std::string> names;
         for (const auto& e : *arr) {
           auto v = e.value<std::string>();
           if (!e.is_string() || !v || v->empty()) return bad("model.served_names", "expected an array of non-empty strings");
           names.push_back(*v);
         }
         c.model.served_names = std::move(names);
         return {};
       }},
      {"cache.mode", with_string("cache.mode", [](const std::string& v, server_config& c) -> result<void> {
         auto m = parse_cache_mode(v);
         if (!m) return bad("cache.mode", "expected off, hot or tiered, got \"" + v + "\"");
         c.cache.mode = *m;
         return {};
       })},
      {"cache.dir", with_string("cache.dir", [](const std::string& v, server_config& c) -> result<void> {
         if (v.empty()) return bad("cache.dir", "must not be empty");
         c.cache.dir = v;
         return {};
       })},
      {"cache.hot_memory", size_key("cache.hot_memory", 0, [](server_config& c, std::uint64_t v) { c.cache.hot_memory = v; })},
      {"cache.host_memory", [](const toml::node& n, server_config& c) -> result<void> {
         if (n.is_integer() && n.as_integer()->get() >= 0) {
           c.cache.host_memory = static_cast<std::uint64_t>(n.as_integer()->get());
           return {};
         }
         if (!n.is_string()) return bad("cache.host_memory", "expected \"auto\" or a size such as \"8GiB\" or a byte count (0: off)");
         auto v = parse_host_memory(n.as_string()->get());
         if (!v) return std::move(v).err();
         c.cache.host_memory = *v;
         return {};
       }},
      {"cache.ssd_max", size_key("cache.ssd_max", 0, [](server_config& c, std::uint64_t v) { c.cache.ssd_max = v; })},
      {"cache.write_through", bool_key("cache.write_through", [](server_config& c, bool v) { c.cache.write_through = v; })},
      {"cache.reclaim_low", fraction_key("cache.reclaim_low", [](server_config& c, double v) { c.cache.reclaim_low = v; })},
      {"cache.reclaim_high", fraction_key("cache.reclaim_high", [](server_config& c, double v) { c.cache.reclaim_high = v; })},
      {"cache.snapshot_every", int_key("cache.snapshot_every", 0, 1 << 20, [](server_config& c, long long v) { c.cache.snapshot_every = static_cast<int>(v); })},
      {"kv.memory", size_key("kv.memory", 1 << 20, [](server_config& c, std::uint64_t v) { c.kv.memory = v; })},
      {"kv.block_tokens", int_key("kv.block_tokens", 1, 4096, [](server_config& c, long long v) { c.kv.block_tokens = static_cast<int>(v); })},
      {"kv.prefault_tokens", int_key("kv.prefault_tokens", 0, 1 << 24, [](server_config& c, long long v) { c.kv.prefault_tokens = static_cast<int>(v); })},
      {"kv.default_bits", int_key("kv.default_bits", 4, 16, [](server_config& c, long long v) { c.kv.default_bits = static_cast<int>(v); })},
      {"scheduler.token_budget", int_key("scheduler.token_budget", 1, 1 << 20, [](server_config& c, long long v) { c.scheduler.token_budget = static_cast<int>(v); })},
      {"scheduler.prefill_while_decoding", int_key("scheduler.prefill_while_decoding", 0, 1 << 20, [](server_config& c, long long v) { c.scheduler.prefill_while_decoding = static_cast<int>(v); })},
      {"scheduler.max_running", int_key("scheduler.max_running", 1, 4096, [](server_config& c, long long v) { c.scheduler.max_running = static_cast<int>(v); })},
      {"scheduler.max_queued", int_key("scheduler.max_queued", 0, 1 << 20, [](server_config& c, long long v) { c.scheduler.max_queued = static_cast<int>(v); })},
      {"limits.max_body", size_key("limits.max_body", 1024, [](server_config& c, std::uint64_t v) { c.limits.max_body = v; })},
      {"limits.max_connections", int_key("limits.max_connections", 1, 1 << 20, [](server_config& c, long long v) { c.limits.max_connections = static_cast<int>(v); })},
      {"limits.header_timeout", duration_key("limits.header_timeout", [](server_config& c, auto v) { c.limits.header_timeout = v; })},
      {"limits.idle_timeout", duration_key("limits.idle_timeout", [](server_config& c, auto v) { c.limits.idle_timeout = v; })},
      {"limits.request_timeout", duration_key("limits.request_timeout", [](server_config& c, auto v) { c.limits.request_timeout = v; })},
      {"limits.shutdown_grace", duration_key("limits.shutdown_grace", [](server_config& c, auto v) { c.limits.shutdown_grace = v; })},
      {"limits.ws_stall_timeout", duration_key("limits.ws_stall_timeout", [](server_config& c, auto v) { c.limits.ws_stall_timeout = v; })},
      {"log.level", with_string("log.level", [](const std::string& v, server_config& c) -> result<void> {
         static const char* levels[] = {"trace", "debug", "info", "warn", "error", "off"};
         for (const char* l : levels) {
           if (v == l) {
             c.log.level = v;
             return {};
           }
         }
         return bad("log.level", "expected trace, debug, info, warn, error or off, got \"" + v + "\"");
       })},
      {"cluster.kv_events", plain_string("cluster.kv_events", [](server_config& c) -> std::string& { return c.cluster.kv_events; })},
      {"cluster.kv_events_replay", plain_string("cluster.kv_events_replay", [](server_config& c) -> std::string& { return c.cluster.kv_events_replay; })},
      {"cluster.kv_events_topic", plain_string("cluster.kv_events_topic", [](server_config& c) -> std::string& { return c.cluster.kv_events_topic; })},
      {"cluster.redis", plain_string("cluster.redis", [](server_config& c) -> std::string& { return c.cluster.redis; })},
      {"cluster.advertise_url", plain_string("cluster.advertise_url", [](server_config& c) -> std::string& { return c.cluster.advertise_url; })},
      {"cluster.directory_ttl", duration_key("cluster.directory_ttl", [](server_config& c, auto v) { c.cluster.directory_ttl = v; })},
      {"cluster.fetch_timeout", duration_key("cluster.fetch_timeout", [](server_config& c, auto v) { c.cluster.fetch_timeout = v; })},
      {"cluster.redis_value_max", size_key("cluster.redis_value_max", 0, [](server_config& c, std::uint64_t v) { c.cluster.redis_value_max = v; })},
      {"log.json", bool_key("log.json", [](server_config& c, bool v) { c.log.json = v; })},
  };
  return table;
}

}  // namespace

std::vector<std::string> known_keys() {
  std::vector<std::string> keys;
  for (const auto& [k, _] : setters()) keys.push_back(k);
  return keys;
}

result<void> server_config::validate() const {
  if (cache.dir.empty()) {
    // An empty path is the working directory: the demo model and the SSD tier would land there.
    return bad("cache.dir", "must name a directory, got an empty path");
  }
  if (kv.default_bits != 4 && kv.default_bits != 8 && kv.default_bits != 16) {
    return bad("kv.default_bits", "must be 4, 8 or 16, got " + std::to_string(kv.default_bits));
  }
  if (kv.memory < static_cast<std::uint64_t>(kv.block_tokens)) {
    return bad("kv.memory", "is smaller than one block");
  }
  if (cache.reclaim_low > 0 && cache.reclaim_high < cache.reclaim_low) {
    return bad("cache.reclaim_high", "must be at least cache.reclaim_low");
  }
  if (scheduler.token_budget < scheduler.max_running) {
    return bad("scheduler.token_budget", "must be at least scheduler.max_running (every running "
                                         "sequence needs one token per step)");
  }
  return {};
}

result<std::optional<std::uint64_t>> parse_host_memory(std::string_view s) {
  if (s == "auto") return std::optional<std::uint64_t>();
  auto v = parse_size(s);
  if (!v) return bad("cache.host_memory", "expected \"auto\" or a size such as \"8GiB\", \"512MiB\" or a byte count (0: off), got \"" +
                                          std::string(s) + "\"");
  return std::optional<std::uint64_t>(*v);
}

std::uint64_t server_config::host_memory_bytes() const {
  if (cache.mode == cache_mode::off) return 0;
  if (cache.host_memory) return *cache.host_memory;
  if (model.device != "cuda") return 0;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  const std::uint64_t ram = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
  return ram > 0 ? std::min(host_memory_auto_gpu, ram / 4) : host_memory_auto_gpu;
}

std::filesystem::path server_config::cache_dir() const {
  if (!cache.dir.empty() && cache.dir[0] == '~') {
    const char* home = std::getenv("HOME");
    return std::filesystem::path(home ? home : "/tmp") / std::filesystem::path(cache.dir.substr(cache.dir.size() > 1 ? 2 : 1));
  }
  return cache.dir;
}

result<server_config> parse_toml(std::string_view text, std::string_view source_name, server_config base) {
  toml::parse_result parsed = toml::parse(text, source_name);
  if (!parsed) {
    const auto& e = parsed.error();
    std::ostringstream msg;
    msg << source_name << ":" << e.source().begin.line << ":" << e.source().begin.column << ": "
        << e.description();
    return fail(errc::invalid_argument, msg.str());
  }
  const toml::table& root = parsed.table();
  for (const auto& [section_key, section] : root) {
    std::string section_name(section_key.str());
    const toml::table* tbl = section.as_table();
    if (!tbl) return bad(section_name, "expected a [" + section_name + "] table");
    for (const auto& [key, value] : *tbl) {
      std::string full = section_name + "." + std::string(key.str());
      auto it = setters().find(full);
      if (it == setters().end()) return bad(full, "unknown setting");
      if (auto r = it->second(value, base); !r) return std::move(r).err();
    }
  }
  if (auto r = base.validate(); !r) return std::move(r).err();
  return base;
}

result<server_config> load_file(const std::filesystem::path& path, server_config base) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(errc::not_found, "cannot read config file ", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_toml(ss.str(), path.string(), std::move(base));
}

}  // namespace strata::config
