#include "server/api/admin_stats.hpp"

#include <algorithm>
#include <chrono>

#include <boost/json.hpp>

namespace strata::api {
namespace json = boost::json;

namespace {

double value(const metrics::gauge* g) { return g ? g->value() : 0.0; }
std::uint64_t value(const metrics::counter* c) { return c ? c->value() : 0; }

json::value percentiles(const metrics::histogram* h) {
  if (!h) return nullptr;
  auto q = [h](double p) { auto v = histogram_quantile(*h, p); return v ? json::value(*v) : json::value(nullptr); };
  return json::object{{"count", h->count()}, {"p50", q(0.5)}, {"p90", q(0.9)}, {"p99", q(0.99)}};
}

const char* format_name(kv::kv_format f) { return f == kv::kv_format::f16 ? "f16" : f == kv::kv_format::q8_0 ? "q8_0" : "q4_0"; }

}  // namespace

std::optional<double> histogram_quantile(const metrics::histogram& h, double q) {
  const std::uint64_t total = h.count();
  if (total == 0) return std::nullopt;
  const auto& bounds = h.bounds();
  const double rank = q * static_cast<double>(total);
  double below = 0;  // observations in the buckets before this one
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    const auto n = static_cast<double>(h.bucket(i));
    if (n > 0 && below + n >= rank) {
      const double lo = i == 0 ? 0.0 : bounds[i - 1];
      return lo + (bounds[i] - lo) * std::clamp((rank - below) / n, 0.0, 1.0);
    }
    below += n;
  }
  return bounds.empty() ? std::nullopt : std::optional<double>(bounds.back());
}

std::string render_admin_stats(const engine::engine& e, const server_status& status) {
  const sched::scheduler_metrics& m = e.stats();
  const kv::pool_config& pool = e.kv_pool();
  json::object blocks;
  json::object bytes_per_token;
  const std::int64_t tokens = e.block_tokens();
  for (kv::kv_format f : kv::k_kv_formats) {
    const auto i = static_cast<std::size_t>(kv::format_index(f));
    const char* name = format_name(f);
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
  json::value host = nullptr;
  if (const host_tier::tier_metrics* hm = e.host_stats()) {
    host = json::object{{"blocks", value(hm->blocks)},
                        {"bytes", value(hm->bytes)},
                        {"budget_bytes", e.host_budget()},
                        {"stored", value(hm->stored)},
                        {"hits", value(hm->hits)},
                        {"misses", value(hm->misses)},
                        {"evictions", value(hm->evictions)},
                        {"spilled", value(hm->spilled)},
                        {"restored_tokens", value(m.host_hit_tokens)}};
  }
  json::value remote = nullptr;
  if (const kv_fetch::fetch_metrics* fm = e.fetch_stats()) {
    remote = json::object{{"blocks", value(fm->blocks)},
                          {"bytes", value(fm->bytes)},
                          {"failures", value(fm->failures)},
                          {"fetched_tokens", value(m.remote_hit_tokens)},
                          {"fetch_seconds", percentiles(fm->seconds)}};
  }
  json::object doc{
      {"loading", nullptr},
      {"cache_mode", std::string(config::to_string(e.cache_mode()))},
      {"configured_cache_mode", std::string(config::to_string(e.config().cache.mode))},
      {"model", {{"id", e.model_id()},
                 {"architecture", std::string(model::arch_name(e.mdl().hp.architecture))},
                 {"layers", e.mdl().hp.n_layer},
                 {"context", e.max_context()},
                 {"kv_format", format_name(kv::kv_format_from_bits(e.default_kv_bits()).value_or(kv::kv_format::f16))}}},
      {"uptime_seconds", std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count() -
                             status.created},
      {"block_tokens", tokens},
      {"kv_bytes_per_token", std::move(bytes_per_token)},
      {"tiers", {{"ram", std::move(ram)}, {"host", std::move(host)}, {"ssd", std::move(ssd)}, {"remote", std::move(remote)}}},
      {"prefix_cache", {{"query_tokens", queries}, {"hit_tokens", hits},
                        {"hit_rate", queries ? static_cast<double>(hits) / static_cast<double>(queries) : 0.0}}},
      {"snapshot_bytes", value(m.snapshot_bytes)},
      {"snapshots", {{"count", value(m.snapshots)}, {"bytes", value(m.snapshot_bytes)}, {"taken", value(m.snapshots_taken)},
                     {"restores", value(m.snapshot_restores)}, {"hit_tokens", value(m.snapshot_hit_tokens)}}},
      {"requests", {{"running", value(m.running)}, {"waiting", value(m.waiting)}, {"rejected", value(m.rejected)}}},
      {"tokens", {{"prompt", value(m.prompt_tokens)}, {"generated", value(m.generated_tokens)}}},
      {"latency_seconds", {{"ttft", percentiles(m.ttft_seconds)}, {"inter_token", percentiles(m.inter_token_seconds)}}},
  };
  return json::serialize(doc);
}

}  // namespace strata::api
