#include "actors/ssd/ssd_store.hpp"

#include <unistd.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "io/ssd/wire_record.hpp"

namespace strata::ssd {

std::string_view to_string(tier_state s) {
  switch (s) {
    case tier_state::on:
      return "on";
    case tier_state::degraded:
      return "degraded";
    case tier_state::off:
      break;
  }
  return "off";
}

tier_state tier_state_of(double gauge_value) {
  if (gauge_value == static_cast<double>(tier_state::on)) return tier_state::on;
  if (gauge_value == static_cast<double>(tier_state::degraded)) return tier_state::degraded;
  return tier_state::off;
}

metrics::gauge& make_state_gauge(metrics::registry& r) {
  return r.make_gauge("strata_ssd_state",
                      "The SSD tier's state: 0 off, 1 on, 2 degraded (a write failed, the disk is full: writes wait for room).");
}

store_metrics store_metrics::create(metrics::registry& r) {
  store_metrics m;
  m.state = &make_state_gauge(r);
  m.records = &r.make_gauge("strata_ssd_records", "KV blocks stored in the SSD tier's index.");
  m.bytes = &r.make_gauge("strata_ssd_bytes", "Bytes of the SSD tier's segment files.");
  m.degraded = &r.make_gauge("strata_ssd_degraded", "1 while the SSD tier refuses writes (disk full or failing).");
  m.writes = &r.make_counter("strata_ssd_writes_total", "KV blocks written to the SSD tier.");
  m.write_bytes = &r.make_counter("strata_ssd_write_bytes_total", "Bytes written to the SSD tier.");
  m.reads = &r.make_counter("strata_ssd_reads_total", "KV blocks restored from the SSD tier.");
  m.read_bytes = &r.make_counter("strata_ssd_read_bytes_total", "Bytes restored from the SSD tier.");
  m.read_failures = &r.make_counter("strata_ssd_read_failures_total",
                                    "SSD reads that failed their checks or the device (the block is computed instead).");
  m.dropped_writes = &r.make_counter("strata_ssd_dropped_writes_total", "KV blocks not written (disk full, write error, queue full).");
  m.evicted_segments = &r.make_counter("strata_ssd_evicted_segments_total", "Segment files deleted to stay within cache.ssd_max.");
  m.blocks_lost = &r.make_counter("strata_ssd_blocks_lost_total",
                                  "KV blocks refused while the SSD tier was degraded that left RAM before it wrote again.");
  return m;
}

ssd_store::ssd_store(std::unique_ptr<segment_store> store, sched::scheduler_address scheduler, store_metrics metrics)
    : store_(std::move(store)), scheduler_(std::move(scheduler)), metrics_(metrics), published_(store_->stats()) {
  publish();
}

void ssd_store::arm() {
  if (!event_) {
    // The descriptor belongs to the segment_store; this only watches it.
    event_.emplace(executor(), ::dup(store_->event_fd()));
  }
  if (waiting_) return;
  waiting_ = true;
  event_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                     [self = self()](const boost::system::error_code& ec) {
                       if (!ec) self.tell(ring_ready{});
                     });
}

void ssd_store::handle(ring_ready) {
  if (event_ && waiting_) {
    // A wake-up from the eventfd: clear its counter before reaping, so a completion that lands
    // after the poll wakes us again.
    waiting_ = false;
    std::uint64_t n = 0;
    [[maybe_unused]] auto got = ::read(store_->event_fd(), &n, sizeof n);
  }
  deliver(store_->poll());
  arm();
}

void ssd_store::watch_space() {
  if (space_check_due_) return;
  if (!space_timer_) space_timer_.emplace(executor());
  space_check_due_ = true;
  space_timer_->expires_after(space_check_interval);
  space_timer_->async_wait([self = self()](const boost::system::error_code& ec) {
    if (!ec) self.tell(space_check{});
  });
}

void ssd_store::handle(space_check) {
  space_check_due_ = false;
  deliver(store_->poll());  // poll() resumes writing when the file system has room
}

void ssd_store::handle(persist p) {
  const bool queued = store_->write(p.meta, std::move(p.payload));
  const bool degraded = store_->degraded();
  completions c = store_->poll();
  std::vector<kv::block_hash> refused;
  const kv::block_hash key = record_key(p.meta);
  if (!queued && !store_->contains(key)) {
    if (degraded) {
      c.deferred.push_back(std::move(p.meta));  // offered again once the tier writes again
    } else {
      refused.push_back(key);  // already queued, or the queue is full
    }
  }
  deliver(std::move(c), std::move(refused));
}

void ssd_store::handle(clear) {
  store_->clear();
  deliver(store_->poll());
}

