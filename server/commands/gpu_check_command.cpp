// `strata gpu-check --model M [--prompt N] [--gen G] [--seed S] [--bench 512,4096] [--bench-gen G]
// [--bench-batch 64x1024+128] [--bench-restore 16384] [--kv-bits 16|8] [--no-cpu] [--json F]`: runs the model's layers through the CPU stages and the GPU stages
// (--device cuda) on the same tokens and compares their logits: one sequence's prefill and
// decode (the decode fed the CPU's greedy token, so that both paths see the same sequence), three
// sequences decoding in one batch, and a sequence's KV pages saved and loaded, and copied, on the
// GPU (the copies must continue bit for bit as the original). With --bench, times the GPU path:
// prefill of each prompt length in one step, and single-stream decode after it, as tokens/s and
// as a share of the memory bandwidth (weights read once per decoded token); --bench-batch times
// many sequences prefilled and then decoding together; --bench-restore times a prefix restored
// from host RAM against its cold prefill (its next token's logits bit for bit). Exit code 1 when a
// comparison fails. --golden also compares the GPU's logits with a reference dump of exact float
// math (../shared/golden), within the tolerance its manifest gives. --kv-bits 8 keeps every
// sequence's KV pages in q8_0 (on both paths) instead of f16.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "kernels/compute_pool.hpp"
#include "server/commands/command_registry.hpp"
#include "server/engine/device_stages.hpp"
#include "server/engine/stages.hpp"
#include "src/model/model.hpp"

namespace strata::commands {
namespace {

struct gpu_check_options {
  std::string model, json, bench, golden, bench_batch;
  double golden_max_abs = 0.01, golden_mean_abs = 0.002;
  int prompt = 64;
  int gen = 16;
  int bench_gen = 64;
  int bench_restore = 0;
  int kv_bits = 16;
  unsigned seed = 0;
  bool no_cpu = false;
  double tolerance = 0.1;
};

/// One path's stages, run in order as the layer actors would.
struct path {
  std::vector<std::shared_ptr<pipeline::layer_compute>> layers;
  std::shared_ptr<pipeline::output_compute> output;

  /// The logits of the last row of each sequence of the step (sequence after sequence), or of
  /// every row.
  std::vector<float> step(const pipeline::batch_layout& l, bool every_row = false) {
    std::vector<float> hidden, logits;
    for (auto& s : layers) s->run(l, hidden);
    std::vector<std::int32_t> rows;
    for (const auto& s : l.seqs)
      for (std::int32_t r = every_row ? 0 : s.n_rows - 1; r < s.n_rows; ++r) rows.push_back(s.first_row + r);
    output->logits(hidden, rows, logits);
    return logits;
  }
};

/// A sequence's block table and length; blocks come from one counter shared by every sequence (of
/// the f16 range for a sequence marked f16, when --kv-bits 8 makes the others q8_0).
struct sequence {
  std::uint64_t id = 0;
  std::vector<std::int32_t> blocks;
  std::int32_t len = 0;
  bool f16 = false;
};

struct planner {
  std::int32_t page_tokens = 32;
  std::int32_t next_block = 0;
  std::int32_t next_f16 = 0;  // f16 blocks of sequences marked f16
  std::uint64_t next_step = 1;

  /// One step: each sequence gets its tokens appended (blocks added as needed).
  pipeline::batch_layout layout(std::vector<std::pair<sequence*, std::vector<std::int32_t>>> parts) {
    pipeline::batch_layout l;
    l.step = next_step++;
    for (auto& [s, toks] : parts) {
      const auto n = static_cast<std::int32_t>(toks.size());
      while (static_cast<std::int32_t>(s->blocks.size()) * page_tokens < s->len + n) s->blocks.push_back(s->f16 ? next_f16++ : next_block++);
      pipeline::batch_sequence b;
      b.id = s->id;
      b.blocks = s->blocks;
      b.first_row = l.n_rows();
      b.n_rows = n;
      b.start_pos = s->len;
      b.sample = true;
      l.seqs.push_back(std::move(b));
      l.tokens.insert(l.tokens.end(), toks.begin(), toks.end());
      s->len += n;
    }
    return l;
  }
};

std::int32_t argmax(const float* row, std::int32_t n) { return static_cast<std::int32_t>(std::max_element(row, row + n) - row); }

/// How far the GPU's logits are from the CPU's, over every compared row.
struct comparison {
  double worst = 0;  // max |gpu - cpu| / max |cpu| of a row
  int rows = 0, same_argmax = 0, near_ties = 0, failures = 0;

