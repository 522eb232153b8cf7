// segment_store, the disk budget: segments are deleted whole, those left with no record first,
// then the least recently used while the files pass max_bytes.
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "io/ssd/segment_store_impl.hpp"

namespace strata::ssd {

segment_store::impl::segment_map::iterator segment_store::impl::drop_segment(segment_map::iterator it) {
  auto& s = it->second;
  for (auto& h : s.hashes) {
    auto found = index_.find(h);
    if (found != index_.end() && found->second.segment == s.id) {
      index_.erase(found);
      out_.removed.push_back(h);
    }
  }
  ::close(s.fd);
  if (::unlink(s.path.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("ssd: cannot delete {} ({})", s.path.string(), std::strerror(errno));
  }
  total_bytes_ -= s.file_bytes;
  if (current_ == s.id) current_.reset();
  return segments_.erase(it);
}

void segment_store::impl::maintain() {
  auto idle = [this](const segment& s) { return s.in_flight == 0 && current_ != s.id; };
  for (auto it = segments_.begin(); it != segments_.end();) {
    auto& s = it->second;
    if (idle(s) && s.live == 0 && s.foreign == 0) {
      it = drop_segment(it);
      continue;
    }
    if (idle(s)) trim(s);
    ++it;
  }
  while (total_bytes_ > opts_.max_bytes) {
    auto victim = segments_.end();
    for (auto it = segments_.begin(); it != segments_.end(); ++it) {
      if (idle(it->second) && (victim == segments_.end() || it->second.last_used < victim->second.last_used)) {
        victim = it;
      }
    }
    if (victim == segments_.end()) break;
    spdlog::debug("ssd: evicting {} ({} records, {} MiB)", victim->second.path.string(), victim->second.live,
                  victim->second.bytes >> 20);
    ++stats_.evicted_segments;
    drop_segment(victim);
  }
}

std::size_t segment_store::clear() {
  auto& segments = impl_->segments_;
  std::size_t dropped = 0;
  for (auto it = segments.begin(); it != segments.end();) {
    if (it->second.in_flight == 0 && it->second.foreign == 0) {
      dropped += it->second.live;
      it = impl_->drop_segment(it);
    } else {
      ++it;
    }
  }
  spdlog::info("ssd: cleared {} records; {} left", dropped, impl_->index_.size());
  return impl_->index_.size();
}

void segment_store::impl::trim(segment& s) {
  if (s.file_bytes <= s.bytes || ::ftruncate(s.fd, static_cast<off_t>(s.bytes)) != 0) return;
  total_bytes_ -= s.file_bytes - s.bytes;
  s.file_bytes = s.bytes;
}

void segment_store::impl::forget(const location& loc) {
  const kv::block_hash key = record_key(loc.meta);
  auto it = index_.find(key);
  if (it == index_.end() || it->second.segment != loc.segment || it->second.offset != loc.offset) return;
  index_.erase(it);
  --segments_.at(loc.segment).live;
  out_.removed.push_back(key);
}

}  // namespace strata::ssd
