#include "server/api/sinks.hpp"

#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "io/reply_queue.hpp"

namespace strata::api {
namespace {

/// A sink's parts as the connection's strand receives them.
struct connection {
  boost::asio::io_context io;
  std::shared_ptr<io::reply_queue> queue = io::reply_queue::create(io.get_executor());
  std::vector<io::reply_part> parts;

  /// Delivers what was sent and takes every part queued so far.
  std::vector<io::reply_part>& drain() {
    io.restart();
    io.poll();
    while (queue->queued() > 0) {
      bool timed_out = false;
      boost::asio::co_spawn(io, [&]() -> boost::asio::awaitable<void> {
        if (auto p = co_await queue->next(std::chrono::milliseconds(0), timed_out)) parts.push_back(std::move(*p));
      }, boost::asio::detached);
      io.restart();
      io.poll();
    }
    return parts;
  }
};

response_meta chat_meta(std::vector<std::uint64_t> ids) {
  response_meta m;
  m.chat = true;
  m.head = {"chatcmpl-x", 1, "m", {}};
  m.n = static_cast<int>(ids.size());
  m.ids = std::move(ids);
  return m;
}

TEST(chunk_sink, a_stream_refused_before_admission_is_one_whole_response_with_its_status) {
  connection c;
  chunk_sink sink(chat_meta({7}), c.queue->address(), chunk_sink::framing::sse);
  sink.on_rejected({7, 429, "the server is at capacity", "queue_full"});
  auto& parts = c.drain();
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].status, 429) << "the connection answers with this status, before any status line";
  EXPECT_NE(parts[0].data.find("\"code\":\"queue_full\""), std::string::npos) << parts[0].data;
}

TEST(chunk_sink, an_admitted_stream_starts_with_a_stream_part_and_ends_with_done_and_its_usage) {
  connection c;
  chunk_sink sink(chat_meta({7}), c.queue->address(), chunk_sink::framing::sse);
  sink.on_admitted({7, 0});
  sink.on_token({7, 0, "Hi", 3, 0.0f, {}});
  sink.on_done({7, 0, sched::finish_reason::stop, 5, 1, 2, {}});
  auto& parts = c.drain();
  ASSERT_EQ(parts.size(), 4u);  // role, content, finish, [DONE]
  for (const auto& p : parts) EXPECT_EQ(p.status, 0);
  EXPECT_NE(parts[0].data.find("\"role\":\"assistant\""), std::string::npos) << parts[0].data;
  EXPECT_NE(parts[1].data.find("\"content\":\"Hi\""), std::string::npos) << parts[1].data;
  EXPECT_EQ(parts[3].data, "data: [DONE]\n\n");
  EXPECT_EQ(parts[3].ended, 7u);
  EXPECT_EQ(parts[3].usage.prompt_tokens, 5);
  EXPECT_EQ(parts[3].usage.cached_tokens, 2);
  EXPECT_EQ(parts[3].usage.generated_tokens, 1);
}

TEST(chunk_sink, a_refusal_after_admission_is_an_error_event_inside_the_stream) {
  connection c;
  chunk_sink sink(chat_meta({7, 8}), c.queue->address(), chunk_sink::framing::sse);
  sink.on_admitted({7, 0});
  sink.on_rejected({8, 429, "the server is at capacity", "queue_full"});
  auto& parts = c.drain();
  ASSERT_EQ(parts.size(), 4u);  // two role chunks, the error event, [DONE]
  for (const auto& p : parts) EXPECT_EQ(p.status, 0);
  EXPECT_NE(parts[2].data.find("queue_full"), std::string::npos);
  EXPECT_EQ(parts[3].data, "data: [DONE]\n\n");
}

