#pragma once
// reply: a Redis reply copied out of hiredis's redisReply, so it outlives the callback that got it.

#include <cstdint>
#include <string>
#include <vector>

namespace strata::redis {

struct reply {
  enum class kind : std::uint8_t { nil, integer, string, status, error, array };
  kind type = kind::nil;
  std::int64_t integer = 0;
  /// The bytes of a string, status or error reply.
  std::string str;
  std::vector<reply> elements;

  bool is_error() const { return type == kind::error; }
};

}  // namespace strata::redis
