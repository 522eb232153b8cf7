#pragma once
// GET /admin/api/stats: the KV cache as an operator sees it, as JSON. Per tier (RAM today; the SSD
// tier reports null until it exists): blocks in use, cached and free per KV format, bytes and
// budgets; prefix-cache queries, hits and hit rate; evictions; boundary-snapshot bytes (always 0:
// every layer keeps its pages, see README "Prefix cache").

#include <string>

#include "server/engine/engine.hpp"

namespace strata::api {

std::string render_admin_stats(const engine::engine& e);

}  // namespace strata::api
