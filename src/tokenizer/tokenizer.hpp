#pragma once
// tokenizer: the vocabulary of a GGUF model and the two algorithms real models use:
// SentencePiece-style score merging with byte fallback (tokenizer.ggml.model = "llama") and
// byte-level BPE with a pre-tokenizer regex per tokenizer.ggml.pre ("gpt2").

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

enum class token_type : std::int32_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

class pre_tokenizer;

class tokenizer {
 public:
  /// Reads tokenizer.ggml.*; an unsupported model or pre-tokenizer is an error naming it.
  static result<tokenizer> from_gguf(const model::gguf_file& f);

  tokenizer(tokenizer&&) noexcept;
  tokenizer& operator=(tokenizer&&) noexcept;
  ~tokenizer();

  /// add_special: BOS (and EOS) as the metadata says. parse_special: text like "<|im_start|>"
  /// becomes its control token (user-defined tokens are always matched).
  std::vector<std::int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
  /// The bytes a token stands for (a byte token may be part of a UTF-8 character). Control tokens
  /// render as their text when render_special, else as nothing.
  std::string token_to_piece(std::int32_t id, bool render_special = true) const;
  std::string decode(std::span<const std::int32_t> ids, bool render_special = false) const;

  std::int32_t n_vocab() const { return static_cast<std::int32_t>(tokens_.size()); }
  std::int32_t bos_id() const { return bos_; }
  std::int32_t eos_id() const { return eos_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  /// End of generation: EOS, EOT, <|im_end|>, <|endoftext|>, <end_of_turn>, ...
  bool is_eog(std::int32_t id) const;
  std::string_view token_text(std::int32_t id) const;
  token_type type(std::int32_t id) const;
  /// "llama" or "gpt2".
  const std::string& model_name() const { return model_; }
  /// The chat template in the metadata, or "".
  const std::string& chat_template() const { return chat_template_; }

 private:
  tokenizer() = default;
  void encode_spm(std::string_view text, std::vector<std::int32_t>& out) const;
  void encode_bpe(std::string_view text, std::vector<std::int32_t>& out) const;
  void bpe_piece(const std::string& mapped, std::vector<std::int32_t>& out) const;
  void byte_fallback(std::string_view bytes, std::vector<std::int32_t>& out) const;
  std::int32_t find(std::string_view text) const;

  std::string model_, pre_, chat_template_;
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<token_type> types_;
  std::unordered_map<std::string, std::int32_t> index_;
  std::unordered_map<std::string, std::int32_t> merge_rank_;  // "left right" -> rank
  std::vector<std::int32_t> specials_;                        // longest first
  std::vector<std::int32_t> eog_;
  std::int32_t bos_ = -1, eos_ = -1, unk_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = true;
  std::int32_t byte_tokens_[256];
  std::unique_ptr<pre_tokenizer> pre_tokenizer_;
};

}  // namespace strata::tokenizer
