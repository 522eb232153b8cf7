#pragma once
// What the scheduler needs from the text side: token pieces, end-of-generation tokens, and a
// per-request assembler that turns pieces into safe text and finds stop sequences.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace strata::sched {

/// Turns a request's token pieces into text that may be sent: holds back partial UTF-8
/// characters and partial stop sequences, and never releases a stop sequence.
class text_assembler {
 public:
  virtual ~text_assembler() = default;
  struct output {
    std::string text;
    bool stopped = false;
    /// When stopped: which of the request's stop sequences matched (its index), else -1.
    int stop_index = -1;
  };
  virtual output feed(const std::string& piece) = 0;
  /// Whatever is still held when the request ends for another reason.
  virtual std::string finish() = 0;
};

struct text_services {
  std::function<std::string(std::int32_t token)> piece;
  std::function<bool(std::int32_t token)> is_end_of_generation;
  std::function<std::unique_ptr<text_assembler>(const std::vector<std::string>& stop)> make_assembler;
};

}  // namespace strata::sched
