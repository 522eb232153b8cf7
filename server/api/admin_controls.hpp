#pragma once
// The admin API under /admin/api/, behind the API key when one is set:
//   GET  /admin/api/stats        the cache and the server as the dashboard shows them (admin_stats.hpp)
//   POST /admin/api/cache/mode   {"mode":"off"|"hot"|"tiered"}: switch cache.mode at run time
//   POST /admin/api/cache/clear  {"tier":"hot"|"ssd"}: empty the RAM tier or the SSD tier
// The switches go to the scheduler and the SSD store as messages; the answer says what was asked,
// and the stats show it done a moment later.

#include <memory>

#include "server/api/router.hpp"
#include "server/engine/engine.hpp"

namespace strata::api {

/// Registers the admin routes on `r` for the engine `e` will hold once the model is loaded (until
/// then /admin/api/stats answers {"loading":{"stage","progress"}} and the others 503). `e` and
/// `status` outlive the router's use.
void add_admin_routes(router& r, const std::unique_ptr<engine::engine>& e, const server_status& status);

}  // namespace strata::api
