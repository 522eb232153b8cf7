// `strata bench --model M --prompt 512 --gen 128 --threads N [--kv-bits 16|8|4] [--json]`: prefill and decode speed
// of one sequence, next to what memory bandwidth allows. Decode reads every weight once per
// token, so bandwidth / bytes_per_token bounds decode_tok_s; the share of that bound reached says
// how much is left to gain. The bandwidth is probed between stretches of decode, and each stretch
// is compared with the probes on either side of it (bandwidth_share is their median).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "kernels/compute_pool.hpp"
#include "kernels/simd.hpp"
#include "server/commands/command_registry.hpp"
#include "server/engine/engine.hpp"
#include "src/model/model.hpp"
#include "src/model/session.hpp"
#include "src/sampling/vocab_ops.hpp"
#include "src/tokenizer/tokenizer.hpp"

namespace strata::commands {
namespace {

struct bench_options {
  std::string model;
  int prompt = 512;
  int gen = 128;
  int threads = 0;
  int kv_bits = 16;
  bool json = false;
};

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// A buffer far larger than the caches for the read-bandwidth probes, in huge pages (as the
/// packed weights are), every page touched.
struct probe_buffer {
  model::huge_pages mem;
  std::size_t words = 0;

  explicit probe_buffer(std::size_t bytes) : mem(model::map_huge_pages(bytes)), words(mem ? bytes / sizeof(std::uint64_t) : 0) {
    auto* w = reinterpret_cast<std::uint64_t*>(mem.get());
    for (std::size_t i = 0; i < words; ++i) w[i] = i;
  }
  explicit operator bool() const { return words > 0; }
  std::span<const std::uint64_t> part(std::size_t i, std::size_t n_parts) const {
    const std::size_t n = words / n_parts;
    return {reinterpret_cast<const std::uint64_t*>(mem.get()) + (i % n_parts) * n, n};
  }
};

/// Read bandwidth in bytes per second of one pass over `words` with read loop `loop`
/// (kernel_table::sum_words), the way a decode matmul reads its weights (kernels::matmul_many): in
/// chunks of 64 KiB, each worker streaming its share of them and then helping the others from the
/// back of theirs. With fixed halves instead, a core slowed down for a moment by another process
/// would leave the other idle, and the probe would read below what a matmul gets.
double read_bandwidth(kernels::compute_pool& pool, std::span<const std::uint64_t> words, int loop) {
  constexpr std::int64_t k_chunk_words = (64 << 10) / sizeof(std::uint64_t);
  const auto n = static_cast<std::int64_t>(words.size());
  const auto sum = kernels::active_kernels().sum_words[loop];
  std::atomic<std::uint64_t> sink{0};
  const auto t0 = clock_type::now();
  pool.run_shares((n + k_chunk_words - 1) / k_chunk_words, [&](std::int64_t c) {
    const std::int64_t b = c * k_chunk_words;
    sink.fetch_add(sum(words.data() + b, std::min(k_chunk_words, n - b)), std::memory_order_relaxed);
  });
  const double s = seconds_since(t0);
  if (sink.load() == 42) std::fprintf(stderr, " ");  // keeps the reads from being optimized away
  return static_cast<double>(words.size_bytes()) / s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// The read loop that reads fastest here: each is timed k_rounds times, the loops taking turns,
/// and the best median wins.
int fastest_read_loop(kernels::compute_pool& pool, const probe_buffer& probe, std::size_t parts) {
  constexpr int k_rounds = 5;
  std::vector<double> rates[kernels::k_read_loops];
  std::size_t part = 0;
  for (int r = 0; r < k_rounds; ++r)
    for (int loop = 0; loop < kernels::k_read_loops; ++loop) rates[loop].push_back(read_bandwidth(pool, probe.part(part++, parts), loop));
  int best = 0;
  for (int loop = 1; loop < kernels::k_read_loops; ++loop)
    if (median(rates[loop]) > median(rates[best])) best = loop;
  return best;
}

/// The greedy pick, by the samplers' own pass (independent lanes): a one-chain scan of a 262k-token
/// vocabulary costs a few percent of a small model's decode step.
std::int32_t argmax(const std::vector<float>& v) { return sampling::argmax(v.data(), static_cast<std::int32_t>(v.size())); }

int run(const bench_options& o) {
  auto t_open = clock_type::now();
  auto m = model::model::load(o.model);
  const double open_s = seconds_since(t_open);
  if (!m) {
    std::fprintf(stderr, "strata bench: %s\n", m.err().message.c_str());
    return 1;
  }
  const model::hparams& h = (*m)->hp;
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  kernels::compute_pool pool(threads);
  // The bandwidth is probed between stretches of decode (one pass over a quarter of this buffer,
  // a different quarter each time): on a shared machine it drifts by tens of percent within a
  // second, so each stretch is compared with what memory gave around it.
  const probe_buffer probe(std::size_t{1} << 30);
  if (!probe) {
    std::fprintf(stderr, "strata bench: cannot allocate 1 GiB to measure the read bandwidth\n");
    return 1;
  }
  constexpr std::size_t k_probe_parts = 4;
  const int read_loop = fastest_read_loop(pool, probe, k_probe_parts);

  // A fixed pseudo-random prompt (the speed does not depend on which tokens).
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(o.prompt));
  std::uint32_t seed = 12345;
  for (auto& t : prompt) t = static_cast<std::int32_t>((seed = seed * 1664525u + 1013904223u) >> 8) % h.n_vocab;

  {
    // Warm-up: faults the mapped weights in and sizes the per-thread buffers.
    model::session warm(*m, pool, 16);
    auto r = warm.append(std::span<const std::int32_t>(prompt.data(), std::min<std::size_t>(8, prompt.size())), false);
    if (!r) {
      std::fprintf(stderr, "strata bench: %s\n", r.err().message.c_str());
      return 1;
    }
  }

  const kv::kv_format format = *kv::kv_format_from_bits(o.kv_bits);
  if (format != kv::kv_format::f16 && h.head_dim % kv::k_kv_quant_block != 0) {
    std::fprintf(stderr, "strata bench: --kv-bits %d needs a head size that is a multiple of 32 (this model's is %d)\n", o.kv_bits, h.head_dim);
    return 1;
  }
  model::session s(*m, pool, o.prompt + o.gen + 1, 32, 512, format);
  // q4_0 pages centered as a server without the SSD tier centers them (its means file, read or
  // taken and kept: engine::q4_key_means_kept_for), before the clock.
  std::optional<model::q4_key_means> means;
  if (format == kv::kv_format::q4_0) {
    auto tok = tokenizer::tokenizer::from_gguf((*m)->file);
    auto r = tok ? engine::q4_key_means_kept_for(*m, *tok, pool, engine::q4_key_dir(config::server_config{}, false))
                 : result<engine::q4_kept_means>(tok.err());
    if (!r) {
      std::fprintf(stderr, "strata bench: %s\n", r.err().message.c_str());
      return 1;
    }
    means = std::move(r->means);
    s.set_q4_key_means(&*means);
  }
  auto t0 = clock_type::now();
  auto logits = s.append(prompt, false);
  const double prefill_s = seconds_since(t0);
  if (!logits) {
    std::fprintf(stderr, "strata bench: %s\n", logits.err().message.c_str());
    return 1;
  }
  // A decoded token reads the weights and every layer's K and V up to its position (a
  // sliding-window layer at most its window).
  const auto weight_bytes = static_cast<double>((*m)->weights.bytes_per_token);
  auto kv_bytes_at = [&](double pos) {
    double b = 0;
    for (int il = 0; il < h.n_layer; ++il)
      b += 2.0 * static_cast<double>(kv::kv_row_bytes(format, h.kv_dim())) * (h.sliding(il) ? std::min<double>(pos, h.sliding_window) : pos);
    return b;
  };
  // Decode runs in segments of k_segment_tokens, with a probe before the first and after each:
  // a segment's share is its read rate against the mean of the probes on either side. (A probe
  // before every token would pair them closer still, but it slowed the decode by 6-15% here: the
  // probe evicts what the decode keeps in cache.)
  constexpr int k_segment_tokens = 16;
  std::vector<double> bandwidths{read_bandwidth(pool, probe.part(0, k_probe_parts), read_loop)}, shares;
  double decode_s = 0;
  std::int32_t next = argmax(*logits);
  for (int g0 = 0; g0 < o.gen; g0 += k_segment_tokens) {
    const int g1 = std::min(o.gen, g0 + k_segment_tokens);
    double bytes = 0;
    t0 = clock_type::now();
    for (int g = g0; g < g1; ++g) {
      auto r = s.append(std::span<const std::int32_t>(&next, 1), false);
      if (!r) {
        std::fprintf(stderr, "strata bench: %s\n", r.err().message.c_str());
        return 1;
      }
      next = argmax(*r);
      bytes += weight_bytes + kv_bytes_at(o.prompt + g + 1);
    }
    const double segment_s = seconds_since(t0);
    decode_s += segment_s;
    bandwidths.push_back(read_bandwidth(pool, probe.part(bandwidths.size(), k_probe_parts), read_loop));
    shares.push_back(bytes / segment_s / ((bandwidths.end()[-2] + bandwidths.back()) / 2));
  }

  const double prefill_tok_s = o.prompt / prefill_s;
  const double decode_tok_s = o.gen / decode_s;
  const double bandwidth = median(bandwidths);
  const auto [bw_min, bw_max] = std::minmax_element(bandwidths.begin(), bandwidths.end());
  const double kv_bytes = kv_bytes_at(o.prompt + (o.gen + 1) / 2.0);  // at the mean decode position
  const double bytes_per_token = weight_bytes + kv_bytes;
  const double bound_tok_s = bandwidth / bytes_per_token;
  const double share = median(shares);

  if (o.json) {
    boost::json::object doc{{"model", o.model},
                            {"arch", model::arch_name(h.architecture)},
                            {"threads", threads},
                            {"simd", kernels::simd_level_name(kernels::active_kernels().level)},
                            {"open_s", open_s},
                            {"file_bytes", static_cast<double>((*m)->file.file_size())},
                            {"prompt_tokens", o.prompt},
                            {"gen_tokens", o.gen},
                            {"kv_bits", o.kv_bits},
                            {"prefill_tok_s", prefill_tok_s},
                            {"decode_tok_s", decode_tok_s},
                            {"bandwidth_gb_s", bandwidth / 1e9},
                            {"bandwidth_min_gb_s", *bw_min / 1e9},
                            {"probe_loads_per_iteration", 1 << read_loop},
                            {"bandwidth_max_gb_s", *bw_max / 1e9},
                            {"bytes_per_token", bytes_per_token},
                            {"weight_bytes_per_token", weight_bytes},
                            {"kv_bytes_per_token", kv_bytes},
                            {"decode_bound_tok_s", bound_tok_s},
                            {"bandwidth_share", share}};
    std::printf("%s\n", boost::json::serialize(doc).c_str());
  } else {
    std::printf("model            %s (%s, %d layers, %d threads, %s)\n", o.model.c_str(), model::arch_name(h.architecture),
                h.n_layer, threads, kernels::simd_level_name(kernels::active_kernels().level));
    std::printf("open             %8.3f s      (%.2f GB file)\n", open_s, static_cast<double>((*m)->file.file_size()) / 1e9);
    std::printf("prefill          %8.1f tok/s  (%d tokens in %.3f s, KV %d bits)\n", prefill_tok_s, o.prompt, prefill_s, o.kv_bits);
    std::printf("decode           %8.1f tok/s  (%d tokens in %.3f s)\n", decode_tok_s, o.gen, decode_s);
    std::printf("read bandwidth   %8.2f GB/s  (median of the probes between stretches of %d tokens; %.2f to %.2f; %d loads per loop)\n",
                bandwidth / 1e9, k_segment_tokens, *bw_min / 1e9, *bw_max / 1e9, 1 << read_loop);
    std::printf("read/token       %8.1f MB  (weights %.1f MB, KV %.1f MB) -> bound %.1f tok/s\n", bytes_per_token / 1e6,
                weight_bytes / 1e6, kv_bytes / 1e6, bound_tok_s);
    std::printf("decode share     %8.0f %%    (median over the stretches of their read rate against the probes on either side)\n", 100 * share);
  }
  return 0;
}

const bool registered = register_command("bench", "Prefill and decode speed against the memory bandwidth bound", [](CLI::App& sub) {
  auto o = std::make_shared<bench_options>();
  sub.add_option("--model,-m", o->model, "GGUF model")->required();
  sub.add_option("--prompt", o->prompt, "Prompt tokens")->check(CLI::Range(1, 1 << 20));
  sub.add_option("--gen", o->gen, "Decoded tokens")->check(CLI::Range(1, 1 << 20));
  sub.add_option("--threads", o->threads, "Compute threads (0 = one per core)");
  sub.add_option("--kv-bits", o->kv_bits, "KV cache format: 16 (f16), 8 (q8_0) or 4 (q4_0)")->check(CLI::IsMember({4, 8, 16}));
  sub.add_flag("--json", o->json, "One JSON object instead of text");
  return std::function<int()>([o] { return run(*o); });
});

}  // namespace
}  // namespace strata::commands
