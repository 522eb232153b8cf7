#pragma once
// GET /admin/api/stats: the KV cache as an operator sees it, as JSON. Per tier (ram: the KV pool,
// in GPU memory with --device cuda; host: the host tier under it; ssd; remote; null where a tier
// is off): blocks in use, cached and free per KV format, bytes and
// budgets; prefix-cache queries, hits and hit rate; evictions; boundary-snapshot bytes (always 0:
// every layer keeps its pages, see README "Prefix cache"). Also what the dashboard shows beside
// the cache: the model and its KV format, cache.mode now, requests running and waiting, tokens
// prompted and generated, and TTFT and inter-token percentiles.

#include <optional>
#include <string>

#include "server/api/router.hpp"
#include "server/engine/engine.hpp"

namespace strata::api {

std::string render_admin_stats(const engine::engine& e, const server_status& status);

/// The q-quantile (0..1) of what `h` observed, interpolated linearly inside its bucket (as
/// Prometheus' histogram_quantile does); the largest bound past the last one; null when empty.
std::optional<double> histogram_quantile(const metrics::histogram& h, double q);

}  // namespace strata::api
