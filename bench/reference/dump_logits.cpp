// Writes reference logits with llama.cpp (linked as a library) in the format of ../shared/golden:
// for each prompt line (`\n` inside a line is a newline), its tokens as llama.cpp's tokenizer gives
// them (BOS as the vocabulary says, special tokens parsed), per position the log-sum-exp and the
// top-N logits, then a greedy continuation of exactly G tokens (as `strata logits --greedy G`
// writes it: an end-of-generation token does not stop it). Built and run by bench/reference_dumps.sh; never part of strata's build.
//
//   dump_logits MODEL.gguf PROMPTS.txt OUT.json [TOP=20] [GREEDY=64] [THREADS=2] [no-flash-attn]

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "llama.h"
#include "src/common/prompt_lines.hpp"

namespace {

using strata::unescape_newlines;

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

/// One position's entry: {"logsumexp": L, "top": [[id, logit], ...]}.
std::string position_entry(const float* row, int n_vocab, int top) {
  double mx = *std::max_element(row, row + n_vocab), sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - mx);
  std::vector<int> idx(static_cast<std::size_t>(n_vocab));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + top, idx.end(), [&](int a, int b) { return row[a] > row[b]; });
  char buf[64];
  std::snprintf(buf, sizeof buf, "{\"logsumexp\":%.6f,\"top\":[", mx + std::log(sum));
  std::string out = buf;
  for (int i = 0; i < top; ++i) {
    std::snprintf(buf, sizeof buf, "%s[%d,%.6g]", i ? "," : "", idx[static_cast<std::size_t>(i)], row[idx[static_cast<std::size_t>(i)]]);
    out += buf;
  }
  return out + "]}";
}

int argmax(const float* row, int n) { return static_cast<int>(std::max_element(row, row + n) - row); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf PROMPTS.txt OUT.json [TOP] [GREEDY] [THREADS] [no-flash-attn]\n", argv[0]);
    return 2;
  }
  const int top = argc > 4 ? std::atoi(argv[4]) : 20;
  const int greedy = argc > 5 ? std::atoi(argv[5]) : 64;
  const int threads = argc > 6 ? std::atoi(argv[6]) : 2;
  // llama.cpp's CPU flash attention decodes one row at a time with f16 queries: its continuation
  // then parts from its own prefill of the same tokens by a few hundredths of a logit, enough to
  // flip a random model's expert routing. no-flash-attn takes the exact path in both.
  const bool flash_attn = !(argc > 7 && std::string(argv[7]) == "no-flash-attn");

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);

  std::ifstream in(argv[2]);
  std::vector<std::string> prompts;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) prompts.push_back(unescape_newlines(line));

  std::string model_name = argv[1];
  model_name = model_name.substr(model_name.find_last_of('/') + 1);
  std::string out = "{\"model\":" + json_string(model_name) + ",\"n_vocab\":" + std::to_string(n_vocab) + ",\"cases\":[";
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    const std::string& text = prompts[p];
    std::vector<llama_token> tokens(text.size() + 8);
    int n = llama_tokenize(vocab, text.c_str(), static_cast<int>(text.size()), tokens.data(),
                           static_cast<int>(tokens.size()), /*add_special=*/true, /*parse_special=*/true);
    if (n < 0) {
      std::fprintf(stderr, "cannot tokenize prompt %zu\n", p);
      return 1;
    }
    tokens.resize(static_cast<std::size_t>(n));

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = static_cast<uint32_t>(n + greedy + 8);
    cp.n_batch = cp.n_ctx;
    cp.n_ubatch = cp.n_ctx;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.no_perf = true;
    if (!flash_attn) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) {
      std::fprintf(stderr, "cannot create a context\n");
      return 1;
    }

    llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) {
      batch.token[i] = tokens[static_cast<std::size_t>(i)];
      batch.pos[i] = i;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = 1;
    }
    batch.n_tokens = n;
    if (llama_decode(ctx, batch) != 0) {
      std::fprintf(stderr, "decode failed on prompt %zu\n", p);
      return 1;
    }
    std::string positions;
    for (int i = 0; i < n; ++i) positions += (i ? "," : "") + position_entry(llama_get_logits_ith(ctx, i), n_vocab, top);
    llama_batch_free(batch);

    std::string cont;
    int next = argmax(llama_get_logits_ith(ctx, n - 1), n_vocab);
    for (int g = 0; g < greedy; ++g) {
      cont += (g ? "," : "") + std::to_string(next);
      if (g + 1 == greedy) break;
      llama_token t = next;
      llama_batch one = llama_batch_get_one(&t, 1);
      if (llama_decode(ctx, one) != 0) {
        std::fprintf(stderr, "decode failed in the continuation of prompt %zu\n", p);
        return 1;
      }
      next = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
    }
    llama_free(ctx);

    std::string toks;
    for (int i = 0; i < n; ++i) toks += (i ? "," : "") + std::to_string(tokens[static_cast<std::size_t>(i)]);
    out += (p ? "," : "") + std::string("{\"prompt\":") + json_string(text) + ",\"tokens\":[" + toks + "],\"positions\":[" +
           positions + "],\"greedy\":[" + cont + "]}";
    std::fprintf(stderr, "case %zu: %d tokens\n", p + 1, n);
  }
  out += "]}\n";
  llama_model_free(model);
  std::ofstream(argv[3]) << out;
  return 0;
}
