#pragma once
// Compile-time rules for actor messages: owned values only, nothrow-movable.

#include <array>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <boost/pfr/core.hpp>

namespace strata::actors {

namespace detail {

template <class T>
struct borrows;

/// True when an aggregate's fields (seen through Boost.PFR) include a borrowed type.
template <class T, std::size_t... I>
constexpr bool any_field_borrows(std::index_sequence<I...>) {
  return (borrows<std::remove_cv_t<boost::pfr::tuple_element_t<I, T>>>::value || ...);
}

template <class T>
constexpr bool aggregate_borrows() {
  if constexpr (std::is_aggregate_v<T> && !std::is_array_v<T> && std::is_class_v<T>) {
    return any_field_borrows<T>(std::make_index_sequence<boost::pfr::tuple_size_v<T>>{});
  } else {
    return false;
  }
}

/// borrows<T>::value: T refers to memory it does not own, so it may not travel in a message.
/// Looks through aggregates and standard containers; opaque classes are trusted.
template <class T>
struct borrows : std::bool_constant<std::is_pointer_v<T> || std::is_reference_v<T> ||
                                    std::is_member_pointer_v<T> || aggregate_borrows<T>()> {};

template <class C, class Tr>
struct borrows<std::basic_string_view<C, Tr>> : std::true_type {};
template <class T, std::size_t N>
struct borrows<std::span<T, N>> : std::true_type {};
template <class T>
struct borrows<std::reference_wrapper<T>> : std::true_type {};
// Shared ownership is allowed only of data nobody can change (weights, tokenizer).
template <class T>
struct borrows<std::shared_ptr<T>> : std::bool_constant<!std::is_const_v<T>> {};
template <class T>
struct borrows<std::weak_ptr<T>> : std::bool_constant<!std::is_const_v<T>> {};
template <class T, class D>
struct borrows<std::unique_ptr<T, D>> : borrows<std::remove_cv_t<T>> {};
template <class T, class A>
struct borrows<std::vector<T, A>> : borrows<T> {};
template <class T, class A>
struct borrows<std::deque<T, A>> : borrows<T> {};
template <class T, std::size_t N>
struct borrows<std::array<T, N>> : borrows<T> {};
template <class T, std::size_t N>
struct borrows<T[N]> : borrows<T> {};
template <class T>
struct borrows<std::optional<T>> : borrows<T> {};
template <class A, class B>
struct borrows<std::pair<A, B>> : std::bool_constant<borrows<A>::value || borrows<B>::value> {};
template <class... Ts>
struct borrows<std::tuple<Ts...>> : std::bool_constant<(borrows<Ts>::value || ...)> {};
template <class... Ts>
struct borrows<std::variant<Ts...>> : std::bool_constant<(borrows<Ts>::value || ...)> {};
template <class K, class V, class C, class A>
struct borrows<std::map<K, V, C, A>> : std::bool_constant<borrows<K>::value || borrows<V>::value> {};
template <class K, class V, class H, class E, class A>
struct borrows<std::unordered_map<K, V, H, E, A>>
    : std::bool_constant<borrows<K>::value || borrows<V>::value> {};

template <class T, class Variant>
struct is_alternative;
template <class T, class... Ts>
struct is_alternative<T, std::variant<Ts...>> : std::bool_constant<(std::is_same_v<T, Ts> || ...)> {};

}  // namespace detail

/// A type that may be sent to an actor: an owned value, moved without throwing.
template <class M>
concept message = std::is_object_v<M> && !std::is_const_v<M> &&
                  std::is_nothrow_move_constructible_v<M> && !detail::borrows<M>::value;

/// Checks one message type with readable diagnostics.
template <class M>
constexpr bool check_message() {
  static_assert(std::is_nothrow_move_constructible_v<M>, "an actor message must be nothrow-movable");
  static_assert(!detail::borrows<M>::value,
                "an actor message may not hold references, pointers, spans, string_views or "
                "shared_ptr to mutable data: move owned buffers instead");
  return true;
}

template <class Inbox>
struct inbox_traits {
  static constexpr bool valid = false;
};
template <class... Ms>
struct inbox_traits<std::variant<Ms...>> {
  static constexpr bool valid = (check_message<Ms>() && ...);
};

/// An inbox: a std::variant whose alternatives are all messages.
template <class Inbox>
concept inbox = inbox_traits<Inbox>::valid;

/// M is one of the messages that Inbox accepts.
template <class M, class Inbox>
concept accepted_by = detail::is_alternative<std::remove_cvref_t<M>, Inbox>::value;

}  // namespace strata::actors
