#include "actors/stream/stream_hub.hpp"

namespace strata::stream {

void stream_hub::handle(open_stream o) {
  std::shared_ptr<stream_sink> sink = std::move(o.sink);
  for (std::size_t i = 0; i < o.requests.size(); ++i) {
    routes_[o.requests[i]] = route{sink, static_cast<std::int32_t>(i)};
  }
}

stream_hub::route* stream_hub::find(std::uint64_t id) {
  auto it = routes_.find(id);
  return it == routes_.end() ? nullptr : &it->second;
}

void stream_hub::handle(sched::request_admitted a) {
  if (route* r = find(a.request)) {
    a.index = r->index;
    r->sink->on_admitted(a);
  }
}

void stream_hub::handle(sched::token_event e) {
  if (route* r = find(e.request)) {
    e.index = r->index;
    r->sink->on_token(e);
  }
}

void stream_hub::handle(sched::request_done d) {
  if (route* r = find(d.request)) {
    d.index = r->index;
    auto sink = r->sink;
    routes_.erase(d.request);
    sink->on_done(d);
  }
}

void stream_hub::handle(sched::request_rejected rj) {
  if (route* r = find(rj.request)) {
    auto sink = r->sink;
    routes_.erase(rj.request);
    sink->on_rejected(rj);
  }
}

}  // namespace strata::stream
