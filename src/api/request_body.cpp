#include "src/api/request_body.hpp"

#include <optional>

namespace strata::api::schema {

api_status read_request_body(std::string_view body, const parse_limits& limits, std::string& model,
                             sampling_reader& sampling, const own_member_fn& own) {
  return for_each_root_member(body, [&](std::string_view key, od::value& v) -> api_status {
    if (key == "model") {
      std::optional<std::string> m;
      if (auto e = read_string(v, key, m)) return e;
      model = m.value_or("");
      return std::nullopt;
    }
    bool handled = false;
    if (auto e = own(key, v, handled)) return e;
    if (handled) return std::nullopt;
    if (auto e = sampling.read(key, v, handled)) return e;
    return handled ? std::nullopt : skip_value(v, 2);
  }, limits);
}

}  // namespace strata::api::schema
