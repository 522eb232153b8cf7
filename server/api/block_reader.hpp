#pragma once
// block_reader: a choice's output as content blocks, for the endpoints that answer in blocks or
// items (Anthropic's Messages, OpenAI's Responses): the answer's text, its reasoning and each tool
// call, in the order written, read by the chat output parser (chat::tool_parser) when the request
// has one, else all of it text.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/api/messages_writer.hpp"
#include "src/chat/tool_parser.hpp"

namespace strata::api {

/// A choice's output as content blocks, in order: the parser's events (or the plain text) are
/// appended, text of one kind running on in one block.
class block_reader {
 public:
  explicit block_reader(const std::optional<chat::parser_options>& output);
  /// Reads a delta of the output.
  void feed(const std::string& text);
  void finish();
  const std::vector<schema::content_block>& blocks() const { return blocks_; }
  std::vector<schema::content_block>& blocks() { return blocks_; }
  bool made_calls() const { return calls_ > 0; }

  /// What a stream sends for what was read since the last call: (block index, piece) pairs, a
  /// piece of a tool_use block being its whole input.
  struct piece {
    int block;
    std::string text;
  };
  std::vector<piece> take_pieces() { return std::exchange(pieces_, {}); }

 private:
  void add(const std::vector<chat::parse_event>& events);
  void append(schema::content_block::kind k, const std::string& text);

  std::optional<chat::tool_parser> parser_;
  std::vector<schema::content_block> blocks_;
  std::vector<piece> pieces_;
  int calls_ = 0;
};

}  // namespace strata::api
