#pragma once
// The error that request parsing returns: everything an OpenAI-shaped error body needs.

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace strata::api::schema {

/// An OpenAI error: the HTTP status and the fields of `{"error":{"message","type","param","code"}}`.
/// An empty `param` or `code` is written as JSON null.
struct api_error {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;
  std::string code;
};

/// A 400 invalid_request_error about `param` (empty when the body as a whole is at fault).
inline api_error invalid_request(std::string param, std::string message, std::string code = {}) {
  return api_error{400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}

/// The outcome of a step that can fail with an api_error; empty means success.
using api_status = std::optional<api_error>;

/// Either a T or an api_error (the shape of strata::result, with the API's error type).
template <class T>
class [[nodiscard]] api_result {
 public:
  api_result(T value) : v_(std::in_place_index<0>, std::move(value)) {}        // NOLINT: implicit by design
  api_result(api_error e) : v_(std::in_place_index<1>, std::move(e)) {}        // NOLINT: implicit by design

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const api_error& err() const& { return std::get<1>(v_); }
  api_error&& err() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, api_error> v_;
};

}  // namespace strata::api::schema
