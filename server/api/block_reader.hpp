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
  /// `streaming`: keep what each feed adds for stream(); a reader whose answer goes out whole
  /// keeps only the blocks.
  block_reader(const std::optional<chat::parser_options>& output, bool streaming);
  /// Reads a delta of the output.
  void feed(const std::string& text);
  void finish();
  const std::vector<schema::content_block>& blocks() const { return blocks_; }
  bool made_calls() const { return calls_ > 0; }

  /// Hands what was read since the last call to a stream, in order: close(i) for the open block
  /// before the next one opens, open(i) before a block's first piece, piece(i, text) (a tool_use
  /// block's one piece is its whole input). `at_end`: then closes the last block too.
  template <class Open, class Piece, class Close>
  void stream(Open&& open, Piece&& piece, Close&& close, bool at_end = false) {
    for (auto& p : std::exchange(pieces_, {})) {
      if (p.block >= opened_) {
        if (opened_ > 0) close(opened_ - 1);
        open(p.block);
        opened_ = p.block + 1;
      }
      piece(p.block, p.text);
    }
    if (at_end && opened_ > 0) close(opened_ - 1);
  }

 private:
  struct pending_piece {
    int block;
    std::string text;
  };
  void add(const std::vector<chat::parse_event>& events);
  void append(schema::content_block::kind k, const std::string& text);
  void record(const std::string& text);

  std::optional<chat::tool_parser> parser_;
  bool streaming_;
  std::vector<schema::content_block> blocks_;
  std::vector<pending_piece> pieces_;
  int opened_ = 0;  // blocks a stream has opened; the last one may still be open
  int calls_ = 0;
};

}  // namespace strata::api