  void add(const float* cpu, const float* gpu, std::int32_t n, double tolerance) {
    double diff = 0, scale = 0;
    for (std::int32_t i = 0; i < n; ++i) {
      diff = std::max(diff, static_cast<double>(std::fabs(gpu[i] - cpu[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(cpu[i])));
    }
    const double err = diff / std::max(scale, 1e-6);
    worst = std::max(worst, err);
    ++rows;
    const std::int32_t a = argmax(cpu, n), b = argmax(gpu, n);
    if (a == b) ++same_argmax;
    // A different greedy token is only acceptable where the CPU's own logits nearly tie: their gap
    // is within what the two paths' rounding moves a logit (twice the largest difference seen).
    else if (cpu[a] - cpu[b] <= 2 * diff) ++near_ties;
    if (err > tolerance || (a != b && cpu[a] - cpu[b] > 2 * diff)) ++failures;
  }
  boost::json::object json() const {
    return {{"rows", rows}, {"worst_relative_error", worst}, {"same_greedy_token", same_argmax}, {"near_ties", near_ties},
            {"failures", failures}};
  }
};

std::vector<std::int32_t> random_tokens(std::mt19937& rng, std::int32_t n_vocab, int n) {
  std::uniform_int_distribution<std::int32_t> d(0, n_vocab - 1);
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Prefill and decode on the CPU and the GPU; every step's logits compared.
boost::json::object compare(path& cpu, path& gpu, planner& pl, std::int32_t n_vocab, const gpu_check_options& o, std::mt19937& rng,
                            bool& ok) {
  boost::json::object r;
  // One sequence: its prefill, then decode fed the CPU's greedy token.
  comparison single;
  sequence a_cpu{1}, a_gpu{1};
  {
    const auto prompt = random_tokens(rng, n_vocab, o.prompt);
    planner p2 = pl;
    auto lc = pl.layout({{&a_cpu, prompt}});
    auto lg = p2.layout({{&a_gpu, prompt}});
    auto c = cpu.step(lc), g = gpu.step(lg);
    single.add(c.data(), g.data(), n_vocab, o.tolerance);
    for (int i = 0; i < o.gen; ++i) {
      const std::int32_t t = argmax(c.data(), n_vocab);
      p2 = pl;
      lc = pl.layout({{&a_cpu, {t}}});
      lg = p2.layout({{&a_gpu, {t}}});
      c = cpu.step(lc);
      g = gpu.step(lg);
      single.add(c.data(), g.data(), n_vocab, o.tolerance);
    }
  }
  r["one_sequence"] = single.json();
  // Three sequences of different lengths, prefilled apart, then decoding together; with
  // --kv-bits 8 the middle one keeps f16 pages (steps of both formats).
  comparison batch;
  {
    std::vector<sequence> sc(3), sg(3);
    sc[1].f16 = sg[1].f16 = o.kv_bits == 8;
    std::vector<std::vector<float>> last(3);
    const int lengths[] = {5, 40, 100};
    for (int i = 0; i < 3; ++i) {
      sc[i].id = sg[i].id = 10 + i;
      const auto prompt = random_tokens(rng, n_vocab, lengths[i]);
      planner p2 = pl;
      auto c = cpu.step(pl.layout({{&sc[i], prompt}}));
      auto g = gpu.step(p2.layout({{&sg[i], prompt}}));
      batch.add(c.data(), g.data(), n_vocab, o.tolerance);
      last[i] = std::move(c);
    }
    for (int step = 0; step < std::max(1, o.gen / 2); ++step) {
      std::vector<std::pair<sequence*, std::vector<std::int32_t>>> pc, pg;
      for (int i = 0; i < 3; ++i) {
        const std::int32_t t = argmax(last[i].data(), n_vocab);
        pc.push_back({&sc[i], {t}});
        pg.push_back({&sg[i], {t}});
      }
      planner p2 = pl;
      auto c = cpu.step(pl.layout(pc));
      auto g = gpu.step(p2.layout(pg));
      for (int i = 0; i < 3; ++i) {
        batch.add(c.data() + static_cast<std::size_t>(i) * n_vocab, g.data() + static_cast<std::size_t>(i) * n_vocab, n_vocab, o.tolerance);
        last[i].assign(c.begin() + static_cast<std::ptrdiff_t>(i) * n_vocab, c.begin() + static_cast<std::ptrdiff_t>(i + 1) * n_vocab);
      }
    }
  }
  r["three_sequences_batched"] = batch.json();
  ok = single.failures == 0 && batch.failures == 0;
  return r;
}

/// The GPU's pages of a sequence saved and loaded into new blocks, and copied into others: each
/// copy's next step must give the original's logits bit for bit.
boost::json::object copies_by_value(path& gpu, planner& pl, std::int32_t n_vocab, std::mt19937& rng, bool& ok) {
  sequence s{20};
  const auto prompt = random_tokens(rng, n_vocab, 70);
  gpu.step(pl.layout({{&s, prompt}}));
  std::vector<pipeline::frozen_block> frozen;
  for (std::int32_t b : s.blocks) frozen.push_back({b, {}});
  for (auto& l : gpu.layers) l->save_pages(frozen);
  sequence loaded{21, {}, s.len}, copied{22, {}, s.len};
  std::vector<pipeline::block_copy> copies;
  for (std::size_t i = 0; i < s.blocks.size(); ++i) {
    loaded.blocks.push_back(pl.next_block++);
    copied.blocks.push_back(pl.next_block++);
    frozen[i].block = loaded.blocks[i];
    copies.push_back({s.blocks[i], copied.blocks[i]});
  }
  for (auto& l : gpu.layers) l->load_pages(frozen);
  for (auto& l : gpu.layers) l->copy_pages(copies);
  const std::vector<std::int32_t> next = {prompt[3]};
  const auto a = gpu.step(pl.layout({{&s, next}}));
  const auto b = gpu.step(pl.layout({{&loaded, next}}));
  const auto c = gpu.step(pl.layout({{&copied, next}}));
  const bool same_loaded = std::equal(a.begin(), a.end(), b.begin()), same_copied = std::equal(a.begin(), a.end(), c.begin());
  ok = same_loaded && same_copied && !frozen.empty() && !frozen[0].bytes.empty();
  return {{"saved_and_loaded_identical", same_loaded}, {"copied_identical", same_copied},
          {"frozen_block_bytes", frozen.empty() ? 0 : frozen[0].bytes.size()}};
}

/// The GPU's logits at every position of each case of a reference dump (../shared/golden's
/// format, each case's prompt prefilled in one step) against the reference's top entries.
boost::json::object golden(path& gpu, planner& pl, std::int32_t n_vocab, const gpu_check_options& o, bool& ok) {
  std::ifstream in(o.golden);
  std::stringstream text;
  text << in.rdbuf();
  const boost::json::value ref = boost::json::parse(text.str());
  double worst = 0, sum = 0;
  std::int64_t count = 0;
  std::uint64_t id = 1000;
  for (const auto& c : ref.at("cases").as_array()) {
    std::vector<std::int32_t> tokens;
    for (const auto& t : c.at("tokens").as_array()) tokens.push_back(static_cast<std::int32_t>(t.to_number<std::int64_t>()));
    sequence s{id++};
    const auto logits = gpu.step(pl.layout({{&s, tokens}}), true);
    const auto& positions = c.at("positions").as_array();
    for (std::size_t p = 0; p < positions.size() && p < tokens.size(); ++p) {
      for (const auto& e : positions[p].at("top").as_array()) {
        const auto tok = e.as_array()[0].to_number<std::int64_t>();
        const double diff = std::fabs(logits[p * static_cast<std::size_t>(n_vocab) + static_cast<std::size_t>(tok)] -
                                      e.as_array()[1].to_number<double>());
        worst = std::max(worst, diff);
        sum += diff;
        ++count;
      }
    }
  }
  const double mean = count ? sum / static_cast<double>(count) : 0;
  ok = count > 0 && worst <= o.golden_max_abs && mean <= o.golden_mean_abs;
  return {{"file", o.golden}, {"entries", count}, {"max_abs", worst}, {"mean_abs", mean}, {"tolerance_max_abs", o.golden_max_abs},
          {"tolerance_mean_abs", o.golden_mean_abs}, {"passed", ok}};
}

/// Prefill of each length in one step, then single-stream decode, on the GPU.
boost::json::array bench(path& gpu, planner& pl, const model::model& m, const gpu_check_options& o, std::mt19937& rng) {
  boost::json::array out;
  std::vector<int> lengths;
  std::stringstream ss(o.bench);
  for (std::string item; std::getline(ss, item, ',');) lengths.push_back(std::stoi(item));
  const std::int32_t n_vocab = m.hp.n_vocab;
  {  // warm-up: the kernels' first launches, and the scratch grown for prompts up to 4,096 tokens
    sequence w{99};
    gpu.step(pl.layout({{&w, random_tokens(rng, n_vocab, std::min(4096, *std::max_element(lengths.begin(), lengths.end())))}}));
    for (int i = 0; i < 4; ++i) gpu.step(pl.layout({{&w, {1}}}));
  }
  for (int n : lengths) {
    sequence s{static_cast<std::uint64_t>(100 + n)};
    const auto prompt = random_tokens(rng, n_vocab, n);
    auto t0 = std::chrono::steady_clock::now();
    auto lg = gpu.step(pl.layout({{&s, prompt}}));
    const double prefill_s = seconds_since(t0);
    std::vector<double> steps;
    for (int i = 0; i < o.bench_gen; ++i) {
      const std::int32_t t = argmax(lg.data(), n_vocab);
      t0 = std::chrono::steady_clock::now();
      lg = gpu.step(pl.layout({{&s, {t}}}));
      steps.push_back(seconds_since(t0));
    }
    std::sort(steps.begin(), steps.end());
    const double median = steps.empty() ? 0 : steps[steps.size() / 2];
    const double decode_tok_s = median > 0 ? 1.0 / median : 0;
    const double bytes = static_cast<double>(m.weights.bytes_per_token);
    out.push_back({{"prompt", n}, {"prefill_tok_s", n / prefill_s}, {"decode_tok_s", decode_tok_s},
                   {"decode_ms_median", median * 1e3}, {"weight_bytes_per_token", bytes},
                   {"decode_share_of_3_35_TBps", bytes * decode_tok_s / 3.35e12}});
    std::printf("prompt %5d: prefill %.0f tok/s, decode %.1f tok/s (%.1f ms/token, %.0f%% of 3.35 TB/s)\n", n, n / prefill_s,
                decode_tok_s, median * 1e3, 100 * bytes * decode_tok_s / 3.35e12);
  }
  return out;
}

/// "64x1024+128": sequences, prompt tokens, generated tokens.
struct batch_spec {
  int seqs = 0, prompt = 0, gen = 0;
  static batch_spec parse(const std::string& s) {
    batch_spec b;
    if (std::sscanf(s.c_str(), "%dx%d+%d", &b.seqs, &b.prompt, &b.gen) != 3 || b.seqs <= 0 || b.prompt <= 0 || b.gen <= 0) return {};
    return b;
  }
  std::int32_t tokens() const { return seqs * (prompt + gen); }
};

/// Many sequences at once, as llama-batched-bench runs them: every prompt prefilled (4,096 rows a
/// step, whole prompts), then all sequences decoding together, one row each per step.
boost::json::object bench_batch(path& gpu, planner& pl, std::int32_t n_vocab, const batch_spec& b, std::mt19937& rng) {
  std::vector<sequence> seqs(static_cast<std::size_t>(b.seqs));
  for (std::size_t i = 0; i < seqs.size(); ++i) seqs[i].id = 5000 + i;
  std::vector<std::int32_t> next(seqs.size());
  const std::size_t per_step = static_cast<std::size_t>(std::max(1, 4096 / b.prompt));
  auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < seqs.size(); i += per_step) {
    std::vector<std::pair<sequence*, std::vector<std::int32_t>>> parts;
    for (std::size_t j = i; j < std::min(seqs.size(), i + per_step); ++j) parts.push_back({&seqs[j], random_tokens(rng, n_vocab, b.prompt)});
    const auto lg = gpu.step(pl.layout(std::move(parts)));
    for (std::size_t j = i; j < std::min(seqs.size(), i + per_step); ++j) next[j] = argmax(lg.data() + (j - i) * n_vocab, n_vocab);
  }
  const double prefill_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  for (int g = 0; g < b.gen; ++g) {
    std::vector<std::pair<sequence*, std::vector<std::int32_t>>> parts;
    for (std::size_t j = 0; j < seqs.size(); ++j) parts.push_back({&seqs[j], {next[j]}});
    const auto lg = gpu.step(pl.layout(std::move(parts)));
    for (std::size_t j = 0; j < seqs.size(); ++j) next[j] = argmax(lg.data() + j * n_vocab, n_vocab);
  }
  const double decode_s = seconds_since(t0);
  const double prefill_tok = static_cast<double>(b.seqs) * b.prompt, decode_tok = static_cast<double>(b.seqs) * b.gen;
  std::printf("%d sequences of %d + %d: prefill %.0f tok/s, decode %.0f tok/s together, %.0f tok/s in all\n", b.seqs, b.prompt, b.gen,
              prefill_tok / prefill_s, decode_tok / decode_s, (prefill_tok + decode_tok) / (prefill_s + decode_s));
  return {{"sequences", b.seqs}, {"prompt", b.prompt}, {"gen", b.gen}, {"prefill_s", prefill_s}, {"decode_s", decode_s},
          {"prefill_tok_s", prefill_tok / prefill_s}, {"decode_tok_s", decode_tok / decode_s},
          {"tok_s", (prefill_tok + decode_tok) / (prefill_s + decode_s)}};
}

/// A prefix of n tokens prefilled cold, its blocks saved to host RAM as the hot tier saves them
/// (save_pages: copies by value), restored into blocks the device never wrote (load_pages, as a
/// served request's prefix hit does), and one token decoded after each: the restore and its first
/// token against the cold prefill, and the two logits rows bit for bit.
boost::json::object bench_restore(path& gpu, planner& pl, std::int32_t n_vocab, int n, std::mt19937& rng, bool& ok) {
  {  // warm-up: the kernels, and the scratch grown for n rows
    sequence w{7000};
    gpu.step(pl.layout({{&w, random_tokens(rng, n_vocab, n)}}));
  }
  sequence cold{7001};
  const auto prompt = random_tokens(rng, n_vocab, n);
  auto t0 = std::chrono::steady_clock::now();
  const auto first = gpu.step(pl.layout({{&cold, prompt}}));
  const double cold_s = seconds_since(t0);
  std::vector<pipeline::frozen_block> frozen;
  for (std::int32_t b : cold.blocks) frozen.push_back({b, {}});
  t0 = std::chrono::steady_clock::now();
  for (auto& l : gpu.layers) l->save_pages(frozen);
  const double save_s = seconds_since(t0);
  const std::vector<std::int32_t> next = {argmax(first.data(), n_vocab)};
  t0 = std::chrono::steady_clock::now();
  const auto a = gpu.step(pl.layout({{&cold, next}}));
  const double decode_s = seconds_since(t0);
  sequence restored{7002, {}, n};
  for (auto& f : frozen) restored.blocks.push_back(f.block = pl.next_block++);
  t0 = std::chrono::steady_clock::now();
  for (auto& l : gpu.layers) l->load_pages(frozen);
  const double queued_s = seconds_since(t0);
  const auto b = gpu.step(pl.layout({{&restored, next}}));
  const double restore_s = seconds_since(t0);
  const bool same = std::equal(a.begin(), a.end(), b.begin());
  ok = same;
  double bytes = 0;
  for (const auto& f : frozen) bytes += static_cast<double>(f.bytes.size());
  std::printf("restore of %d tokens (%.0f MB of KV) from host RAM: cold prefill %.1f ms; saved in %.1f ms; restored and first token "
              "in %.1f ms (copies queued after %.1f ms, a decode step alone %.1f ms): %.2f%% of the cold prefill (goal <= 5%%), %.1f GB/s; "
              "next token's logits %s\n",
              n, bytes / 1e6, cold_s * 1e3, save_s * 1e3, restore_s * 1e3, queued_s * 1e3, decode_s * 1e3, 100 * restore_s / cold_s,
              bytes / std::max(restore_s - decode_s, 1e-6) / 1e9, same ? "identical" : "DIFFERENT");
  return {{"tokens", n}, {"kv_bytes", bytes}, {"cold_prefill_s", cold_s}, {"save_s", save_s}, {"restore_queued_s", queued_s},
          {"restore_and_first_token_s", restore_s}, {"decode_step_s", decode_s}, {"ratio", restore_s / cold_s},
          {"logits_identical", same}};
}

int run(const gpu_check_options& o) {
  auto loaded = model::model::load(o.model);
  if (!loaded) {
    std::fprintf(stderr, "strata gpu-check: %s\n", loaded.err().message.c_str());
    return 2;
  }
  std::shared_ptr<const model::model> m = *loaded;
  const std::int32_t n_vocab = m->hp.n_vocab;
  planner pl;
  std::int32_t tokens = 4 * (o.prompt + o.gen) + 3 * (100 + o.gen) + 300;
  std::stringstream ss(o.bench);
  int longest = 0;
  for (std::string item; std::getline(ss, item, ',');) {
    tokens += std::stoi(item) + o.bench_gen + 8;
    longest = std::max(longest, std::stoi(item));
  }
  tokens += longest + 8;  // the bench's warm-up
  tokens += 3 * (o.bench_restore + 2 * pl.page_tokens);  // its warm-up, the cold prefix and its restored copy
  const batch_spec batch = batch_spec::parse(o.bench_batch);
  if (!o.bench_batch.empty() && batch.seqs == 0) {
    std::fprintf(stderr, "strata gpu-check: --bench-batch wants SEQSxPROMPT+GEN, e.g. 64x1024+128\n");
    return 2;
  }
  tokens += batch.tokens() + batch.seqs * pl.page_tokens;  // each sequence's last page partly used
  if (o.kv_bits != 16 && o.kv_bits != 8) {
    std::fprintf(stderr, "strata gpu-check: --kv-bits takes 16 or 8 (the GPU keeps no q4_0 pages)\n");
    return 2;
  }
  // Every sequence's blocks in one format (but one of compare()'s: f16 beside q8_0 ones).
  const std::int32_t n_blocks = tokens / pl.page_tokens + 64;
  const bool q8 = o.kv_bits == 8;
  kv::block_space space{{n_blocks, q8 ? n_blocks : 0, 0}};
  pl.next_block = space.base(q8 ? kv::kv_format::q8_0 : kv::kv_format::f16);
  auto stages = engine::make_gpu_stages(m, space, pl.page_tokens);
  if (!stages) {
    std::fprintf(stderr, "strata gpu-check: %s\n", stages.err().message.c_str());
    return 2;
  }
  std::printf("GPU: %s\n", stages->summary.c_str());
  path gpu{stages->layers, stages->output};
  std::mt19937 rng(o.seed);
  std::printf("seed %u\n", o.seed);
  std::printf("KV pages: %s\n", q8 ? "q8_0" : "f16");
  boost::json::object result{{"model", o.model}, {"device", stages->summary}, {"seed", o.seed}, {"kv_bits", o.kv_bits}};
  bool ok = true;
  if (!o.no_cpu) {
    auto pool = std::make_shared<kernels::compute_pool>(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    path cpu;
    for (int il = 0; il < m->hp.n_layer; ++il) cpu.layers.push_back(std::make_shared<engine::layer_stage>(m, il, space, pl.page_tokens, pool));
    cpu.output = std::make_shared<engine::output_stage>(m, pool);
    bool same = true, copies = true;
    result["logits_vs_cpu"] = compare(cpu, gpu, pl, n_vocab, o, rng, same);
    result["kv_copies"] = copies_by_value(gpu, pl, n_vocab, rng, copies);
    ok = same && copies;
    std::printf("logits vs CPU: %s\nKV copies: %s\n", boost::json::serialize(result["logits_vs_cpu"]).c_str(),
                boost::json::serialize(result["kv_copies"]).c_str());
  }
  if (!o.golden.empty()) {
    bool golden_ok = true;
    result["golden"] = golden(gpu, pl, n_vocab, o, golden_ok);
    std::printf("against %s: %s\n", o.golden.c_str(), boost::json::serialize(result["golden"]).c_str());
    ok = ok && golden_ok;
  }
  if (!o.bench.empty()) result["bench"] = bench(gpu, pl, *m, o, rng);
  if (batch.seqs > 0) result["bench_batch"] = bench_batch(gpu, pl, n_vocab, batch, rng);
  if (o.bench_restore > 0) {
    bool same = true;
    result["bench_restore"] = bench_restore(gpu, pl, n_vocab, o.bench_restore, rng, same);
    ok = ok && same;
  }
  result["passed"] = ok;
  if (!o.json.empty()) std::ofstream(o.json) << boost::json::serialize(result) << "\n";
  std::printf("%s\n", ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}

const bool registered = register_command("gpu-check", "Compare the GPU path's logits with the CPU's, and time it (CUDA builds)", [](CLI::App& sub) {
  auto o = std::make_shared<gpu_check_options>();
  sub.add_option("-m,--model", o->model, "GGUF model file")->required();
  sub.add_option("--prompt", o->prompt, "Prompt tokens of the compared sequence")->capture_default_str();
  sub.add_option("--gen", o->gen, "Decode steps compared")->capture_default_str();
  sub.add_option("--seed", o->seed, "Seed of the random token ids")->capture_default_str();
  // The two paths round activations differently (the CPU to 8 bits before every quantized product,
  // the GPU's prefill GEMM to f16), and the quantized test models' logits move by 5-7% of their
  // largest under such rounding (../shared/golden/manifest.json: llama.cpp against exact math).
  sub.add_option("--tolerance", o->tolerance, "Largest |gpu - cpu| / max |cpu| of a logits row")->capture_default_str();
  sub.add_option("--golden", o->golden, "A reference logits dump (../shared/golden/<model>.ref.json) to compare the GPU's logits with");
  sub.add_option("--golden-max-abs", o->golden_max_abs, "Its tolerance: largest |gpu - ref| over the reference's top entries")->capture_default_str();
  sub.add_option("--golden-mean-abs", o->golden_mean_abs, "Its tolerance: mean |gpu - ref| over them")->capture_default_str();
  sub.add_option("--bench", o->bench, "Prompt lengths to time, e.g. 512,4096 (GPU only)");
  sub.add_option("--bench-gen", o->bench_gen, "Decode steps timed after each prompt")->capture_default_str();
  sub.add_option("--bench-batch", o->bench_batch, "Sequences decoding together, e.g. 64x1024+128 (sequences x prompt + generated)");
  sub.add_option("--bench-restore", o->bench_restore, "Prefix tokens to restore from host RAM, timed against their cold prefill");
  sub.add_option("--kv-bits", o->kv_bits, "KV page precision: 16 (f16) or 8 (q8_0)")->capture_default_str();
  sub.add_flag("--no-cpu", o->no_cpu, "Skip the comparison with the CPU (bench only)");
  sub.add_option("--json", o->json, "Write the results as JSON here");
  return std::function<int()>([o] { return run(*o); });
});

}  // namespace
}  // namespace strata::commands
