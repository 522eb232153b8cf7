#pragma once
// response_store: the responses kept for GET /v1/responses/{id} and previous_response_id (a
// request's `store`, true by default as OpenAI's). Bounded in count and in bytes; past either bound
// the oldest go first. Each entry holds the response object (JSON text) and the conversation it
// ended (the chat messages without instructions, its output included as the assistant's turn), so
// that a follow-up renders the same prompt prefix and reuses its cached KV.
//
// The HTTP handlers (on any network thread) and the sinks (on the stream hub's strand) reach it; a
// mutex guards it, held only to copy an entry in or out.

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <boost/json/array.hpp>

namespace strata::api {

class response_store {
 public:
  struct entry {
    std::string response_json;
    boost::json::array conversation;
  };

  response_store(std::size_t max_count, std::size_t max_bytes) : max_count_(max_count), max_bytes_(max_bytes) {}

  void put(const std::string& id, entry e);
  std::optional<entry> get(const std::string& id) const;
  /// True when it was there.
  bool erase(const std::string& id);
  std::size_t size() const;
  std::size_t bytes() const;

 private:
  struct slot {
    entry e;
    std::size_t bytes = 0;
    std::list<std::string>::iterator age;
  };
  void drop(std::unordered_map<std::string, slot>::iterator it);

  const std::size_t max_count_, max_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, slot> entries_;
  std::list<std::string> oldest_first_;
  std::size_t bytes_ = 0;
};

}  // namespace strata::api
