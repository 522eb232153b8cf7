#include "actors/ssd/ssd_store.hpp"

#include <unistd.h>

#include <algorithm>

#include <spdlog/spdlog.h>

namespace strata::ssd {

store_metrics store_metrics::create(metrics::registry& r) {
  store_metrics m;
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
  return m;
}

ssd_store::ssd_store(std::unique_ptr<segment_store> store, sched::scheduler_address scheduler, store_metrics metrics)
    : store_(std::move(store)), scheduler_(std::move(scheduler)), metrics_(metrics), published_(store_->stats()) {}

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

void ssd_store::handle(persist p) {
  if (!store_->write(p.meta, std::move(p.payload))) {
    // Already stored, already queued, or the tier is degraded: the scheduler may offer it again.
    if (!store_->contains(p.meta.hash)) scheduler_.tell(sched::ssd_update{{}, {p.meta.hash}, {}});
  }
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

void ssd_store::deliver(completions c) {
  for (auto& r : c.reads) {
    const std::uint64_t order = r.tag >> index_bits;
    const std::size_t index = r.tag & ((1u << index_bits) - 1);
    auto it = orders_.find(order);
    if (it == orders_.end() || index >= it->second.payloads.size()) continue;
    it->second.payloads[index] = std::move(r.payload);
    --it->second.pending;
    reply_if_done(order);
  }
  if (!c.written.empty() || !c.not_written.empty() || !c.removed.empty()) {
    scheduler_.tell(sched::ssd_update{std::move(c.written), std::move(c.not_written), std::move(c.removed)});
  }
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
