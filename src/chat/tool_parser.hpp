#pragma once
// tool_parser: reads one choice's generated text as it streams and splits it into the answer
// (content), reasoning (`<think>` blocks, harmony's analysis channel) and tool calls, in the
// model's tool_format. Text that could still be the start of markup is held back until it cannot,
// so no markup reaches the content however the tokens split it. A call that does not parse (bad
// JSON, no name, cut off) is given back as content, markup and all: no text is lost.
//
// Whitespace between markup blocks (the newline between two calls, the blank line after
// `</think>`) is layout, not content: it is dropped, and whitespace left at the end of an answer
// that made calls too.

#include <string>
#include <string_view>
#include <vector>

#include <boost/json/value.hpp>

#include "src/chat/tool_format.hpp"

namespace strata::chat {

/// One call as the API returns it: `arguments` is JSON text.
struct tool_call {
  std::string id;
  std::string name;
  std::string arguments;
};

struct parse_event {
  enum class kind { content, reasoning, call };
  kind type = kind::content;
  /// content and reasoning: the text.
  std::string text;
  /// call: its index among the choice's calls, and the call.
  int index = 0;
  tool_call call;
};

struct parser_options {
  tool_format format;
  /// Calls are parsed (tools were given and tool_choice is not "none"); otherwise tool markup is
  /// content.
  bool parse_calls = false;
  /// The prompt ends inside an open `<think>` block (DeepSeek-R1's, a template's forced thinking).
  bool starts_in_reasoning = false;
  /// The request's tools (qwen3_xml reads their parameters' types: a string stays a string).
  boost::json::value tools;
};

class tool_parser {
 public:
  explicit tool_parser(parser_options o);

  /// Events for `text` (a delta); adjacent text of one kind comes as one event.
  std::vector<parse_event> feed(std::string_view text);
  /// Events for whatever is held back, at the end of the choice.
  std::vector<parse_event> finish();
  /// Calls emitted so far.
  int calls() const noexcept { return n_calls_; }

 private:
  enum class mode { text, reasoning, tagged_call, json_call, h_header, h_body };
  void run(bool at_end);
  bool step_text(bool at_end);
  bool step_reasoning(bool at_end);
  bool step_tagged(bool at_end);
  bool step_json(bool at_end);
  bool step_header(bool at_end);
  bool step_body(bool at_end);
  /// Emits text before the earliest of `marks` in buf_ as `k` (buf_ then starts with the mark) and
  /// returns that mark's index; with none found, emits all but a tail that could start one (all
  /// at the end) and returns -1.
  int emit_until(const std::vector<std::string>& marks, parse_event::kind k, bool at_end);
  void emit(parse_event::kind k, std::string_view s);
  void content(std::string_view s);
  /// Parses a finished call body; emits its calls, or `raw` as content when it does not parse.
  void finish_call(std::string_view body, std::string_view raw);
  /// Emits parsed calls and goes back to text.
  void take_calls(std::vector<tool_call> calls);
  void emit_call(tool_call c);

  parser_options o_;
  std::vector<std::string> text_marks_;
  std::string buf_;
  mode mode_ = mode::text;
  std::string opener_;   // the markup that opened the call now read
  std::string closer_;   // tagged_call: its end tag
  std::size_t scan_ = 0;  // json_call: bytes of buf_ scanned
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
  std::string header_;  // harmony: the message header read so far
  std::string channel_, recipient_;
  std::string pending_ws_;  // content whitespace not yet sent: layout, if markup follows
  std::string opener_ws_;   // the whitespace before the call now read, given back if it fails
  bool drop_ws_ = false;
  bool any_content_ = false;
  int n_calls_ = 0;
  std::vector<parse_event> out_;
};

}  // namespace strata::chat
