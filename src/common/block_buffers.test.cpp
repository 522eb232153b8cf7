#include "src/common/block_buffers.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "src/common/buffer_warmer.hpp"

namespace strata {
namespace {

TEST(block_buffers, a_buffer_given_back_is_taken_again_at_the_size_asked) {
  block_buffers pool(1 << 20);
  std::vector<std::byte> a = pool.take(1000);
  ASSERT_EQ(a.size(), 1000u);
  a[999] = std::byte{7};
  const std::byte* at = a.data();
  pool.give(std::move(a));
  EXPECT_EQ(pool.free_count(), 1u);
  EXPECT_GE(pool.free_bytes(), 1000u);
  std::vector<std::byte> b = pool.take(600);  // fits in the free one
  EXPECT_EQ(b.data(), at);
  EXPECT_EQ(b.size(), 600u);
  EXPECT_EQ(pool.free_count(), 0u);
  std::vector<std::byte> c = pool.take(2000);  // nothing free: a new one
  EXPECT_EQ(c.size(), 2000u);
  EXPECT_NE(c.data(), at);
}

TEST(block_buffers, copy_fills_a_free_buffer_or_a_new_one) {
  block_buffers pool(1 << 20);
  std::vector<std::byte> src(3000);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 7);
  std::vector<std::byte> a = pool.copy(src.data(), src.size());  // nothing free: new
  EXPECT_EQ(a, src);
  const std::byte* at = a.data();
  pool.give(std::move(a));
  std::vector<std::byte> b = pool.copy(src.data() + 1000, 2000);  // the free one, shorter
  EXPECT_EQ(b.data(), at);
  EXPECT_EQ(b, std::vector<std::byte>(src.begin() + 1000, src.end()));
}

TEST(block_buffers, picks_the_smallest_free_buffer_with_room) {
  block_buffers pool(1 << 20);
  std::vector<std::byte> big = pool.take(5000), small = pool.take(1000);
  const std::byte* small_at = small.data();
  pool.give(std::move(big));
  pool.give(std::move(small));
  EXPECT_EQ(pool.take(900).data(), small_at);
  EXPECT_EQ(pool.take(900).size(), 900u);  // then the big one
  EXPECT_EQ(pool.free_count(), 0u);
}

TEST(block_buffers, keeps_no_more_than_its_limit_and_prefills_up_to_it) {
  block_buffers pool(10000);
  EXPECT_EQ(pool.prefill(3000, 10), 3u);
  EXPECT_EQ(pool.free_count(), 3u);
  EXPECT_LE(pool.free_bytes(), 10000u);
  pool.give(std::vector<std::byte>(4000));  // over the limit: freed, not kept
  EXPECT_EQ(pool.free_count(), 3u);
  pool.give(std::vector<std::byte>());  // nothing to keep
  EXPECT_EQ(pool.free_count(), 3u);
}

TEST(block_buffers, threads_take_and_give_concurrently) {
  block_buffers pool(1 << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 2000; ++i) {
        std::vector<std::byte> v = pool.take(256 + static_cast<std::size_t>(t));
        v.back() = std::byte{static_cast<unsigned char>(t)};
        pool.give(std::move(v));
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_LE(pool.free_count(), 4u);
  EXPECT_LE(pool.free_bytes(), std::size_t{1} << 20);
}

TEST(block_buffers, top_up_stops_at_the_target_the_limit_and_the_step) {
  block_buffers pool(10000);
  EXPECT_EQ(pool.top_up(1000, 3500, 1 << 20), 4000u);  // until the free ones hold 3500: four
  EXPECT_EQ(pool.free_count(), 4u);
  EXPECT_EQ(pool.top_up(1000, 3500, 1 << 20), 0u);  // already there
  EXPECT_EQ(pool.top_up(1000, 1 << 20, 2500), 2000u);  // two more at most in this call
  EXPECT_EQ(pool.top_up(1000, 1 << 20, 1 << 20), 4000u);  // the limit: 10 buffers of 1000
  EXPECT_EQ(pool.free_bytes(), 10000u);
  std::vector<std::byte> v = pool.take(1000);  // a made one, at the size asked
  EXPECT_EQ(v.size(), 1000u);
  EXPECT_EQ(pool.free_count(), 9u);
}

TEST(block_buffers, a_lower_limit_frees_what_is_past_it) {
  block_buffers pool(10000);
  pool.top_up(1000, 10000, 1 << 20);
  pool.set_max_free(3000);
  EXPECT_EQ(pool.free_bytes(), 3000u);
  pool.give(std::vector<std::byte>(1000));  // past the limit: freed
  EXPECT_EQ(pool.free_count(), 3u);
  pool.set_max_free(5000);
  pool.give(std::vector<std::byte>(1000));
  EXPECT_EQ(pool.free_count(), 4u);
}

/// Waits (5 s at most) until the pool's free bytes reach `at_least`; returns them.
std::size_t wait_for_free(const block_buffers& pool, std::size_t at_least) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (pool.free_bytes() < at_least && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return pool.free_bytes();
}

TEST(buffer_warmer, keeps_the_pool_stocked_up_to_its_target) {
  block_buffers pool(std::size_t{8} << 20);
  constexpr std::size_t n = std::size_t{256} << 10, target = std::size_t{2} << 20;  // 8 buffers
  buffer_warmer warmer(pool, n, target);
  EXPECT_EQ(wait_for_free(pool, target), target);
  std::vector<std::vector<std::byte>> taken;
  for (int i = 0; i < 6; ++i) taken.push_back(pool.take(n));  // found warm, and made again behind them
  EXPECT_EQ(wait_for_free(pool, target), target);
  // made() counts a call's buffers once it returns, a moment after the last one is given.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (warmer.made() < target + 6 * n && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(warmer.made(), target + 6 * n);
  for (auto& v : taken) pool.give(std::move(v));  // back within the limit: kept, nothing made
  EXPECT_EQ(pool.free_bytes(), target + 6 * n);
  EXPECT_EQ(warmer.made(), target + 6 * n);
}

}  // namespace
}  // namespace strata
