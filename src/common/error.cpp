#include "src/common/error.hpp"

namespace strata {
namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "strata"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::ok: return "ok";
      case errc::invalid_argument: return "invalid argument";
      case errc::not_found: return "not found";
      case errc::corrupt_data: return "corrupt data";
      case errc::unsupported: return "unsupported";
      case errc::io_error: return "i/o error";
      case errc::limit_exceeded: return "limit exceeded";
      case errc::bad_state: return "bad state";
      case errc::template_error: return "template error";
    }
    return "unknown strata error";
  }
};

}  // namespace

const std::error_category& strata_category() noexcept {
  static const category c;
  return c;
}

}  // namespace strata
