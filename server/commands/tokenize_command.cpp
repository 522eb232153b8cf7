// `strata tokenize --vocab V.gguf --in FILE`: tokenizes each text of FILE (texts separated by a
// line `__ggml_vocab_test__`) with no BOS/EOS and special tokens not parsed, and prints one line
// of token ids per text (" id id id"), the format of ../shared/vocab/*.out.
// `strata tokenize --vocab V.gguf --text "..." [--special]` prints the ids of one text (with
// --special, special-token text becomes its token; --add-special adds BOS/EOS as the vocab says).

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "server/commands/command_registry.hpp"
#include "src/model/gguf_file.hpp"
#include "src/tokenizer/tokenizer.hpp"

namespace strata::commands {
namespace {

struct tokenize_options {
  std::string vocab;
  std::optional<std::string> in, text;
  bool add_special = false, parse_special = false;
};

std::vector<std::string> split_cases(const std::string& all) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t at = all.find(sep, start);
    if (at == std::string::npos) break;
    out.push_back(all.substr(start, at - start));
    start = at + sep.size();
  }
  if (start < all.size()) out.push_back(all.substr(start));
  return out;
}

int run(const tokenize_options& o) {
  auto f = model::gguf_file::open(o.vocab);
  if (!f) {
    std::fprintf(stderr, "strata tokenize: %s\n", f.err().message.c_str());
    return 1;
  }
  auto tok = tokenizer::tokenizer::from_gguf(*f);
  if (!tok) {
    std::fprintf(stderr, "strata tokenize: %s: %s\n", o.vocab.c_str(), tok.err().message.c_str());
    return 1;
  }
  std::vector<std::string> texts;
  if (o.text) {
    texts.push_back(*o.text);
  } else {
    std::ifstream in(*o.in, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "strata tokenize: cannot read %s\n", o.in->c_str());
      return 1;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    texts = split_cases(ss.str());
  }
  std::string line;
  for (const auto& t : texts) {
    line.clear();
    for (std::int32_t id : tok->encode(t, o.add_special, o.parse_special)) line += " " + std::to_string(id);
    std::cout << line << '\n';
  }
  return 0;
}

const bool registered = register_command("tokenize", "Print the token ids of texts (the ../shared/vocab .out format)", [](CLI::App& sub) {
  auto o = std::make_shared<tokenize_options>();
  sub.add_option("--vocab,-m,--model", o->vocab, "GGUF file with the tokenizer")->required();
  auto* in = sub.add_option("--in", o->in, "File of texts separated by lines __ggml_vocab_test__");
  auto* text = sub.add_option("--text", o->text, "One text");
  in->excludes(text);
  sub.add_flag("--add-special", o->add_special, "Add BOS/EOS as the vocabulary says");
  sub.add_flag("--special,--parse-special", o->parse_special, "Turn special-token text such as <|im_start|> into its token");
  sub.callback([in, text] {
    if (in->count() == 0 && text->count() == 0) throw CLI::ValidationError("one of --in or --text is required");
  });
  return std::function<int()>([o] { return run(*o); });
});

}  // namespace
}  // namespace strata::commands