TEST(full_sink, answers_once_with_the_status_and_body) {
  connection c;
  full_sink sink(chat_meta({9}), c.queue->address());
  sink.on_admitted({9, 0});
  sink.on_token({9, 0, "ok", 4, 0.0f, {}});
  sink.on_done({9, 0, sched::finish_reason::length, 3, 1, 0, {}});
  auto& parts = c.drain();
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].status, 200);
  EXPECT_NE(parts[0].data.find("\"finish_reason\":\"length\""), std::string::npos) << parts[0].data;
  EXPECT_EQ(parts[0].usage.generated_tokens, 1);
}

/// A chat request whose output is read in the Hermes format, with tools.
response_meta tool_meta(std::vector<std::uint64_t> ids) {
  response_meta m = chat_meta(std::move(ids));
  chat::parser_options o;
  o.format = chat::detect_tool_format("<tool_call>");
  o.parse_calls = true;
  m.output = o;
  return m;
}

TEST(chunk_sink, streams_a_call_split_over_tokens_as_openai_does_and_finishes_with_tool_calls) {
  connection c;
  chunk_sink sink(tool_meta({7}), c.queue->address(), chunk_sink::framing::sse);
  sink.on_admitted({7, 0});
  for (const char* piece : {"<tool", "_call>\n{\"name\": \"f\", ", "\"arguments\": {\"a\": 1}}\n</tool_", "call>"})
    sink.on_token({7, 0, piece, 3, 0.0f, {}});
  sink.on_done({7, 0, sched::finish_reason::stop, 5, 4, 0, {}});
  auto& parts = c.drain();
  ASSERT_EQ(parts.size(), 5u);  // role, call start, call arguments, finish, [DONE]
  EXPECT_NE(parts[1].data.find(R"("delta":{"tool_calls":[{"index":0,"id":"call_)"), std::string::npos) << parts[1].data;
  EXPECT_NE(parts[1].data.find(R"("type":"function","function":{"name":"f","arguments":""}}]})"), std::string::npos) << parts[1].data;
  EXPECT_NE(parts[2].data.find(R"("delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]})"), std::string::npos)
      << parts[2].data;
  EXPECT_NE(parts[3].data.find(R"("finish_reason":"tool_calls")"), std::string::npos) << parts[3].data;
  for (const auto& p : parts) EXPECT_EQ(p.data.find("<tool"), std::string::npos) << "markup leaked: " << p.data;
}

TEST(full_sink, answers_calls_with_null_content_and_tool_calls_as_the_finish_reason) {
  connection c;
  full_sink sink(tool_meta({9}), c.queue->address());
  sink.on_admitted({9, 0});
  sink.on_token({9, 0, "<tool_call>{\"name\": \"f\", \"arguments\": {}}", 4, 0.0f, {}});
  sink.on_token({9, 0, "</tool_call>", 5, 0.0f, {}});
  sink.on_done({9, 0, sched::finish_reason::stop, 3, 2, 0, {}});
  auto& parts = c.drain();
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_NE(parts[0].data.find(R"("content":null)"), std::string::npos) << parts[0].data;
  EXPECT_NE(parts[0].data.find(R"("type":"function","function":{"name":"f","arguments":"{}"}}])"), std::string::npos) << parts[0].data;
  EXPECT_NE(parts[0].data.find(R"("finish_reason":"tool_calls")"), std::string::npos) << parts[0].data;
}

TEST(full_sink, keeps_a_call_cut_off_by_the_length_limit_as_content) {
  connection c;
  full_sink sink(tool_meta({9}), c.queue->address());
  sink.on_token({9, 0, "<tool_call>{\"name\": \"f\", \"argu", 4, 0.0f, {}});
  sink.on_done({9, 0, sched::finish_reason::length, 3, 1, 0, {}});
  auto& parts = c.drain();
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_NE(parts[0].data.find(R"("content":"<tool_call>{\"name\": \"f\", \"argu")"), std::string::npos) << parts[0].data;
  EXPECT_NE(parts[0].data.find(R"("finish_reason":"length")"), std::string::npos) << parts[0].data;
}

}  // namespace
}  // namespace strata::api
