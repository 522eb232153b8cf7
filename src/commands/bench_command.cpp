// `strata bench --model M --prompt 512 --gen 128 --threads N [--kv-bits 16|8|4] [--json]`: prefill and decode speed
// of one sequence, next to what memory bandwidth allows. Decode reads every weight once per
// token, so bandwidth / bytes_per_token bounds decode_tok_s; the share of that bound reached says
// how much is left to gain.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "kernels/compute_pool.hpp"
#include "kernels/simd.hpp"
#include "src/commands/command_registry.hpp"
#include "src/model/model.hpp"
#include "src/model/session.hpp"

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

/// Read bandwidth in bytes per second: every worker sums its share of a buffer far larger than
/// the caches with the widest loads the CPU has (kernel_table::sum_words); the best of a few passes.
double measure_read_bandwidth(kernels::compute_pool& pool, std::size_t bytes) {
  const std::size_t n = bytes / sizeof(std::uint64_t);
  // Cache-line aligned, so that no load straddles two lines.
  const std::unique_ptr<std::uint64_t, decltype(&std::free)> mem(
      static_cast<std::uint64_t*>(std::aligned_alloc(64, n * sizeof(std::uint64_t))), &std::free);
  if (!mem) return 0;
  const std::span<std::uint64_t> buf(mem.get(), n);
  for (std::size_t i = 0; i < n; ++i) buf[i] = i;  // touch every page before timing
  std::vector<std::uint64_t> sinks(static_cast<std::size_t>(pool.size()) * 8);
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    const auto t0 = clock_type::now();
    pool.run([&](int ith, int nth) {
      std::int64_t b, e;
      kernels::compute_pool::split(static_cast<std::int64_t>(n), 64, ith, nth, b, e);
      // One slot per worker, a cache line apart: the sums stay live without false sharing.
      sinks[static_cast<std::size_t>(ith) * 8] = kernels::active_kernels().sum_words(buf.data() + b, e - b);
    });
    best = std::max(best, static_cast<double>(n * sizeof(std::uint64_t)) / seconds_since(t0));
  }
  std::uint64_t all = 0;
  for (auto x : sinks) all += x;
  if (all == 42) std::fprintf(stderr, " ");  // keeps the reads from being optimized away
  return best;
}

std::int32_t argmax(const std::vector<float>& v) {
  return static_cast<std::int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

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
  // The bound takes the better of two bandwidth probes, one before the prefill and one after the
  // decode: on a shared machine a neighbour's traffic during one probe would lower the bound.
  const double bandwidth_before = measure_read_bandwidth(pool, std::size_t{1} << 30);

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
  auto t0 = clock_type::now();
  auto logits = s.append(prompt, false);
  const double prefill_s = seconds_since(t0);
  if (!logits) {
    std::fprintf(stderr, "strata bench: %s\n", logits.err().message.c_str());
    return 1;
  }
  std::int32_t next = argmax(*logits);
  t0 = clock_type::now();
  for (int g = 0; g < o.gen; ++g) {
    auto r = s.append(std::span<const std::int32_t>(&next, 1), false);
    if (!r) {
      std::fprintf(stderr, "strata bench: %s\n", r.err().message.c_str());
      return 1;
    }
    next = argmax(*r);
  }
  const double decode_s = seconds_since(t0);

  const double bandwidth_after = measure_read_bandwidth(pool, std::size_t{1} << 30);
  const double bandwidth = std::max(bandwidth_before, bandwidth_after);
  if (bandwidth <= 0) {
    std::fprintf(stderr, "strata bench: cannot allocate 1 GiB to measure the read bandwidth\n");
    return 1;
  }
  const double prefill_tok_s = o.prompt / prefill_s;
  const double decode_tok_s = o.gen / decode_s;
  // A decoded token reads the weights and every layer's K and V up to its position: at the mean
  // decode position, prompt + gen / 2 (a sliding-window layer reads at most its window).
  const auto weight_bytes = static_cast<double>((*m)->weights.bytes_per_token);
  const double mean_pos = o.prompt + o.gen / 2.0;
  double kv_bytes = 0;
  for (int il = 0; il < h.n_layer; ++il)
    kv_bytes += 2.0 * static_cast<double>(kv::kv_row_bytes(format, h.kv_dim())) *
                (h.sliding(il) ? std::min<double>(mean_pos, h.sliding_window) : mean_pos);
  const double bytes_per_token = weight_bytes + kv_bytes;
  const double bound_tok_s = bandwidth / bytes_per_token;
  const double share = decode_tok_s / bound_tok_s;

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
                            {"bandwidth_before_gb_s", bandwidth_before / 1e9},
                            {"bandwidth_after_gb_s", bandwidth_after / 1e9},
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
    std::printf("read bandwidth   %8.2f GB/s  (the better of %.2f before the prefill and %.2f after the decode)\n",
                bandwidth / 1e9, bandwidth_before / 1e9, bandwidth_after / 1e9);
    std::printf("read/token       %8.1f MB  (weights %.1f MB, KV %.1f MB) -> bound %.1f tok/s, decode reaches %.0f%% of it\n",
                bytes_per_token / 1e6, weight_bytes / 1e6, kv_bytes / 1e6, bound_tok_s, 100 * share);
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
