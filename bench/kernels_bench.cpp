// Kernel throughput: memory bandwidth (the bound for decode), GEMV bandwidth per weight type and
// GEMM (m = 512, prefill) GFLOP/s per weight type, for every SIMD level this CPU runs.
//
//   kernels_bench [--benchmark_filter=gemm] [--threads N]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/compute_pool.hpp"
#include "kernels/matmul.hpp"
#include "kernels/packed_x16.hpp"
#include "kernels/quants.hpp"
#include "kernels/simd.hpp"
#include "src/model/huge_pages.hpp"

namespace {

using namespace strata::kernels;

int g_threads = 2;
constexpr std::size_t k_stream_bytes = std::size_t{512} << 20;  // well past the last-level cache
constexpr std::int64_t k_gemv_k = 4864;                         // qwen2-0.5B ffn; a multiple of 256
constexpr std::int64_t k_gemm_rows = 1024, k_gemm_k = 4864, k_gemm_m = 512;

compute_pool& pool() {
  static compute_pool p(g_threads);
  return p;
}

/// rows x k weights of type t: 64 distinct quantized random rows, repeated.
std::vector<std::byte> make_weights(dtype t, std::int64_t rows, std::int64_t k) {
  std::mt19937 gen(42);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  const std::size_t rb = row_bytes(t, k);
  std::vector<std::byte> w(rb * static_cast<std::size_t>(rows));
  std::vector<float> row(static_cast<std::size_t>(k));
  const std::int64_t distinct = std::min<std::int64_t>(rows, 64);
  for (std::int64_t r = 0; r < distinct; ++r) {
    for (auto& v : row) v = dist(gen);
    quantize_row(t, row.data(), w.data() + static_cast<std::size_t>(r) * rb, k);
  }
  for (std::int64_t r = distinct; r < rows; ++r)
    std::memcpy(w.data() + static_cast<std::size_t>(r) * rb, w.data() + static_cast<std::size_t>(r % distinct) * rb, rb);
  return w;
}

std::vector<float> make_x(std::int64_t m, std::int64_t k) {
  std::mt19937 gen(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(m * k));
  for (auto& v : x) v = dist(gen);
  return x;
}

/// Reads a buffer far larger than the caches with the widest vector loads this CPU has (the
/// best level's f32 dot of the buffer with itself: one stream, two FMAs per 64 bytes).
void bm_read_bandwidth(benchmark::State& state) {
  const std::size_t n = k_stream_bytes / 4;
  static std::vector<float> buf(n, 1.0f);
  const kernel_table& kt = active_kernels();
  float sink = 0;
  for (auto _ : state) {
    float parts[64] = {};
    pool().run([&](int ith, int nth) {
      std::int64_t b, e;
      compute_pool::split(static_cast<std::int64_t>(n), 4096, ith, nth, b, e);
      parts[ith] = kt.dot(buf.data() + b, buf.data() + b, e - b);
    });
    for (float p : parts) sink += p;
  }
  benchmark::DoNotOptimize(sink);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(k_stream_bytes) * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

/// Reads the same buffer with each of the level's sum_words loops (1, 2 or 4 loads of 64 bytes per
/// iteration): strata bench's bandwidth probe, which the decode share is taken against.
void bm_read_words(benchmark::State& state, int loop) {
  const std::size_t n = k_stream_bytes / 8;
  // In huge pages, every page touched, as strata bench's probe buffer.
  static const strata::model::huge_pages mem = [] {
    strata::model::huge_pages m = strata::model::map_huge_pages(k_stream_bytes);
    if (m) std::memset(m.get(), 1, k_stream_bytes);
    return m;
  }();
  if (!mem) {
    state.SkipWithError("cannot map the buffer");
    return;
  }
  const auto* buf = reinterpret_cast<const std::uint64_t*>(mem.get());
  const auto sum = active_kernels().sum_words[loop];
  std::uint64_t sink = 0;
  for (auto _ : state) {
    std::uint64_t parts[64] = {};
    pool().run([&](int ith, int nth) {
      std::int64_t b, e;
      compute_pool::split(static_cast<std::int64_t>(n), 4096, ith, nth, b, e);
      parts[ith] = sum(buf + b, e - b);
    });
    for (std::uint64_t p : parts) sink += p;
  }
  benchmark::DoNotOptimize(sink);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(k_stream_bytes) * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

void bm_memcpy_bandwidth(benchmark::State& state) {
  static std::vector<char> a(k_stream_bytes / 2, 1), b(k_stream_bytes / 2, 2);
  for (auto _ : state) {
    pool().run([&](int ith, int nth) {
      std::int64_t s, e;
      compute_pool::split(static_cast<std::int64_t>(a.size()), 4096, ith, nth, s, e);
      std::memcpy(b.data() + s, a.data() + s, static_cast<std::size_t>(e - s));
    });
    benchmark::ClobberMemory();
  }
  // Read plus write traffic.
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(a.size()) * 2 * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

/// The weights packed for the level's packed kernel of type t (pack_x16) where it has one, else
/// empty.
std::vector<std::byte> packed_copy(const kernel_table& kt, dtype t, const std::vector<std::byte>& w, std::int64_t rows,
                                   std::int64_t k, bool packed) {
  if (!packed || !kt.packed_gemm[dtype_slot(t)]) return {};
  std::vector<std::byte> p(w.size());
  pack_x16(t, w.data(), rows, k, p.data());
  return p;
}

void bm_gemv(benchmark::State& state, simd_level level, dtype t, bool packed) {
  const std::int64_t rows = static_cast<std::int64_t>(k_stream_bytes / 2 / row_bytes(t, k_gemv_k));
  const auto w = make_weights(t, rows, k_gemv_k);
  const auto x = make_x(1, k_gemv_k);
  std::vector<float> y(static_cast<std::size_t>(rows));
  const kernel_table& kt = kernels_for(level);
  const auto pw = packed_copy(kt, t, w, rows, k_gemv_k, packed);
  for (auto _ : state) {
    matmul(pool(), kt, t, w.data(), rows, k_gemv_k, x.data(), 1, y.data(), pw.empty() ? nullptr : pw.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w.size()) * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

void bm_gemm(benchmark::State& state, simd_level level, dtype t, bool packed) {
  const auto w = make_weights(t, k_gemm_rows, k_gemm_k);
  const auto x = make_x(k_gemm_m, k_gemm_k);
  std::vector<float> y(static_cast<std::size_t>(k_gemm_m * k_gemm_rows));
  const kernel_table& kt = kernels_for(level);
  const auto pw = packed_copy(kt, t, w, k_gemm_rows, k_gemm_k, packed);
  for (auto _ : state) {
    matmul(pool(), kt, t, w.data(), k_gemm_rows, k_gemm_k, x.data(), k_gemm_m, y.data(), pw.empty() ? nullptr : pw.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double flops = 2.0 * k_gemm_rows * k_gemm_k * k_gemm_m;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}

/// One decode matvec (m = 1) of a real model's shape, rows x k of type t, packed where the level
/// packs t: copies of the matrix laid one after the other in huge pages, as a model's packed
/// weights are (512 MB of them: from memory, as a decode step's weights come; or one: the same
/// copy each time, from cache, what the kernel's work alone allows), each iteration the next
/// copy. Reports the weight bytes read per second.
void bm_gemv_shape(benchmark::State& state, simd_level level, dtype t, std::int64_t rows, std::int64_t k, bool from_memory) {
  const kernel_table& kt = kernels_for(level);
  const auto w = make_weights(t, rows, k);
  const auto x = make_x(1, k);
  std::vector<float> y(static_cast<std::size_t>(rows));
  const bool packed = kt.packed_gemm[dtype_slot(t)] != nullptr;
  const std::size_t bytes = w.size();
  const std::size_t copies = from_memory ? std::max<std::size_t>(1, k_stream_bytes / bytes) : 1;
  const strata::model::huge_pages all = strata::model::map_huge_pages(bytes * copies);
  if (!all) {
    state.SkipWithError("cannot map the copies");
    return;
  }
  if (packed) pack_x16(t, w.data(), rows, k, all.get());
  else std::memcpy(all.get(), w.data(), bytes);
  for (std::size_t c = 1; c < copies; ++c) std::memcpy(all.get() + c * bytes, all.get(), bytes);
  std::size_t c = 0;
  for (auto _ : state) {
    const std::byte* m = all.get() + c * bytes;
    matmul(pool(), kt, t, m, rows, k, x.data(), 1, y.data(), packed ? m : nullptr);
    benchmark::DoNotOptimize(y.data());
    c = c + 1 == copies ? 0 : c + 1;
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

/// Attention of a chunk of `rows` query rows at the end of a `context`-position sequence, in the
/// 0.4B Qwen2 shape (14 query heads, 2 kv heads of 64), on one thread: the work of one layer of
/// a prefill chunk (or, with one row, of a decode step). Reports key positions scored per second
/// per query head.
/// With heads given, the same at that model's shape (n_head, n_head_kv, head_dim).
void bm_attention_heads(benchmark::State& state, simd_level level, dtype format, int n_head, int n_head_kv, int head_dim) {
  const int rows = static_cast<int>(state.range(0)), context = static_cast<int>(state.range(1));
  constexpr int page = 32;  // kv.block_tokens by default
  const std::int64_t row_bytes = static_cast<std::int64_t>(n_head_kv * head_dim) / block_elements(format) *
                                 static_cast<std::int64_t>(block_bytes(format));
  const int pages = (context + page - 1) / page;
  std::vector<std::byte> k(static_cast<std::size_t>(pages * page * row_bytes)), v(k.size());
  const auto x = make_x(pages * page, n_head_kv * head_dim);
  for (int t = 0; t < pages * page; ++t) {
    quantize_row(format, x.data() + static_cast<std::size_t>(t) * n_head_kv * head_dim, k.data() + t * row_bytes, n_head_kv * head_dim);
    quantize_row(format, x.data() + static_cast<std::size_t>(t) * n_head_kv * head_dim, v.data() + t * row_bytes, n_head_kv * head_dim);
  }
  std::vector<std::int32_t> blocks(static_cast<std::size_t>(pages));
  for (int i = 0; i < pages; ++i) blocks[static_cast<std::size_t>(i)] = (i * 7) % pages;  // pages out of order
  const kv_page_view view{k.data(), v.data(), page * row_bytes, row_bytes, row_bytes / n_head_kv, page, blocks.data(), 0, format};
  const attention_shape shape{n_head, n_head_kv, head_dim, 0.125f, 0.0f};
  const auto q = make_x(rows, n_head * head_dim);
  std::vector<float> out(q.size());
  std::vector<attention_row> rs;
  for (int r = 0; r < rows; ++r)
    rs.push_back({q.data() + static_cast<std::size_t>(r) * n_head * head_dim, out.data() + static_cast<std::size_t>(r) * n_head * head_dim, 0,
                  context - rows + r});
  const attention_fn fn = attention_for(level);
  for (auto _ : state) {
    fn(shape, view, rs.data(), rows, 0, n_head);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["Mkeys/s"] = benchmark::Counter(static_cast<double>(rows) * context * n_head * static_cast<double>(state.iterations()) / 1e6,
                                                 benchmark::Counter::kIsRate);
  state.counters["KV_GB/s"] = benchmark::Counter(2.0 * static_cast<double>(context) * static_cast<double>(row_bytes) *
                                                     static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}

void bm_attention(benchmark::State& state, simd_level level, dtype format) { bm_attention_heads(state, level, format, 14, 2, 64); }

void register_all() {
  benchmark::RegisterBenchmark("read_bandwidth", bm_read_bandwidth)->UseRealTime()->MinTime(1.0);
  for (int loop = 0; loop < k_read_loops; ++loop)
    benchmark::RegisterBenchmark(("read_words/" + std::to_string(1 << loop)).c_str(), bm_read_words, loop)->UseRealTime()->MinTime(1.0);
  benchmark::RegisterBenchmark("memcpy_bandwidth", bm_memcpy_bandwidth)->UseRealTime()->MinTime(1.0);
  // The decode matvecs of SmolLM2-135M (q4_1; its tied q8_0 output) and Gemma 3 270M (q5_0,
  // q8_0, q4_K, q6_K; its q8_0 output), at the best level, from memory and from cache.
  struct shape {
    dtype t;
    std::int64_t rows, k;
  };
  const shape shapes[] = {{dtype::q4_1, 576, 576},    {dtype::q4_1, 1536, 576},  {dtype::q4_1, 576, 1536}, {dtype::q8_0, 49152, 576},
                          {dtype::q5_0, 1024, 640},   {dtype::q5_0, 2048, 640},  {dtype::q8_0, 256, 640},  {dtype::q4_k, 640, 1024},
                          {dtype::q4_k, 640, 2048},   {dtype::q6_k, 640, 2048},  {dtype::q8_0, 262144, 640}};
  const simd_level best = best_simd_level();
  for (const shape& sh : shapes)
    for (bool from_memory : {true, false}) {
      // The output matrices (30 and 178 MB) fit no core's cache.
      if (!simd_level_enabled(best) || (!from_memory && static_cast<std::size_t>(sh.rows) * row_bytes(sh.t, sh.k) > (std::size_t{4} << 20)))
        continue;
      const std::string name = std::string("gemv_shape/") + simd_level_name(best) + "/" + dtype_name(sh.t) + "/" + std::to_string(sh.rows) +
                               "x" + std::to_string(sh.k) + (from_memory ? "/memory" : "/cache");
      benchmark::RegisterBenchmark(name.c_str(), bm_gemv_shape, best, sh.t, sh.rows, sh.k, from_memory)->UseRealTime()->MinTime(0.5);
    }
  // Decode attention (one row) at SmolLM2-135M's heads (9 / 3 of 64) and Gemma 3 270M's (4 / 1 of
  // 256), at the best level. Reports GB/s of KV read too.
  if (simd_level_enabled(best)) {
    struct heads {
      const char* name;
      int n_head, n_head_kv, head_dim;
    };
    for (const heads& h : {heads{"smollm2", 9, 3, 64}, heads{"gemma3", 4, 1, 256}})
      for (dtype f : {dtype::f16, dtype::q8_0}) {
        const std::string name = std::string("attention_decode/") + h.name + "/" + simd_level_name(best) + "/" + dtype_name(f);
        benchmark::RegisterBenchmark(name.c_str(), bm_attention_heads, best, f, h.n_head, h.n_head_kv, h.head_dim)
            ->Args({1, 576})
            ->Args({1, 3000})
            ->Args({1, 32768})  // 25 / 34 MB of f16 keys and values: from memory
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.5);
      }
  }
  const dtype types[] = {dtype::q8_0, dtype::q4_k, dtype::q4_0, dtype::q4_1, dtype::q5_0, dtype::q5_1,
                         dtype::iq4_nl, dtype::mxfp4, dtype::q5_k, dtype::q6_k, dtype::f16, dtype::bf16, dtype::f32};
  for (simd_level level : {simd_level::scalar, simd_level::avx2, simd_level::avx512}) {
    if (!simd_level_enabled(level)) continue;
    for (dtype t : types) {
      const std::string suffix = std::string(simd_level_name(level)) + "/" + dtype_name(t);
      benchmark::RegisterBenchmark(("gemv/" + suffix).c_str(), bm_gemv, level, t, false)->UseRealTime()->MinTime(1.0);
    }
    for (dtype t : types) {
      if (!kernels_for(level).packed_gemm[dtype_slot(t)]) continue;
      const std::string suffix = std::string(simd_level_name(level)) + "/" + dtype_name(t) + "_x16";
      benchmark::RegisterBenchmark(("gemv/" + suffix).c_str(), bm_gemv, level, t, true)->UseRealTime()->MinTime(1.0);
      benchmark::RegisterBenchmark(("gemm_m512/" + suffix).c_str(), bm_gemm, level, t, true)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(1.0);
    }
    for (dtype t : types) {
      const std::string suffix = std::string(simd_level_name(level)) + "/" + dtype_name(t);
      benchmark::RegisterBenchmark(("gemm_m512/" + suffix).c_str(), bm_gemm, level, t, false)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(level == simd_level::scalar ? 0.1 : 1.0);
    }
    for (dtype f : {dtype::f16, dtype::q8_0, dtype::q4_0}) {
      const std::string suffix = std::string(simd_level_name(level)) + "/" + dtype_name(f);
      benchmark::RegisterBenchmark(("attention/" + suffix).c_str(), bm_attention, level, f)
          ->Args({1, 576})
          ->Args({1, 3000})
          ->Args({10, 3000})
          ->Args({24, 3000})
          ->Args({512, 1024})
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(level == simd_level::scalar ? 0.1 : 0.5);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      g_threads = std::max(1, std::atoi(argv[i + 1]));
      for (int j = i; j + 2 < argc; ++j) argv[j] = argv[j + 2];
      argc -= 2;
      break;
    }
  }
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
