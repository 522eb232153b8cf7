// `strata perplexity --model M --text FILE [--kv-bits 16|8|4] [--ctx N] [--threads N] [--chunks N] [--json]`:
// teacher-forced perplexity of a text, chunked as llama.cpp's `llama-perplexity` does, so that the
// two figures can be set side by side:
//
//   tokens:  [BOS] t1 t2 ... (the whole text, BOS as the vocabulary says)
//   chunks:  |---- n_ctx ----|---- n_ctx ----| ...   (the remainder after the last full chunk is unused)
//   a chunk: [BOS] t t ... t | t t ... t t            (first token replaced by BOS, empty KV cache)
//                            ^ n_ctx/2: from here on, the logits at i score token i + 1
//
// Every chunk is evaluated alone, its first half only as context, so each scored token sees at
// least n_ctx/2 tokens before it. PPL = exp(mean NLL) over the scored tokens; its error is
// llama.cpp's estimate: the standard error of the mean NLL, times PPL.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "kernels/compute_pool.hpp"
#include "server/commands/command_registry.hpp"
#include "server/engine/engine.hpp"
#include "src/model/model.hpp"
#include "src/model/session.hpp"
#include "src/tokenizer/tokenizer.hpp"

namespace strata::commands {
namespace {

struct perplexity_options {
  std::string model, text;
  int kv_bits = 16;
  int ctx = 512;
  int threads = 0;
  int chunks = 0;
  bool json = false;
};

using clock_type = std::chrono::steady_clock;

/// Sums of the negative log-likelihoods of the scored tokens and of their squares.
struct nll_sums {
  double nll = 0;
  double nll2 = 0;
  std::int64_t count = 0;

