// `strata synth --arch A --layers N --hidden D --heads H --kv-heads K --ffn F [--head-dim HD]
//  --vocab V.gguf|builtin --type T [--ctx 32768] [--seed S] [qwen35, granitehybrid: --ssm-state
//  --ssm-k-heads --ssm-v-heads --ssm-conv --attn-interval] [qwen3moe, gpt-oss: --experts --experts-used --expert-ffn]
//  --out M.gguf`: writes a random-weight model in the layout llama.cpp's converter writes, with a
//  progress bar on stderr.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "server/commands/command_registry.hpp"
#include "src/model/synth.hpp"

namespace strata::commands {
namespace {

struct synth_cli {
  model::synth_options o;
  bool tied = false, untied = false, quiet = false;
};

/// "[=====>      ]  tensor 12/290  123.4/500.0 MB", redrawn in place on a terminal.
void draw_progress(std::size_t done, std::size_t n, std::uint64_t written, std::uint64_t total) {
  constexpr int width = 30;
  const double frac = total ? static_cast<double>(written) / static_cast<double>(total) : 1.0;
  const int fill = static_cast<int>(frac * width);
  std::string bar(static_cast<std::size_t>(fill), '=');
  if (fill < width) bar += '>';
  bar.resize(width, ' ');
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  // Off a terminal, print a line per tenth of the tensors rather than redrawing.
  if (!tty && done != n && done % std::max<std::size_t>(1, n / 10) != 0) return;
  std::fprintf(stderr, "%s[%s] tensor %zu/%zu  %.1f/%.1f MB%s", tty ? "\r" : "", bar.c_str(), done, n, written / 1e6, total / 1e6,
               tty && done != n ? "" : "\n");
  std::fflush(stderr);
}

int run(const synth_cli& cli) {
  model::synth_options o = cli.o;
  if (cli.tied) o.tied = true;
  if (cli.untied) o.tied = false;
  if (auto r = model::validate(o); !r) {
    std::fprintf(stderr, "strata synth: %s\n", r.err().message.c_str());
    return 2;
  }
  auto start = std::chrono::steady_clock::now();
  auto r = model::synthesize(o, cli.quiet ? model::progress_callback{} : model::progress_callback(draw_progress));
  if (!r) {
    std::fprintf(stderr, "strata synth: %s\n", r.err().message.c_str());
    return 1;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!cli.quiet) std::fprintf(stderr, "wrote %s in %.1f s\n", o.out.c_str(), secs);
  return 0;
}

const bool registered = register_command("synth", "Write a random-weight model in llama.cpp's GGUF layout", [](CLI::App& sub) {
  auto cli = std::make_shared<synth_cli>();
  model::synth_options& o = cli->o;
  sub.add_option("--arch", o.arch, "llama, qwen2, qwen3, gemma2, gemma3, phi3, qwen35, qwen3moe, gpt-oss or granitehybrid")->required();
  sub.add_option("--layers", o.layers, "Number of transformer blocks")->required();
  sub.add_option("--hidden", o.hidden, "Embedding length")->required();
  sub.add_option("--heads", o.heads, "Attention heads")->required();
  sub.add_option("--kv-heads", o.kv_heads, "Key/value heads (must divide --heads)")->required();
  sub.add_option("--ffn", o.ffn, "Feed-forward length")->required();
  sub.add_option("--head-dim", o.head_dim, "Head length (default: hidden / heads)");
  sub.add_option("--vocab", o.vocab, "GGUF file whose tokenizer.* keys to copy, or 'builtin'")->required();
  sub.add_option("--type", o.type, "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q4_k_m, q5_k_m, q6_k or mxfp4_moe (experts mxfp4, the rest q8_0)")
      ->capture_default_str();
  sub.add_option("--ctx", o.ctx, "Context length")->capture_default_str();
  sub.add_option("--seed", o.seed, "Seed of the random weights")->capture_default_str();
  sub.add_option("--name", o.name, "general.name (default strata-synth-<arch>)");
  sub.add_option("--ssm-state", o.ssm_state, "qwen35: key/value length per delta-rule head (default min(head length, 128)); granitehybrid: Mamba-2 state per channel (default 128)");
  sub.add_option("--ssm-k-heads", o.ssm_k_heads, "qwen35: delta-rule query/key heads (default heads / 2); granitehybrid: B/C groups (default 1)");
  sub.add_option("--ssm-v-heads", o.ssm_v_heads, "qwen35: delta-rule value heads (default heads); granitehybrid: Mamba-2 heads (default 2 x hidden / 64)");
  sub.add_option("--ssm-conv", o.ssm_conv, "qwen35, granitehybrid: length of the short convolution")->capture_default_str();
  sub.add_option("--attn-interval", o.attn_interval, "qwen35, granitehybrid: every Nth layer attends in full")->capture_default_str();
  sub.add_option("--experts", o.experts, "qwen3moe, gpt-oss: experts per layer")->capture_default_str();
  sub.add_option("--experts-used", o.experts_used, "qwen3moe, gpt-oss: experts each token uses")->capture_default_str();
  sub.add_option("--expert-ffn", o.expert_ffn, "qwen3moe, gpt-oss: each expert's feed-forward length (default ffn / experts-used)");
  auto* tied = sub.add_flag("--tied", cli->tied, "Share the output matrix with the embeddings");
  sub.add_flag("--untied", cli->untied, "Write a separate output.weight")->excludes(tied);
  sub.add_flag("--quiet,-q", cli->quiet, "No progress bar");
  sub.add_option("--out,-o", o.out, "The GGUF file to write")->required();
  return std::function<int()>([cli] { return run(*cli); });
});

}  // namespace
}  // namespace strata::commands
