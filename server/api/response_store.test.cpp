#include "server/api/response_store.hpp"

#include <gtest/gtest.h>

namespace strata::api {
namespace {

TEST(response_store, keeps_at_most_its_count_and_drops_the_oldest_first) {
  response_store s(2, 1 << 20);
  s.put("a", {"{}", {}});
  s.put("b", {"{}", {}});
  s.put("c", {"{}", {}});
  EXPECT_FALSE(s.get("a"));
  EXPECT_TRUE(s.get("b"));
  EXPECT_TRUE(s.get("c"));
  EXPECT_EQ(s.size(), 2u);
}

TEST(response_store, keeps_within_its_bytes_and_refuses_what_can_never_fit) {
  response_store s(100, 64);
  s.put("a", {std::string(30, 'x'), {}});
  s.put("b", {std::string(30, 'y'), {}});  // 30 + 30 + ids and "[]" > 64: a goes
  EXPECT_FALSE(s.get("a"));
  EXPECT_EQ(s.get("b")->response_json, std::string(30, 'y'));
  s.put("huge", {std::string(100, 'z'), {}});
  EXPECT_FALSE(s.get("huge"));
  EXPECT_TRUE(s.get("b")) << "a response that can never fit evicts nothing";
  EXPECT_LE(s.bytes(), 64u);
}

TEST(response_store, erase_and_replace_keep_the_byte_count) {
  response_store s(10, 1 << 20);
  s.put("a", {"12345", {}});
  const auto one = s.bytes();
  s.put("a", {"12345", {}});
  EXPECT_EQ(s.bytes(), one);
  EXPECT_TRUE(s.erase("a"));
  EXPECT_FALSE(s.erase("a"));
  EXPECT_EQ(s.bytes(), 0u);
}

}  // namespace
}  // namespace strata::api
