#pragma once
// text_stream: turns a sequence's token pieces into text that is safe to send. It holds back an
// incomplete UTF-8 character and any tail that could still become one of the stop strings;
// on a full match it reports `stopped` and never releases the stop string or what follows
// (OpenAI semantics). finish() releases what is held, an incomplete UTF-8 tail as U+FFFD.

#include <string>
#include <vector>

namespace strata::sampling {

class text_stream {
 public:
  explicit text_stream(std::vector<std::string> stop = {});

  struct output {
    std::string text;
    bool stopped = false;
  };
  output feed(const std::string& piece);
  std::string finish();

 private:
  std::vector<std::string> stop_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace strata::sampling
