#include "actors/kv_fetch/fetch_actor.hpp"

#include <algorithm>
#include <span>

#include <spdlog/spdlog.h>

#include "io/http_client.hpp"
#include "io/ssd/wire_record.hpp"

namespace strata::kv_fetch {

fetch_metrics fetch_metrics::create(metrics::registry& r) {
  fetch_metrics m;
  m.blocks = &r.make_counter("strata_remote_fetch_blocks_total", "KV blocks fetched from other replicas, checked and imported.");
  m.bytes = &r.make_counter("strata_remote_fetch_bytes_total", "Bytes received from other replicas for KV blocks.");
  m.failures = &r.make_counter("strata_remote_fetch_failures_total",
                               "KV block fetches that failed (no answer in time, an error status, a record that failed its checks).");
  m.redis_blocks = &r.make_counter("strata_remote_fetch_redis_blocks_total",
                                   "KV block records read from Redis itself (small records) rather than from a replica.");
  m.seconds = &r.make_histogram("strata_remote_fetch_seconds", "Time from a remote order to its answer, for orders some replica could serve.",
                                {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5});
  return m;
}

std::vector<std::string> pick_sources(const std::vector<std::vector<std::string>>& holders, const std::string& self) {
  auto holds = [&](std::size_t i, const std::string& url) {
    return url != self && std::find(holders[i].begin(), holders[i].end(), url) != holders[i].end();
  };
  // The first block's holder that holds the longest run from the start.
  std::string best;
  std::size_t best_run = 0;
  if (!holders.empty()) {
    for (const auto& url : holders[0]) {
      std::size_t run = 0;
      while (run < holders.size() && holds(run, url)) ++run;
      if (run > best_run) best = url, best_run = run;
    }
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < holders.size(); ++i) {
    if (i < best_run) {
      out.push_back(best);
      continue;
    }
    auto it = std::find_if(holders[i].begin(), holders[i].end(), [&](const std::string& u) { return u != self; });
    if (it == holders[i].end()) break;
    out.push_back(*it);
  }
  return out;
}

fetch_actor::fetch_actor(fetch_options opts, fetch_metrics m) : opts_(std::move(opts)), metrics_(m) {}

void fetch_actor::handle(fetch f) {
  const std::uint64_t id = f.order;
  order_state st;
  st.payloads.resize(f.hashes.size());
  st.arrived = std::chrono::steady_clock::now();
  st.timer = std::make_unique<boost::asio::steady_timer>(executor());
  st.timer->expires_after(opts_.timeout);
  st.timer->async_wait([self = self(), id](const boost::system::error_code& ec) {
    if (!ec) self.tell(expired{id});
  });
  directory::lookup l{id, f.format, f.hashes, self()};
  st.asked = std::move(f);
  orders_[id] = std::move(st);
  if (l.chain.empty() || !opts_.directory.tell(std::move(l))) answer(id);
}

namespace {

/// The KV payload of a wire record that passes every check for the block `want` names, or
/// nothing (logged: what failed, and where the record came from).
std::optional<std::vector<std::byte>> checked(std::string_view body, const ssd::wire_expect& want, std::int64_t block_bytes,
                                              const std::string& from) {
  ssd::wire_fault fault{};
  auto rec = ssd::decode_wire_record(std::as_bytes(std::span(body.data(), body.size())), want, fault);
  if (fault != ssd::wire_fault::none) {
    spdlog::warn("remote KV: block {} from {} refused: {}", want.hash.hex(), from, ssd::to_string(fault));
    return std::nullopt;
  }
  if (static_cast<std::int64_t>(rec.payload.size()) != block_bytes) {
    spdlog::warn("remote KV: block {} from {} has {} bytes of KV, not {}", want.hash.hex(), from, rec.payload.size(), block_bytes);
    return std::nullopt;
  }
  return std::move(rec.payload);
}

}  // namespace

void fetch_actor::handle(directory::lookup_result r) {
  auto it = orders_.find(r.id);
  if (it == orders_.end()) return;  // answered already (expired)
  order_state& st = it->second;
  const std::vector<std::string> sources = pick_sources(r.holders, url_);
  auto in_redis = [&](std::size_t i) { return i < r.values.size() && !r.values[i].empty(); };
  // The leading run of blocks that Redis keeps or another replica holds.
  std::size_t n = 0;
  while (n < st.asked.hashes.size() && (in_redis(n) || n < sources.size())) ++n;
  if (n == 0) return answer(r.id);
  st.pending = n;
  st.fetching = true;
  const std::int64_t block_bytes = st.asked.block_bytes;
  for (std::size_t i = 0; i < n; ++i) {
    ssd::wire_expect want{opts_.model, st.asked.format, ssd::record_kind::block, st.asked.hashes[i], opts_.max_record_bytes};
    if (in_redis(i)) {
      auto payload = checked(r.values[i], want, block_bytes, "redis");
      if (payload && metrics_.redis_blocks) metrics_.redis_blocks->inc();
      self().tell(fetched{r.id, i, std::move(payload), r.values[i].size()});
      continue;
    }
    io::http_get_options o;
    o.base_url = sources[i];
    o.target = "/internal/kv/" + st.asked.hashes[i].hex();
    o.api_key = opts_.api_key;
    o.timeout = opts_.timeout;
    o.max_body = static_cast<std::size_t>(opts_.max_record_bytes);
    io::http_get(executor(), std::move(o), [self = self(), order = r.id, i, want, block_bytes, from = sources[i]](result<io::http_get_reply> got) {
      fetched f{order, i, std::nullopt, 0};
      if (!got) {
        spdlog::debug("remote KV: {}", got.err().message);
      } else if (got->status != 200) {
        spdlog::debug("remote KV: {} answered {} for block {}", from, got->status, want.hash.hex());
      } else {
        f.bytes = got->body.size();
        f.payload = checked(got->body, want, block_bytes, from);
      }
      self.tell(std::move(f));
    });
  }
}

void fetch_actor::handle(fetched f) {
  if (metrics_.bytes) metrics_.bytes->inc(f.bytes);
  if (metrics_.blocks && f.payload) metrics_.blocks->inc();
  if (metrics_.failures && !f.payload) metrics_.failures->inc();
  auto it = orders_.find(f.order);
  if (it == orders_.end()) return;  // answered already (expired)
  order_state& st = it->second;
  if (f.index < st.payloads.size()) st.payloads[f.index] = std::move(f.payload);
  if (st.pending > 0 && --st.pending == 0) answer(f.order);
}

void fetch_actor::handle(expired e) {
  if (orders_.contains(e.order)) answer(e.order);
}

void fetch_actor::answer(std::uint64_t order) {
  auto it = orders_.find(order);
  if (it == orders_.end()) return;
  order_state& st = it->second;
  st.timer->cancel();
  if (st.fetching && metrics_.seconds)
    metrics_.seconds->observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - st.arrived).count());
  st.asked.reply_to.tell(sched::ssd_loaded{order, std::move(st.payloads)});
  orders_.erase(it);
}

void fetch_actor::on_stop() {
  for (auto& [order, st] : orders_) st.timer->cancel();
  orders_.clear();
}

}  // namespace strata::kv_fetch
