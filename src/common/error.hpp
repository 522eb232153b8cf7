#pragma once
// strata's error codes and the result<T> type that fallible calls return.

#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace strata {

/// What went wrong, independent of where. Each value has a default HTTP mapping in api/.
enum class errc {
  ok = 0,
  /// A caller passed a value outside what the operation accepts.
  invalid_argument,
  /// A file, key or object that was named does not exist.
  not_found,
  /// Input bytes do not follow their format (GGUF, TOML, JSON, a cache record).
  corrupt_data,
  /// The input uses a feature or type this build does not implement.
  unsupported,
  /// An operating system call failed; the message carries errno's text.
  io_error,
  /// A configured limit was exceeded (body size, queue length, context length).
  limit_exceeded,
  /// The object is in a state where the call cannot run (stopped, loading).
  bad_state,
  /// A chat template raised an error or could not be parsed.
  template_error,
};

/// The std::error_category of errc, so that errc converts to std::error_code.
const std::error_category& strata_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), strata_category()}; }

/// An error: a code for programs and a message for people (it names what is wrong).
struct error {
  errc code = errc::ok;
  std::string message;
};

/// Either a T or an error. A small stand-in for C++23 std::expected.
template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  result(error e) : v_(std::in_place_index<1>, std::move(e)) {}      // NOLINT: implicit by design

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const error& err() const& { return std::get<1>(v_); }
  error&& err() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, error> v_;
};

/// result<void>: success or an error.
template <>
class [[nodiscard]] result<void> {
 public:
  result() = default;
  result(error e) : err_(std::move(e)), failed_(true) {}  // NOLINT: implicit by design
  bool has_value() const noexcept { return !failed_; }
  explicit operator bool() const noexcept { return !failed_; }
  const error& err() const& { return err_; }
  error&& err() && { return std::move(err_); }

 private:
  error err_;
  bool failed_ = false;
};

/// Shorthand for returning an error: `return fail(errc::corrupt_data, "tensor ", name, " ...")`.
template <class... Parts>
error fail(errc code, Parts&&... parts) {
  std::string msg;
  if constexpr (sizeof...(Parts) > 0) {
    auto append = [&msg](auto&& p) {
      using P = std::decay_t<decltype(p)>;
      if constexpr (std::is_arithmetic_v<P> && !std::is_same_v<P, char> && !std::is_same_v<P, bool>) {
        msg += std::to_string(p);
      } else {
        msg += p;
      }
    };
    (append(std::forward<Parts>(parts)), ...);
  }
  return error{code, std::move(msg)};
}

}  // namespace strata

template <>
struct std::is_error_code_enum<strata::errc> : std::true_type {};
