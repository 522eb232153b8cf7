#pragma once
// Splits a template into text and tag tokens, applying jinja2's whitespace rules: `-` on a tag
// strips the whitespace beside it, trim_blocks drops the newline after a block or comment tag,
// and lstrip_blocks drops the indentation before one.

#include <cstdint>
#include <string>
#include <vector>

namespace strata::chat {

enum class token_kind : std::uint8_t {
  text,         ///< literal template text
  var_begin,    ///< {{
  var_end,      ///< }}
  block_begin,  ///< {%
  block_end,    ///< %}
  name,         ///< identifier or keyword
  string,       ///< string literal (text holds the unescaped value)
  integer,      ///< integer literal (text holds the digits without '_')
  floating,     ///< float literal (text holds the digits without '_')
  op,           ///< operator or punctuation
  eof,
};

struct token {
  token_kind kind;
  std::string text;
  int line = 1;
};

/// The lexer; `tokenize` throws template_exception (with the line) on malformed input.
class lexer {
 public:
  explicit lexer(std::string source);
  std::vector<token> tokenize();

 private:
  void lex_text();
  void lex_comment(std::size_t content_start);
  void lex_raw(std::size_t content_start);
  void lex_tag(bool block);
  bool lex_tag_end(bool block);
  void lex_string();
  void lex_number();
  void emit(token_kind kind, std::string text, int line);
  void advance_to(std::size_t pos);
  [[noreturn]] void fail(const std::string& message) const;

  std::string src_;
  std::size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<char> brackets_;
  std::vector<token> out_;
};

}  // namespace strata::chat
