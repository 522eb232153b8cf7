#pragma once
// utf8_streamer: turns a stream of token pieces (arbitrary byte strings) into text that never
// ends inside a UTF-8 character, for streaming generated text to a client.

#include <string>
#include <string_view>

namespace strata::tokenizer {

class utf8_streamer {
 public:
  /// Appends piece and returns what can be released now: everything except a trailing
  /// incomplete UTF-8 character, which waits for the bytes that complete it. Bytes that can never
  /// become part of a valid character are released as they are.
  std::string push(std::string_view piece);
  /// Releases whatever is held back (the stream ended inside a character).
  std::string flush();
  /// The number of bytes held back (at most 3).
  std::size_t pending() const { return held_.size(); }

 private:
  std::string held_;
};

}  // namespace strata::tokenizer