  double ppl() const { return std::exp(nll / static_cast<double>(count)); }
  /// llama.cpp's error of PPL: the standard error of the mean NLL (the sample variance over
  /// count - 1), carried to PPL by its derivative exp(mean) = PPL. NaN when it cannot be had.
  double ppl_stderr() const {
    const double n = static_cast<double>(count);
    const double mean = nll / n, var = nll2 / n - mean * mean;
    return count > 1 && var > 0 ? std::sqrt(var / (n - 1)) * ppl() : std::nan("");
  }
};

/// The file's text, less one trailing newline (as llama.cpp's --file reads it, so that both see
/// the same tokens), or nothing when it cannot be read.
std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return std::nullopt;
  std::string text = std::move(s).str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

/// -log softmax(row)[target], in double over the whole vocabulary.
double token_nll(const float* row, std::int32_t n_vocab, std::int32_t target) {
  const double mx = *std::max_element(row, row + n_vocab);
  double sum = 0;
  for (std::int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - mx);
  return mx + std::log(sum) - static_cast<double>(row[target]);
}

/// Evaluates one chunk from an empty cache and adds its scored tokens to `sums`. The first half
/// goes in without logits; the second half's logits at i score chunk[i + 1].
result<void> score_chunk(model::session& s, kernels::compute_pool& pool, std::span<const std::int32_t> chunk, nll_sums& sums) {
  const auto n_ctx = static_cast<std::int32_t>(chunk.size());
  const std::int32_t first = n_ctx / 2;
  s.reset();
  if (auto r = s.append(chunk.first(static_cast<std::size_t>(first)), false); !r) return r.err();
  auto logits = s.append(chunk.subspan(static_cast<std::size_t>(first)), true);
  if (!logits) return logits.err();
  const std::int32_t nv = s.mdl().hp.n_vocab;
  const std::int32_t scored = n_ctx - first - 1;
  std::vector<double> nll(static_cast<std::size_t>(scored));
  pool.parallel_for(scored, [&](int r, int) {
    nll[static_cast<std::size_t>(r)] =
        token_nll(logits->data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(nv), nv, chunk[static_cast<std::size_t>(first + r + 1)]);
  });
  for (double v : nll) {  // in order, so that the sums do not depend on the threads
    sums.nll += v;
    sums.nll2 += v * v;
  }
  sums.count += scored;
  return {};
}

int run(const perplexity_options& o) {
  auto give_up = [](const std::string& msg) {
    std::fprintf(stderr, "strata perplexity: %s\n", msg.c_str());
    return 1;
  };
  const auto text = read_text(o.text);
  if (!text) return give_up("cannot read " + o.text);
  if (text->empty()) return give_up(o.text + " is empty");
  auto m = model::model::load(o.model);
  if (!m) return give_up(m.err().message);
  auto tok = tokenizer::tokenizer::from_gguf((*m)->file);
  if (!tok) return give_up(tok.err().message);
  const model::hparams& h = (*m)->hp;
  const kv::kv_format format = *kv::kv_format_from_bits(o.kv_bits);
  if (format != kv::kv_format::f16 && (h.head_dim % kv::k_kv_quant_block != 0 || h.kv_dim() % kv::k_kv_quant_block != 0))
    return give_up("--kv-bits " + std::to_string(o.kv_bits) + " needs a head size that is a multiple of 32 (this model's is " +
                std::to_string(h.head_dim) + ")");

  // BOS is added here rather than by encode(add_special) so that an EOS the vocabulary would
  // append to every text is left out: it would be scored as the text's last token.
  const std::int32_t bos = tok->add_bos() ? tok->bos_id() : -1;
  std::vector<std::int32_t> tokens;
  if (bos >= 0) tokens.push_back(bos);
  const auto body = tok->encode(*text, false, false);
  tokens.insert(tokens.end(), body.begin(), body.end());
  const auto n_tokens = static_cast<std::int64_t>(tokens.size());
  if (n_tokens < 2 * static_cast<std::int64_t>(o.ctx))
    return give_up(o.text + " tokenizes to only " + std::to_string(n_tokens) + " tokens; a context of " + std::to_string(o.ctx) +
                " needs at least " + std::to_string(2 * o.ctx) + " (two chunks): give a longer text or a smaller --ctx");
  const auto all_chunks = static_cast<int>(n_tokens / o.ctx);
  const int n_chunks = o.chunks > 0 ? std::min(o.chunks, all_chunks) : all_chunks;

  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  kernels::compute_pool pool(threads);
  model::session s(*m, pool, o.ctx, 32, std::min(o.ctx, 512), format);
  // q4_0 pages are centered with the mean keys a server without the SSD tier uses: read from its
  // means file, or taken and kept there (engine::q4_key_means_kept_for).
  std::optional<model::q4_key_means> means;
  if (format == kv::kv_format::q4_0) {
    auto r = engine::q4_key_means_kept_for(*m, *tok, pool, engine::q4_key_dir(config::server_config{}, false));
    if (!r) return give_up(r.err().message);
    if (r->read)
      std::fprintf(stderr, "strata perplexity: q4_0 mean keys read from %s\n", r->file.c_str());
    else
      std::fprintf(stderr, "strata perplexity: q4_0 mean keys taken in %.2f s\n", r->seconds);
    means = std::move(r->means);
    s.set_q4_key_means(&*means);
  }
  std::fprintf(stderr, "strata perplexity: %lld tokens, %d chunks of %d (of %d), scoring the last %d tokens of each, KV %d bits, %d threads\n",
               static_cast<long long>(n_tokens), n_chunks, o.ctx, all_chunks, o.ctx - o.ctx / 2 - 1, o.kv_bits, threads);

  nll_sums sums;
  std::vector<std::int32_t> chunk(static_cast<std::size_t>(o.ctx));
  const auto t0 = clock_type::now();
  for (int c = 0; c < n_chunks; ++c) {
    const auto begin = tokens.begin() + static_cast<std::ptrdiff_t>(c) * o.ctx;
    std::copy(begin, begin + o.ctx, chunk.begin());
    if (bos >= 0) chunk[0] = bos;
    if (auto r = score_chunk(s, pool, chunk, sums); !r) return give_up(r.err().message);
    std::fprintf(stderr, "[%d]%.4f,", c + 1, sums.ppl());
    std::fflush(stderr);
  }
  const double seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  std::fprintf(stderr, "\n%.2f seconds per chunk\n", seconds / n_chunks);

  if (o.json) {
    const double err = sums.ppl_stderr();
    boost::json::object doc{{"model", o.model},
                            {"ppl", sums.ppl()},
                            {"ppl_stderr", std::isfinite(err) ? boost::json::value(err) : boost::json::value(nullptr)},
                            {"tokens", n_tokens},
                            {"tokens_scored", sums.count},
                            {"chunks", n_chunks},
                            {"ctx", o.ctx},
                            {"kv_bits", o.kv_bits},
                            {"threads", threads},
                            {"seconds", seconds}};
    std::printf("%s\n", boost::json::serialize(doc).c_str());
  } else {
    std::printf("PPL = %.4f +/- %.5f\n", sums.ppl(), sums.ppl_stderr());
  }
  return 0;
}

const bool registered = register_command("perplexity", "Perplexity of a text in llama.cpp's chunks (llama-perplexity)", [](CLI::App& sub) {
  auto o = std::make_shared<perplexity_options>();
  sub.add_option("--model,-m", o->model, "GGUF model")->required();
  sub.add_option("--text,-f", o->text, "Text file (one trailing newline is dropped)")->required();
  sub.add_option("--kv-bits", o->kv_bits, "KV cache format: 16 (f16), 8 (q8_0) or 4 (q4_0)")->check(CLI::IsMember({4, 8, 16}));
  sub.add_option("--ctx,-c", o->ctx, "Tokens per chunk; the last half of each is scored")->check(CLI::Range(4, 1 << 20));
  sub.add_option("--threads,-t", o->threads, "Compute threads (0 = one per core)");
  sub.add_option("--chunks", o->chunks, "Score at most the first N chunks (0 = all)")->check(CLI::NonNegativeNumber);
  sub.add_flag("--json", o->json, "One JSON object on stdout instead of the PPL line");
  return std::function<int()>([o] { return run(*o); });
});

}  // namespace
}  // namespace strata::commands
