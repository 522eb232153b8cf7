#include "server/api/admin_stats.hpp"

#include <boost/json.hpp>

namespace strata::api {
namespace json = boost::json;

namespace {

double value(const metrics::gauge* g) { return g ? g->value() : 0.0; }
std::uint64_t value(const metrics::counter* c) { return c ? c->value() : 0; }

}  // namespace

std::string render_admin_stats(const engine::engine& e) {
  const sched::scheduler_metrics& m = e.stats();
  const kv::pool_config& pool = e.kv_pool();
  json::object blocks;
  json::object bytes_per_token;
  const std::int64_t tokens = e.block_tokens();
  for (kv::kv_format f : kv::k_kv_formats) {
    const auto i = static_cast<std::size_t>(kv::format_index(f));
    const char* name = f == kv::kv_format::f16 ? "f16" : f == kv::kv_format::q8_0 ? "q8_0" : "q4_0";
    blocks[name] = {{"in_use", value(m.blocks_in_use[i])},
                    {"cached", value(m.blocks_cached[i])},
                    {"free", value(m.blocks_free[i])},
                    {"bytes_per_block", pool.block_bytes[i]}};
    bytes_per_token[name] = pool.space.capacity[i] > 0 ? json::value(pool.block_bytes[i] / tokens) : json::value(nullptr);
  }
  const std::uint64_t queries = value(m.prefix_query_tokens), hits = value(m.prefix_hit_tokens);
  json::object ram{{"blocks", std::move(blocks)},
                   {"bytes_in_use", value(m.bytes_in_use)},
                   {"bytes_cached", value(m.bytes_cached)},
                   {"budget_bytes", pool.budget},
                   {"cached_budget_bytes", pool.cached_budget},
                   {"evictions", value(m.kv_evictions)}};
  json::value ssd = nullptr;
  if (const ssd::store_metrics* sm = e.ssd_stats()) {
    ssd = json::object{{"state", std::string(ssd::to_string(e.ssd_state()))},
                       {"records", value(sm->records)},
                       {"bytes", value(sm->bytes)},
                       {"max_bytes", e.config().cache.ssd_max},
                       {"degraded", value(sm->degraded) > 0},
                       {"writes", value(sm->writes)},
                       {"write_bytes", value(sm->write_bytes)},
                       {"reads", value(sm->reads)},
                       {"read_bytes", value(sm->read_bytes)},
                       {"read_failures", value(sm->read_failures)},
                       {"dropped_writes", value(sm->dropped_writes)},
                       {"evicted_segments", value(sm->evicted_segments)},
                       {"blocks_lost", value(sm->blocks_lost)},
                       {"restored_tokens", value(m.ssd_hit_tokens)}};
  }
  json::object doc{
      {"cache_mode", std::string(config::to_string(e.config().cache.mode))},
      {"block_tokens", tokens},
      {"kv_bytes_per_token", std::move(bytes_per_token)},
      {"tiers", {{"ram", std::move(ram)}, {"ssd", std::move(ssd)}}},
      {"prefix_cache", {{"query_tokens", queries}, {"hit_tokens", hits},
                        {"hit_rate", queries ? static_cast<double>(hits) / static_cast<double>(queries) : 0.0}}},
      {"snapshot_bytes", value(m.snapshot_bytes)},
      {"snapshots", {{"count", value(m.snapshots)}, {"bytes", value(m.snapshot_bytes)}, {"taken", value(m.snapshots_taken)},
                     {"restores", value(m.snapshot_restores)}, {"hit_tokens", value(m.snapshot_hit_tokens)}}},
      {"requests", {{"running", value(m.running)}, {"waiting", value(m.waiting)}}},
  };
  return json::serialize(doc);
}

}  // namespace strata::api
