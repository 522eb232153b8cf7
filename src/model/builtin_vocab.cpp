#include "src/model/builtin_vocab.hpp"

#include <array>
#include <map>
#include <utility>

namespace strata::model {
namespace {

/// The text the merges are learned from: plain, common English, the kind of words a demo
/// conversation uses.
constexpr std::string_view k_corpus =
    "The quick brown fox jumps over the lazy dog. This is a small model that the server can run "
    "without any files. It has a short vocabulary of the most common English words and parts of "
    "words, so that the text it reads and writes is not only single bytes. When you ask it a "
    "question, it will answer with whatever its random weights say, which is not going to be "
    "very useful, but it is enough to see that the whole system works from end to end. "
    "Hello, how are you today? I am fine, thank you. What would you like to talk about? "
    "There are many things that we can do with a language model: we can write a story, answer "
    "a question, translate a sentence from one language into another, or explain how something "
    "works. The user sends a message, and the assistant writes a reply. The system message tells "
    "the assistant what it should do and how it should behave. Each message has a role and some "
    "content. The server reads the request, turns the text into tokens, runs the model on them, "
    "and then samples the next token from the probabilities that the model computes. It does this "
    "again and again until the reply is complete or the limit on the number of tokens is reached. "
    "In the beginning there was nothing but the sea and the sky. Then the land came up out of the "
    "water, and the first plants and animals began to live on it. People learned to make fire, to "
    "grow food, to build houses and to write down what they knew. They made tools and machines, and "
    "later they made computers that could think about numbers faster than any person could. "
    "Today a computer can read a book, listen to a song, look at a picture and tell you what is in "
    "it. It can also write, although what it writes is only as good as what it has learned. "
    "Please write a short poem about the morning. The morning light is soft and warm; the birds "
    "are singing in the trees; the world is waking up again, and there is nothing that I need. "
    "Thank you for your help. You are welcome. Let me know if there is anything else I can do for "
    "you. Sure, here is an example of a function that returns the sum of two numbers, and another "
    "one that prints the result. The answer is that it depends on the time and the place. "
    "Some of the best things in life are the simplest ones: a good friend, a long walk, a warm "
    "meal, and a quiet evening at home with the people you love. ";

constexpr std::string_view k_chatml_template =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

constexpr int k_merges = 400;

/// GPT-2's byte-to-unicode mapping: printable bytes stand for themselves, the others are moved
/// to U+0100 and up. Returns, for each byte, its UTF-8 text, and the byte order of the vocabulary.
struct byte_map {
  std::array<std::string, 256> text;
  std::array<std::uint8_t, 256> order;
};

std::string utf8(std::uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

byte_map make_byte_map() {
  byte_map m;
  auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    if (printable(b)) {
      m.text[b] = utf8(static_cast<std::uint32_t>(b));
      m.order[next++] = static_cast<std::uint8_t>(b);
    }
  }
  int moved = 0;
  for (int b = 0; b < 256; ++b) {
    if (!printable(b)) {
      m.text[b] = utf8(static_cast<std::uint32_t>(256 + moved++));
      m.order[next++] = static_cast<std::uint8_t>(b);
    }
  }
  return m;
}

enum class char_class { letter, digit, space, other };

char_class classify(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return char_class::letter;
  if (c >= '0' && c <= '9') return char_class::digit;
  if (c == ' ' || c == '\n' || c == '\t') return char_class::space;
  return char_class::other;
}

/// Splits like GPT-2's pre-tokenizer, simplified: an optional leading space and a run of one
/// character class.
std::vector<std::string> pre_split(std::string_view text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t start = i;
    if (text[i] == ' ' && i + 1 < text.size() && classify(static_cast<unsigned char>(text[i + 1])) != char_class::space) ++i;
    char_class c = classify(static_cast<unsigned char>(text[i]));
    while (i < text.size() && classify(static_cast<unsigned char>(text[i])) == c) ++i;
    out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

builtin_vocab build() {
  builtin_vocab v;
  const byte_map bm = make_byte_map();
  for (std::uint8_t b : bm.order) {
    v.tokens.push_back(bm.text[b]);
    v.token_types.push_back(1);
  }

  // Words as sequences of symbols, with their counts.
  std::map<std::string, int> counts;
  for (const std::string& w : pre_split(k_corpus)) ++counts[w];
  std::vector<std::pair<std::vector<std::string>, int>> words;
  for (const auto& [w, n] : counts) {
    std::vector<std::string> symbols;
    for (unsigned char c : w) symbols.push_back(bm.text[c]);
    words.emplace_back(std::move(symbols), n);
  }

  // Greedy BPE: merge the most frequent adjacent pair (ties: the smaller pair) until k_merges.
  for (int m = 0; m < k_merges; ++m) {
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (const auto& [symbols, n] : words) {
      for (std::size_t i = 0; i + 1 < symbols.size(); ++i) pairs[{symbols[i], symbols[i + 1]}] += n;
    }
    const std::pair<std::string, std::string>* best = nullptr;
    int best_n = 1;
    for (const auto& [p, n] : pairs) {
      if (n > best_n) {
        best = &p;
        best_n = n;
      }
    }
    if (!best) break;
    const std::string left = best->first, right = best->second, joined = left + right;
    v.merges.push_back(left + " " + right);
    v.tokens.push_back(joined);
    v.token_types.push_back(1);
    for (auto& [symbols, n] : words) {
      std::vector<std::string> merged;
      for (std::size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          merged.push_back(joined);
          ++i;
        } else {
          merged.push_back(symbols[i]);
        }
      }
      symbols = std::move(merged);
    }
  }

  auto add_special = [&v](const char* text) {
    v.tokens.emplace_back(text);
    v.token_types.push_back(3);
    return static_cast<std::int32_t>(v.tokens.size() - 1);
  };
  v.bos_id = v.padding_id = add_special("<|endoftext|>");
  add_special("<|im_start|>");
  v.eos_id = add_special("<|im_end|>");
  v.chat_template = k_chatml_template;
  return v;
}

}  // namespace

const builtin_vocab& builtin_vocab::get() {
  static const builtin_vocab v = build();
  return v;
}

void builtin_vocab::write_to(gguf_writer& w) const {
  w.add_string("tokenizer.ggml.model", model);
  w.add_string("tokenizer.ggml.pre", pre);
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_i32_array("tokenizer.ggml.token_type", token_types);
  w.add_string_array("tokenizer.ggml.merges", merges);
  w.add_u32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(bos_id));
  w.add_u32("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(eos_id));
  w.add_u32("tokenizer.ggml.padding_token_id", static_cast<std::uint32_t>(padding_id));
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  w.add_string("tokenizer.chat_template", chat_template);
}

}  // namespace strata::model
