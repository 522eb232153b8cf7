// `strata logits --model M --prompts P --top 20 --out F`: runs each line of P (`\n` inside a line
// is a newline) through the model and writes the ../shared/golden dump format: per position the
// logsumexp and the top-N logits, then 16 greedy continuation tokens.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <thread>

#include <boost/json.hpp>

#include "kernels/compute_pool.hpp"
#include "server/commands/command_registry.hpp"
#include "src/common/prompt_lines.hpp"
#include "src/model/model.hpp"
#include "src/model/session.hpp"
#include "src/tokenizer/tokenizer.hpp"

namespace strata::commands {
namespace {

struct logits_options {
  std::string model, prompts, out;
  int top = 20;
  int greedy = 16;
  int threads = 0;
};

boost::json::object position_entry(const float* row, std::int32_t n_vocab, int top) {
  double mx = *std::max_element(row, row + n_vocab), sum = 0;
  for (std::int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - mx);
  std::vector<std::int32_t> idx(static_cast<std::size_t>(n_vocab));
  std::iota(idx.begin(), idx.end(), 0);
  const auto k = static_cast<std::ptrdiff_t>(std::min(top, n_vocab));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](std::int32_t a, std::int32_t b) { return row[a] > row[b]; });
  boost::json::array tops;
  for (std::ptrdiff_t i = 0; i < k; ++i) tops.push_back(boost::json::array{idx[static_cast<std::size_t>(i)], row[idx[static_cast<std::size_t>(i)]]});
  return boost::json::object{{"logsumexp", mx + std::log(sum)}, {"top", std::move(tops)}};
}

int run(const logits_options& o) {
  auto m = model::model::load(o.model);
  if (!m) {
    std::fprintf(stderr, "strata logits: %s\n", m.err().message.c_str());
    return 1;
  }
  auto tok = tokenizer::tokenizer::from_gguf((*m)->file);
  if (!tok) {
    std::fprintf(stderr, "strata logits: %s\n", tok.err().message.c_str());
    return 1;
  }
  std::ifstream in(o.prompts);
  if (!in) {
    std::fprintf(stderr, "strata logits: cannot read %s\n", o.prompts.c_str());
    return 1;
  }
  kernels::compute_pool pool(o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  const std::int32_t nv = (*m)->hp.n_vocab;
  boost::json::array cases;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    std::string prompt = unescape_newlines(line);
    auto tokens = tok->encode(prompt, true, true);
    if (tokens.empty()) continue;
    model::session s(*m, pool, static_cast<std::int32_t>(tokens.size()) + o.greedy + 1);
    auto logits = s.append(tokens, true);
    if (!logits) {
      std::fprintf(stderr, "strata logits: %s\n", logits.err().message.c_str());
      return 1;
    }
    boost::json::array positions;
    for (std::size_t p = 0; p < tokens.size(); ++p) positions.push_back(position_entry(logits->data() + p * static_cast<std::size_t>(nv), nv, o.top));
    boost::json::array greedy;
    std::vector<float> last(logits->end() - nv, logits->end());
    for (int g = 0; g < o.greedy; ++g) {
      std::int32_t next = static_cast<std::int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
      greedy.push_back(next);
      if (g + 1 == o.greedy) break;
      auto r = s.append(std::span<const std::int32_t>(&next, 1), false);
      if (!r) return 1;
      last = std::move(*r);
    }
    boost::json::array ids(tokens.begin(), tokens.end());
    cases.push_back(boost::json::object{{"prompt", prompt}, {"tokens", std::move(ids)}, {"positions", std::move(positions)}, {"greedy", std::move(greedy)}});
    std::fprintf(stderr, "\rcase %d: %zu tokens", ++n, tokens.size());
  }
  std::fprintf(stderr, "\n");
  std::string name = std::filesystem::path(o.model).filename().string();
  boost::json::object doc{{"model", name}, {"n_vocab", nv}, {"cases", std::move(cases)}};
  std::ofstream out(o.out);
  out << boost::json::serialize(doc) << '\n';
  if (!out) {
    std::fprintf(stderr, "strata logits: cannot write %s\n", o.out.c_str());
    return 1;
  }
  return 0;
}

const bool registered = register_command("logits", "Write reference-format logits for each prompt line", [](CLI::App& sub) {
  auto o = std::make_shared<logits_options>();
  sub.add_option("--model,-m", o->model, "GGUF model")->required();
  sub.add_option("--prompts", o->prompts, "Prompt file, one per line (\\n inside a line is a newline)")->required();
  sub.add_option("--top", o->top, "Logits kept per position")->check(CLI::Range(1, 1000));
  sub.add_option("--greedy", o->greedy, "Greedy continuation tokens")->check(CLI::Range(1, 4096));
  sub.add_option("--threads", o->threads, "Compute threads (0 = one per core)");
  sub.add_option("--out", o->out, "Output JSON file")->required();
  return std::function<int()>([o] { return run(*o); });
});

}  // namespace
}  // namespace strata::commands
