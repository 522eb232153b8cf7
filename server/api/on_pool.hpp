#pragma once
// on_pool: runs a function on a thread pool and resumes the awaiting coroutine on its own executor
// with the result, for the request work too slow for a connection's thread.

#include <exception>
#include <type_traits>
#include <utility>

#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace strata::api {

/// Runs `f` on `pool`; awaiting the result resumes the coroutine on its own executor with f's
/// result (or its exception). Give it a named function object, not a lambda written inside the
/// co_await expression: GCC 12 destroys such a temporary twice.
template <class F, class R = std::invoke_result_t<F&>>
boost::asio::awaitable<R> on_pool(boost::asio::thread_pool& pool, F f) {
  auto initiate = [&pool](auto handler, F work) {
    boost::asio::post(pool, [handler = std::move(handler), work = std::move(work)]() mutable {
      std::exception_ptr failure;
      R result{};
      try {
        result = work();
      } catch (...) {
        failure = std::current_exception();
      }
      auto home = boost::asio::get_associated_executor(handler);
      boost::asio::dispatch(home, [handler = std::move(handler), failure, result = std::move(result)]() mutable {
        std::move(handler)(failure, std::move(result));
      });
    });
  };
  return boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&, void(std::exception_ptr, R)>(std::move(initiate), boost::asio::use_awaitable,
                                                                                        std::move(f));
}

}  // namespace strata::api