void ssd_store::handle(load l) {
  order_state st;
  st.arrived = std::chrono::steady_clock::now();
  st.payloads.resize(l.hashes.size());
  for (std::size_t i = 0; i < l.hashes.size(); ++i) {
    const std::uint64_t tag = (l.order << index_bits) | i;
    if (store_->read(l.hashes[i], tag)) ++st.pending;
  }
  orders_.emplace(l.order, std::move(st));
  reply_if_done(l.order);
  deliver(store_->poll());
}

void ssd_store::handle(export_record e) {
  const std::uint64_t tag = export_tag_bit | next_export_++;
  auto meta = store_->meta(e.key);
  if (!meta || !store_->read(e.key, tag)) {
    e.done(std::nullopt);
    return;
  }
  exports_.emplace(tag, export_state{std::move(*meta), std::move(e.done)});
  deliver(store_->poll());
}

void ssd_store::reply_if_done(std::uint64_t order) {
  auto it = orders_.find(order);
  if (it == orders_.end() || it->second.pending > 0) return;
  const auto& payloads = it->second.payloads;
  spdlog::debug("SSD tier: restore order {}: {} of {} blocks read in {:.1f} ms", order,
                std::count_if(payloads.begin(), payloads.end(), [](const auto& p) { return p.has_value(); }), payloads.size(),
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - it->second.arrived).count());
  scheduler_.tell(sched::ssd_loaded{order, std::move(it->second.payloads)});
  orders_.erase(it);
}

void ssd_store::deliver(completions c, std::vector<kv::block_hash> not_written) {
  for (auto& r : c.reads) {
    if (r.tag & export_tag_bit) {
      auto e = exports_.find(r.tag);
      if (e == exports_.end()) continue;
      std::optional<std::vector<std::byte>> wire;
      if (r.payload) wire = encode_wire_record(e->second.meta, store_->model(), *r.payload);
      e->second.done(std::move(wire));
      exports_.erase(e);
      continue;
    }
    const std::uint64_t order = r.tag >> index_bits;
    const std::size_t index = r.tag & ((1u << index_bits) - 1);
    auto it = orders_.find(order);
    if (it == orders_.end() || index >= it->second.payloads.size()) continue;
    it->second.payloads[index] = std::move(r.payload);
    --it->second.pending;
    reply_if_done(order);
  }
  const bool degraded = store_->degraded();
  if (!c.written.empty() || !not_written.empty() || !c.removed.empty() || !c.deferred.empty() || degraded != told_degraded_) {
    told_degraded_ = degraded;
    scheduler_.tell(sched::ssd_update{std::move(c.written), std::move(not_written), std::move(c.removed),
                                      std::move(c.deferred), degraded});
  }
  if (degraded) watch_space();
  publish();
}

void ssd_store::publish() {
  const store_stats s = store_->stats();
  auto add = [](metrics::counter* m, std::uint64_t now, std::uint64_t before) {
    if (m && now > before) m->inc(now - before);
  };
  if (metrics_.records) metrics_.records->set(static_cast<double>(s.records));
  if (metrics_.bytes) metrics_.bytes->set(static_cast<double>(s.bytes));
  if (metrics_.degraded) metrics_.degraded->set(s.degraded ? 1.0 : 0.0);
  if (metrics_.state) metrics_.state->set(static_cast<double>(s.degraded ? tier_state::degraded : tier_state::on));
  add(metrics_.writes, s.writes, published_.writes);
  add(metrics_.write_bytes, s.write_bytes, published_.write_bytes);
  add(metrics_.reads, s.reads, published_.reads);
  add(metrics_.read_bytes, s.read_bytes, published_.read_bytes);
  add(metrics_.read_failures, s.read_failures, published_.read_failures);
  add(metrics_.dropped_writes, s.dropped_writes, published_.dropped_writes);
  add(metrics_.evicted_segments, s.evicted_segments, published_.evicted_segments);
  published_ = s;
}

void ssd_store::on_stop() {
  if (event_) {
    boost::system::error_code ec;
    event_->cancel(ec);
    event_->close(ec);
  }
  if (space_timer_) space_timer_->cancel();
  for (auto& [tag, e] : exports_) e.done(std::nullopt);
  exports_.clear();
  const auto deadline = std::chrono::steady_clock::now() + flush_timeout;
  const std::size_t left = store_->flush(deadline);
  store_->poll();
  publish();
  if (left > 0) {
    spdlog::warn("SSD tier: {} writes still unfinished after {} s; they are dropped", left, flush_timeout.count());
  } else {
    spdlog::info("SSD tier: queued writes flushed");
  }
}

}  // namespace strata::ssd
