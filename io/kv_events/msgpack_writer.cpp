#include "io/kv_events/msgpack_writer.hpp"

#include <bit>
#include <cstring>

namespace strata::kv_events {

void msgpack_writer::typed(std::uint8_t type, std::uint64_t v, int n) {
  out_.push_back(static_cast<char>(type));
  for (int i = n - 1; i >= 0; --i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void msgpack_writer::array(std::size_t n) {
  if (n < 16) out_.push_back(static_cast<char>(0x90 | n));
  else if (n <= 0xffff) typed(0xdc, n, 2);
  else typed(0xdd, n, 4);
}

void msgpack_writer::nil() { out_.push_back(static_cast<char>(0xc0)); }

void msgpack_writer::boolean(bool v) { out_.push_back(static_cast<char>(v ? 0xc3 : 0xc2)); }

void msgpack_writer::integer(std::int64_t v) {
  if (v >= 0 && v < 128) {
    out_.push_back(static_cast<char>(v));
  } else if (v < 0 && v >= -32) {
    out_.push_back(static_cast<char>(0xe0 | (v + 32)));
  } else if (v >= 0) {
    const auto u = static_cast<std::uint64_t>(v);
    if (u <= 0xff) typed(0xcc, u, 1);
    else if (u <= 0xffff) typed(0xcd, u, 2);
    else if (u <= 0xffffffffu) typed(0xce, u, 4);
    else typed(0xcf, u, 8);
  } else if (v >= -128) {
    typed(0xd0, static_cast<std::uint64_t>(v), 1);
  } else if (v >= -32768) {
    typed(0xd1, static_cast<std::uint64_t>(v), 2);
  } else if (v >= -2147483648ll) {
    typed(0xd2, static_cast<std::uint64_t>(v), 4);
  } else {
    typed(0xd3, static_cast<std::uint64_t>(v), 8);
  }
}

void msgpack_writer::float64(double v) { typed(0xcb, std::bit_cast<std::uint64_t>(v), 8); }

void msgpack_writer::str(std::string_view s) {
  const std::size_t n = s.size();
  if (n < 32) out_.push_back(static_cast<char>(0xa0 | n));
  else if (n <= 0xff) typed(0xd9, n, 1);
  else if (n <= 0xffff) typed(0xda, n, 2);
  else typed(0xdb, n, 4);
  out_.append(s);
}

void msgpack_writer::bin(std::span<const std::byte> b) {
  const std::size_t n = b.size();
  if (n <= 0xff) typed(0xc4, n, 1);
  else if (n <= 0xffff) typed(0xc5, n, 2);
  else typed(0xc6, n, 4);
  out_.append(reinterpret_cast<const char*>(b.data()), n);
}

}  // namespace strata::kv_events
