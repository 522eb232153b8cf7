#pragma once
// msgpack_writer: the few MessagePack forms the KV-event wire format needs (arrays, nil, integers,
// float64, str, bin), written into a byte string. Enough for vLLM's KV-event batches; not a general
// serializer (Debian's msgpack-cxx pulls in a second Boost, which the build's Boost 1.81 excludes).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace strata::kv_events {

class msgpack_writer {
 public:
  void array(std::size_t n);
  void nil();
  void boolean(bool v);
  void integer(std::int64_t v);
  void float64(double v);
  void str(std::string_view s);
  void bin(std::span<const std::byte> b);

  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  /// A type byte followed by `n` bytes of v, big-endian.
  void typed(std::uint8_t type, std::uint64_t v, int n);
  std::string out_;
};

}  // namespace strata::kv_events
