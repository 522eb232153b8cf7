#pragma once
// builtin_vocab: a small byte-level BPE vocabulary built in code, so that a demo model can be
// synthesized with no vocabulary file. Token ids:
//
//   0..255     the 256 bytes, in GPT-2's byte-to-unicode order ("!" is 0, "Ā" stands for byte 0)
//   256..      one token per merge, in merge order (learned from a built-in English text)
//   last three <|endoftext|>, <|im_start|>, <|im_end|> (control tokens)

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/model/gguf_writer.hpp"

namespace strata::model {

struct builtin_vocab {
  std::vector<std::string> tokens;
  std::vector<std::int32_t> token_types;  // 1 normal, 3 control
  std::vector<std::string> merges;        // "left right", in priority order
  std::int32_t bos_id = 0;                // <|endoftext|>
  std::int32_t eos_id = 0;                // <|im_end|>
  std::int32_t padding_id = 0;            // <|endoftext|>
  std::string_view model = "gpt2";
  std::string_view pre = "qwen2";
  std::string_view chat_template;         // ChatML

  /// The vocabulary, built on first use (a few milliseconds).
  static const builtin_vocab& get();
  /// Writes every tokenizer.* key (model, pre, tokens, token_type, merges, special ids, template).
  void write_to(gguf_writer& w) const;
};

}  // namespace strata::model
