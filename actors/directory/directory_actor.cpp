#include "actors/directory/directory_actor.hpp"

#include <charconv>

#include <spdlog/spdlog.h>

#include "src/kv/directory_key.hpp"

namespace strata::directory {

namespace {

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// A tier's bit in held::tiers.
std::uint8_t tier_bit(kv::kv_tier t) { return static_cast<std::uint8_t>(1u << static_cast<unsigned>(t)); }

/// Gathers the answers of one lookup's commands and replies once the last is in.
struct lookup_state {
  lookup_result result;
  std::size_t left = 0;
  actors::port<lookup_result> reply_to;
};

}  // namespace

directory_metrics directory_metrics::create(metrics::registry& r) {
  directory_metrics m;
  m.writes = &r.make_counter("strata_directory_writes_total", "Entries written to the cluster directory (new and refreshed).");
  m.write_errors = &r.make_counter("strata_directory_write_errors_total", "Directory writes that failed (Redis unreachable or refusing).");
  m.lookups = &r.make_counter("strata_directory_lookups_total", "Chains looked up in the cluster directory.");
  return m;
}

std::vector<std::string> live_holders(const redis::reply& r, std::int64_t now_unix) {
  std::vector<std::string> out;
  if (r.type != redis::reply::kind::array) return out;
  for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    const std::string& v = r.elements[i + 1].str;
    std::int64_t until = 0;
    if (std::from_chars(v.data(), v.data() + v.size(), until).ec == std::errc{} && until > now_unix) out.push_back(r.elements[i].str);
  }
  return out;
}

directory_actor::directory_actor(directory_options opts, directory_metrics m)
    : opts_(std::move(opts)), metrics_(m), prefix_(kv::directory_prefix(opts_.model)) {}

std::string directory_actor::key(const kv::block_hash& h, kv::kv_format f) const {
  return kv::directory_key(prefix_, f, opts_.block_tokens, h);
}

std::int64_t directory_actor::expiry() const { return unix_now() + opts_.ttl.count(); }

void directory_actor::write(const kv::block_hash& h, kv::kv_format f) {
  if (!client_) return;
  const std::string k = key(h, f);
  const auto m = metrics_;
  auto counted = [m](result<redis::reply> r) {
    if (m.write_errors && (!r || r->is_error())) m.write_errors->inc();
  };
  client_->command({"HSET", k, url_, std::to_string(expiry())}, counted);
  client_->command({"EXPIRE", k, std::to_string(opts_.ttl.count())}, counted);
  if (metrics_.writes) metrics_.writes->inc();
}

void directory_actor::remove(const kv::block_hash& h, kv::kv_format f) {
  if (client_) client_->command({"HDEL", key(h, f), url_}, [](result<redis::reply>) {});
}

bool directory_actor::small(kv::kv_format f) const {
  const auto bytes = opts_.block_bytes[static_cast<std::size_t>(kv::format_index(f))];
  return opts_.value_max > 0 && bytes > 0 && static_cast<std::uint64_t>(bytes) + 4096 <= opts_.value_max;
}

void directory_actor::handle(value_ready v) {
  auto it = held_.find(v.hash);
  if (!client_ || !v.record || it == held_.end() || it->second.value) return;
  it->second.value = true;
  std::string bytes(reinterpret_cast<const char*>(v.record->data()), v.record->size());
  const auto m = metrics_;
  client_->command({"SET", kv::value_key(key(v.hash, it->second.format)), std::move(bytes), "EX", std::to_string(opts_.ttl.count())},
                   [m](result<redis::reply> r) {
                     if (m.write_errors && (!r || r->is_error())) m.write_errors->inc();
                   });
}

void directory_actor::handle(kv_events::block_batch b) {
  using kind = kv::block_event::kind;
  for (const auto& e : b.events) {
    if (e.what == kind::cleared) {
      for (const auto& [h, x] : held_) remove(h, x.format);
      held_.clear();
      continue;
    }
    if (e.what == kind::stored) {
      auto [it, fresh] = held_.try_emplace(e.hash, held{e.format});
      it->second.tiers |= tier_bit(e.tier);
      if (fresh) write(e.hash, e.format);
      // Copied out by value from RAM or the host tier; the SSD tier's records are not read for it.
      if (fresh && e.tier != kv::kv_tier::ssd && small(e.format) && !exporter_.empty()) {
        exporter_.tell(sched::export_block{e.hash, false, [self = self(), h = e.hash](std::optional<std::vector<std::byte>> r) {
                                             self.tell(value_ready{h, std::move(r)});
                                           }});
      }
      continue;
    }
    auto it = held_.find(e.hash);
    if (it == held_.end()) continue;
    it->second.tiers &= static_cast<std::uint8_t>(~tier_bit(e.tier));
    if (it->second.tiers == 0) {
      remove(e.hash, it->second.format);
      if (it->second.value && client_) client_->command({"DEL", kv::value_key(key(e.hash, it->second.format))}, [](result<redis::reply>) {});
      held_.erase(it);
    }
  }
}

void directory_actor::handle(start s) {
  url_ = std::move(s.url);
  exporter_ = std::move(s.exporter);
  client_ = redis::cluster_client::create(executor(), opts_.redis);
  spdlog::info("cluster directory: listing this replica's blocks as {} (TTL {} s)", url_, opts_.ttl.count());
  handle(refresh_tick{});
}

void directory_actor::handle(refresh_tick) {
  for (const auto& [h, x] : held_) {
    write(h, x.format);
    if (x.value && client_) client_->command({"EXPIRE", kv::value_key(key(h, x.format)), std::to_string(opts_.ttl.count())}, [](result<redis::reply>) {});
  }
  arm_timer();
}

void directory_actor::arm_timer() {
  if (!timer_) timer_.emplace(executor());
  timer_->expires_after(std::max<std::chrono::milliseconds>(opts_.ttl / 3, std::chrono::milliseconds(200)));
  timer_->async_wait([self = self()](const boost::system::error_code& ec) {
    if (!ec) self.tell(refresh_tick{});
  });
}

void directory_actor::handle(lookup l) {
  if (metrics_.lookups) metrics_.lookups->inc();
  auto st = std::make_shared<lookup_state>();
  st->result.id = l.id;
  st->result.holders.resize(l.chain.size());
  const bool values = small(l.format);
  if (values) st->result.values.resize(l.chain.size());
  st->reply_to = std::move(l.reply_to);
  st->left = l.chain.size() * (values ? 2 : 1);
  if (!client_ || l.chain.empty()) {
    st->reply_to.tell(std::move(st->result));
    return;
  }
  const std::int64_t now = unix_now();
  for (std::size_t i = 0; i < l.chain.size(); ++i) {
    const std::string k = key(l.chain[i], l.format);
    client_->command({"HGETALL", k}, [st, i, now](result<redis::reply> r) {
      if (r) st->result.holders[i] = live_holders(*r, now);
      if (--st->left == 0) st->reply_to.tell(std::move(st->result));
    });
    if (!values) continue;
    client_->command({"GET", kv::value_key(k)}, [st, i](result<redis::reply> r) {
      if (r && r->type == redis::reply::kind::string) st->result.values[i] = std::move(r->str);
      if (--st->left == 0) st->reply_to.tell(std::move(st->result));
    });
  }
}

void directory_actor::on_stop() {
  if (timer_) timer_->cancel();
  // Entries are left to expire: a replica that stops cleanly is gone as surely as one that died,
  // and its HDELs might not reach Redis before the process ends.
  if (client_) client_->close();
}

}  // namespace strata::directory
