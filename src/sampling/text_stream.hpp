#pragma once
// text_stream: turns one sequence's token pieces (byte strings) into text that is safe to send.
//
// It holds back an incomplete UTF-8 character and any tail that could still grow into one of the
// stop strings, and releases them once decided. On a full match it reports `stopped` and never
// releases the stop string or anything after it (OpenAI semantics).
//
//   pieces:  "Hel" "lo, W" "\xC3" "\xA9" "orl" "d END" "ignored"      stop = {"END"}
//   feed:    "Hel" "lo, W" ""     "é"    "orl" "d " + stopped
//
// Which stop wins is a function of the text alone, never of how it was cut into pieces: the
// stream stops at the first byte where the text ends with a stop string, and when several stop
// strings end there it cuts before the longest one.
//
// Emitted text is always well-formed UTF-8: bytes that are not UTF-8 become U+FFFD (one per
// maximal ill-formed part), and finish() turns an incomplete character left at the end into
// U+FFFD. Stop strings are matched against that decoded text (a stop string that is not UTF-8 is
// decoded the same way first).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/error.hpp"

namespace strata::sampling {

class text_stream {
 public:
  /// The most stop strings a request may carry (OpenAI's limit).
  static constexpr std::size_t max_stop_strings = 4;

  /// Checks a request's stop strings: at most four, none empty. Errors name `stop`.
  static result<void> validate_stop(const std::vector<std::string>& stop);

  /// `stop`: the request's stop strings; empty ones are ignored.
  explicit text_stream(std::vector<std::string> stop = {});

  /// What one piece released.
  struct output {
    /// Text now safe to send (possibly empty).
    std::string text;
    /// A stop string matched: `text` ends right before it and the stream takes nothing more.
    bool stopped = false;
  };

  /// Adds one token's piece. After a stop (or finish()), returns nothing and keeps `stopped`.
  output feed(std::string_view piece);

  /// Ends the stream: releases everything still held (an unfinished stop prefix is plain text
  /// now; an incomplete UTF-8 character becomes U+FFFD). Empty after a stop.
  std::string finish();

  /// True once a stop string has matched.
  bool stopped() const noexcept { return matched_ >= 0; }

  /// The index in the constructor's list of the stop string that matched, or -1.
  int matched_stop() const noexcept { return matched_; }

  /// Bytes released so far (by feed and finish).
  std::uint64_t emitted_bytes() const noexcept { return emitted_bytes_; }

  /// Characters (code points) released so far.
  std::uint64_t emitted_chars() const noexcept { return emitted_chars_; }

 private:
  /// One stop string with its KMP failure table and how much of it the text now ends with.
  struct matcher {
    std::string text;
    std::vector<std::uint32_t> fail;  // fail[i]: longest proper border of text[0..i]
    std::uint32_t state = 0;          // bytes of `text` the held text ends with
    int index = 0;                    // position in the constructor's list
  };

  /// Appends one decoded byte to held_; true when it completes a stop string (then cut_ is set).
  bool push_byte(char b);
  /// Appends decoded text; stops at the first completed stop string.
  bool push_text(std::string_view text);
  /// Takes the first `n` bytes of held_ as released text.
  std::string release(std::size_t n);

  std::vector<matcher> stops_;
  std::string raw_;   // the undecoded tail: the start of a character still incomplete
  std::string held_;  // decoded text not yet released: it may begin a stop string
  std::size_t cut_ = 0;
  int matched_ = -1;
  bool finished_ = false;
  std::uint64_t emitted_bytes_ = 0;
  std::uint64_t emitted_chars_ = 0;
};

}  // namespace strata::sampling
