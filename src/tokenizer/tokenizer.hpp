#pragma once
// tokenizer: the vocabulary of a GGUF model and the two algorithms real models use:
// SentencePiece-style score merging with byte fallback (tokenizer.ggml.model = "llama") and
// byte-level BPE with a pre-tokenizer regex per tokenizer.ggml.pre ("gpt2").
//
// A tokenizer is immutable after from_gguf and safe to share between threads.

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/common/error.hpp"
#include "src/model/gguf_file.hpp"

namespace strata::tokenizer {

/// tokenizer.ggml.token_type values.
enum class token_type : std::int32_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

class pre_tokenizer;

class tokenizer {
 public:
  /// Reads tokenizer.ggml.*; an unsupported model is an error naming it. An unknown
  /// tokenizer.ggml.pre falls back to the default pre-tokenizer with a warning.
  static result<tokenizer> from_gguf(const model::gguf_file& f);

  tokenizer(tokenizer&&) noexcept;
  tokenizer& operator=(tokenizer&&) noexcept;
  ~tokenizer();

  /// Token ids for text. add_special: BOS (and EOS) as the metadata says. parse_special: text
  /// like "<|im_start|>" becomes its control token (user-defined tokens are always matched).
  std::vector<std::int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
  /// The bytes a token stands for (a byte token may be part of a UTF-8 character). Control tokens
  /// render as their text when render_special, else as nothing.
  std::string token_to_piece(std::int32_t id, bool render_special = true) const;
  /// The pieces joined; SentencePiece's added leading space is taken off the first piece.
  std::string decode(std::span<const std::int32_t> ids, bool render_special = false) const;

  std::int32_t n_vocab() const { return static_cast<std::int32_t>(types_.size()); }
  /// Special ids, -1 when the vocabulary has none.
  std::int32_t bos_id() const { return bos_; }
  std::int32_t eos_id() const { return eos_; }
  std::int32_t eot_id() const { return eot_; }
  std::int32_t pad_id() const { return pad_; }
  std::int32_t unk_id() const { return unk_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  /// End of generation: EOS, EOT, and end-of-turn tokens such as <|im_end|>, <|eot_id|>,
  /// <end_of_turn>, <|end|> when the vocabulary has them.
  bool is_eog(std::int32_t id) const;
  /// The vocabulary string as stored ("" for an id out of range).
  std::string_view token_text(std::int32_t id) const;
  token_type type(std::int32_t id) const;
  /// The id of a vocabulary string, or -1.
  std::int32_t find(std::string_view text) const;
  /// "llama" or "gpt2".
  const std::string& model_name() const { return model_; }
  /// The pre-tokenizer in use ("" for SentencePiece).
  const std::string& pre_name() const { return pre_; }
  /// The chat template in the metadata, or "".
  const std::string& chat_template() const { return chat_template_; }

 private:
  struct merge {
    std::int32_t rank;
    std::int32_t merged;  // the token the pair becomes
  };
  tokenizer() = default;
  result<void> load_bpe(const model::gguf_file& f);
  void encode_fragment(std::string_view text, std::vector<std::int32_t>& out) const;
  void encode_spm(std::string_view text, std::vector<std::int32_t>& out) const;
  void spm_merge(std::string_view escaped, std::vector<std::int32_t>& out) const;
  void encode_bpe(std::string_view text, std::vector<std::int32_t>& out) const;
  void bpe_word(std::string_view mapped, std::vector<std::int32_t>& out) const;
  void byte_fallback(std::string_view bytes, std::vector<std::int32_t>& out) const;
  std::int32_t match_special(std::string_view text, std::size_t pos, bool parse_special) const;

  std::string model_, pre_, chat_template_;
  std::vector<char> text_;                       // every token's text, back to back
  std::vector<std::uint32_t> offsets_;           // token i is text_[offsets_[i], offsets_[i + 1])
  std::vector<float> scores_;
  std::vector<token_type> types_;
  std::unordered_map<std::string_view, std::int32_t> index_;  // views into text_
  std::unordered_map<std::uint64_t, merge> merges_;           // (left id << 32 | right id) -> merge
  std::array<std::vector<std::int32_t>, 256> specials_;       // by first byte, longest first
  std::vector<bool> rstrip_;                                  // whitespace after this special token is dropped
  std::vector<std::int32_t> eog_;
  std::int32_t bos_ = -1, eos_ = -1, eot_ = -1, pad_ = -1, unk_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false, ignore_merges_ = false;
  bool spm_words_independent_ = false;            // no token joins a character to a following U+2581
  std::array<std::int32_t, 256> byte_tokens_{};  // SPM: <0xNN>; BPE: the token of each byte's code point
  std::unique_ptr<pre_tokenizer> pre_tokenizer_;
};

}  // namespace strata::tokenizer
