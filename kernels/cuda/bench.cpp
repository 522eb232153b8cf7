// GPU kernel figures: decode matvec bandwidth per weight type on Llama-3-8B shapes (32k vocab),
// and paged decode attention at 1k to 16k tokens of context over f16 and q8_0 pages. Each case rotates over enough
// copies of its data to overflow the L2 cache, runs its launches as one captured CUDA graph, and
// reports the median of several timed replays. Prints a table and writes one JSON file.
//
//   strata_cuda_bench [out.json [parts]]    parts: matvec,sets,gemm,attention,prefill (default all)
//   STRATA_CUDA_BENCH_TYPES=q4_K,q6_K       only these weight types in matvec and sets (default all)

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/device.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/matvec.hpp"
#include "kernels/cuda/prefill_attention.hpp"
#include "kernels/quants.hpp"

namespace strata::kernels::cuda {
namespace {

constexpr double k_h100_bandwidth = 3.35e12;  // bytes/s, the datasheet's HBM3 figure
constexpr std::size_t k_rotate_bytes = 256u << 20;  // at least this much data per case: 5x the L2

/// Median seconds per call of `body` (called `calls` times per replay of one captured graph).
double time_graph(cudaStream_t stream, int calls, const std::function<void(int)>& body) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  for (int i = 0; i < calls; ++i) body(i);
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  std::vector<float> ms;
  for (int rep = 0; rep < 12; ++rep) {
    check(cudaEventRecord(a, stream), "cudaEventRecord");
    check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    check(cudaEventRecord(b, stream), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime");
    if (rep >= 2) ms.push_back(t);  // the first replays warm up
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] / 1e3 / calls;
}

/// `rows` GGUF rows of type t: 64 random rows quantized once, tiled over the matrix (the bytes
/// are what is timed, and quantizing every row would take the bench longer than its runs).
std::vector<std::byte> tiled_matrix(dtype t, std::int64_t rows, std::int64_t k, std::mt19937& rng) {
  constexpr std::int64_t tile = 64;
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> f(static_cast<std::size_t>(tile * k));
  for (auto& x : f) x = d(rng);
  const std::size_t rb = row_bytes(t, k);
  std::vector<std::byte> w(rb * static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < std::min(tile, rows); ++r) quantize_row(t, f.data() + r * k, w.data() + r * rb, k);
  for (std::int64_t r = tile; r < rows; ++r) std::copy_n(w.data() + (r % tile) * rb, rb, w.data() + r * rb);
  return w;
}

std::string matvec_case(cudaStream_t stream, dtype t, std::int64_t rows, std::int64_t k, int n, std::mt19937& rng) {
  const std::vector<std::byte> w = tiled_matrix(t, rows, k, rng);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<device_matrix> copies;
  copies.push_back(upload_matrix(t, w.data(), rows, k, stream));
  const std::size_t bytes = copies[0].bytes();
  while (copies.size() * bytes < k_rotate_bytes) copies.push_back(upload_matrix(t, w.data(), rows, k, stream));
  std::vector<float> x(static_cast<std::size_t>(n * k));
  for (auto& v : x) v = d(rng);
  device_buffer xd(x.size() * sizeof(float)), yd(static_cast<std::size_t>(n * rows) * sizeof(float));
  xd.upload(x.data(), xd.bytes(), stream);
  act_q8 xq = make_act_q8(k, n);
  quantize_act(xd.as<float>(), n, xq, stream);
  const int calls = static_cast<int>(copies.size()) * std::max(1, static_cast<int>(40 / copies.size()));
  const double s = time_graph(stream, calls, [&](int i) {
    matvec(copies[static_cast<std::size_t>(i) % copies.size()], xd.as<float>(), &xq, n, yd.as<float>(), stream);
  });
  const double gbs = static_cast<double>(bytes) / s / 1e9;
  std::printf("matvec  %-5s %6lld x %-6lld n=%d  %8.2f us  %7.1f GB/s  %5.1f%%\n", dtype_name(t), static_cast<long long>(rows),
              static_cast<long long>(k), n, s * 1e6, gbs, 100.0 * gbs * 1e9 / k_h100_bandwidth);
  char buf[300];
  std::snprintf(buf, sizeof buf,
                "{\"type\":\"%s\",\"rows\":%lld,\"k\":%lld,\"batch\":%d,\"bytes\":%zu,\"us\":%.3f,\"gb_per_s\":%.1f,\"pct_of_3350\":%.1f}",
                dtype_name(t), static_cast<long long>(rows), static_cast<long long>(k), n, bytes, s * 1e6, gbs,
                100.0 * gbs * 1e9 / k_h100_bandwidth);
  return buf;
}

/// Decode attention of n_seq rows of `context` positions (Llama-3-8B heads: 32 query, 8 kv of
/// 128) over f16 pages (kv_bits 16) or q8_0 pages (8: random levels, scales in [2^-8, 2^-6)).
std::string attention_case(cudaStream_t stream, int context, int n_seq, int splits, int kv_bits) {
  constexpr int n_head = 32, n_kv = 8, hd = 128, page = 32;
  const int pages = (context + page - 1) / page;
  const std::size_t pool_values = static_cast<std::size_t>(n_seq) * pages * page * n_kv * hd;
  const std::size_t pool_bytes = kv_bits == 8 ? pool_values / 32 * 34 : pool_values * 2;
  const std::size_t kv_bytes = 2 * pool_bytes;
  int layers = static_cast<int>(std::max<std::size_t>(1, (k_rotate_bytes + kv_bytes - 1) / kv_bytes));
  std::vector<device_buffer> k, v;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> bits(0x3000, 0x3BFF);  // f16 values in [0.125, 1)
  std::vector<std::uint16_t> host(pool_bytes / 2);
  for (auto& h : host) h = static_cast<std::uint16_t>(bits(rng));
  if (kv_bits == 8) {  // each block's first two bytes are its f16 scale; the rest random levels
    std::uniform_int_distribution<int> scale(0x1C00, 0x23FF), level(0, 255);
    auto* b = reinterpret_cast<unsigned char*>(host.data());
    for (std::size_t i = 0; i < pool_bytes; ++i) b[i] = static_cast<unsigned char>(level(rng));
    for (std::size_t i = 0; i < pool_bytes; i += 34) {
      const auto d = static_cast<std::uint16_t>(scale(rng));
      std::memcpy(b + i, &d, 2);
    }
  }
  for (int l = 0; l < layers; ++l) {
    k.emplace_back(pool_bytes);
    v.emplace_back(pool_bytes);
    k.back().upload(host.data(), pool_bytes, stream);
    v.back().upload(host.data(), pool_bytes, stream);
  }
  std::vector<std::int32_t> table(static_cast<std::size_t>(n_seq * pages));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::int32_t>(i);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<std::int32_t> first(static_cast<std::size_t>(n_seq), 0), last(static_cast<std::size_t>(n_seq), context - 1);
  std::vector<float> q(static_cast<std::size_t>(n_seq * n_head * hd), 0.05f);
  device_buffer td(table.size() * 4), fd(first.size() * 4), ld(last.size() * 4), qd(q.size() * 4), od(q.size() * 4);
  td.upload(table.data(), td.bytes(), stream);
  fd.upload(first.data(), fd.bytes(), stream);
  ld.upload(last.data(), ld.bytes(), stream);
  qd.upload(q.data(), qd.bytes(), stream);
  kv_pages_f16 kv;
  kv.page_tokens = page;
  kv.n_head_kv = n_kv;
  kv.head_dim = hd;
  kv.bits = kv_bits;
  decode_rows r;
  r.q = qd.as<float>();
  r.out = od.as<float>();
  r.n_seq = n_seq;
  r.n_head = n_head;
  r.blocks = td.as<std::int32_t>();
  r.blocks_stride = pages;
  r.first = fd.as<std::int32_t>();
  r.last = ld.as<std::int32_t>();
  r.max_positions = context;
  r.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  r.splits = splits;
  const std::size_t ws_bytes = decode_attention_workspace(kv, r);
  device_buffer ws(ws_bytes);
  const int calls = layers * std::max(1, 40 / layers);
  const double s = time_graph(stream, calls, [&](int i) {
    kv.k = k[static_cast<std::size_t>(i % layers)].data();
    kv.v = v[static_cast<std::size_t>(i % layers)].data();
    decode_attention(kv, r, ws.data(), ws_bytes, stream);
  });
  const double gbs = static_cast<double>(kv_bytes) / s / 1e9;
  std::printf("attention %s ctx=%-6d rows=%-3d splits=%-3d%s %8.2f us  %7.1f GB/s  %5.1f%%\n", kv_bits == 8 ? "q8_0" : "f16 ",
              context, n_seq, decode_attention_splits(kv, r), splits > 0 ? " (forced)" : "         ", s * 1e6, gbs,
              100.0 * gbs * 1e9 / k_h100_bandwidth);
  char buf[300];
  std::snprintf(buf, sizeof buf,
                "{\"kv_bits\":%d,\"context\":%d,\"rows\":%d,\"splits_forced\":%s,\"n_head\":%d,\"n_head_kv\":%d,\"head_dim\":%d,\"splits\":%d,\"kv_bytes\":%zu,\"us\":%.3f,"
                "\"gb_per_s\":%.1f,\"pct_of_3350\":%.1f}",
                kv_bits, context, n_seq, splits > 0 ? "true" : "false", n_head, n_kv, hd, decode_attention_splits(kv, r), kv_bytes, s * 1e6, gbs,
                100.0 * gbs * 1e9 / k_h100_bandwidth);
  return buf;
}

/// Prefill attention of one prompt of `rows` tokens from position 0 (Llama-3-8B heads: 32 query,
/// 8 kv, 128 values), its pages in random order: the causal products' TFLOP/s (4 flops per query
/// head, position and value attended: q.k and p v).
std::string prefill_case(cudaStream_t stream, int rows) {
  constexpr int n_head = 32, n_kv = 8, hd = 128, page = 32;
  const int pages = (rows + page - 1) / page;
  const std::size_t pool_values = static_cast<std::size_t>(pages) * page * n_kv * hd;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> bits(0x3000, 0x3BFF);  // f16 values in [0.125, 1)
  std::vector<std::uint16_t> host(pool_values);
  for (auto& h : host) h = static_cast<std::uint16_t>(bits(rng));
  device_buffer k(pool_values * 2), v(pool_values * 2);
  k.upload(host.data(), k.bytes(), stream);
  v.upload(host.data(), v.bytes(), stream);
  std::vector<std::int32_t> table(static_cast<std::size_t>(pages)), first(static_cast<std::size_t>(rows), 0), last(first.size());
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::int32_t>(i);
  std::shuffle(table.begin(), table.end(), rng);
  for (std::size_t i = 0; i < last.size(); ++i) last[i] = static_cast<std::int32_t>(i);
  const int per_tile = prefill_tile_rows(n_head, n_kv, hd);
  std::vector<prefill_tile> tiles;
  for (int r = 0; r < rows; r += per_tile) tiles.push_back({r, std::min(per_tile, rows - r)});
  std::reverse(tiles.begin(), tiles.end());  // the longest first, as the GPU layers order them
  std::vector<float> q(static_cast<std::size_t>(rows) * n_head * hd, 0.05f);
  device_buffer td(table.size() * 4), fd(first.size() * 4), ld(last.size() * 4), qd(q.size() * 4), od(q.size() * 4),
      tiles_d(tiles.size() * sizeof(prefill_tile));
  td.upload(table.data(), td.bytes(), stream);
  fd.upload(first.data(), fd.bytes(), stream);
  ld.upload(last.data(), ld.bytes(), stream);
  qd.upload(q.data(), qd.bytes(), stream);
  tiles_d.upload(tiles.data(), tiles_d.bytes(), stream);
  const kv_pages_f16 kv{k.data(), v.data(), page, n_kv, hd};
  decode_rows r;
  r.q = qd.as<float>();
  r.out = od.as<float>();
  r.n_head = n_head;
  r.blocks = td.as<std::int32_t>();
  r.first = fd.as<std::int32_t>();
  r.last = ld.as<std::int32_t>();
  r.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  prefill_attention(kv, r, tiles_d.as<prefill_tile>(), static_cast<int>(tiles.size()), stream);  // the attributes, outside the capture
  const double s = time_graph(stream, 4, [&](int) {
    prefill_attention(kv, r, tiles_d.as<prefill_tile>(), static_cast<int>(tiles.size()), stream);
  });
  const double flops = 4.0 * n_head * hd * (static_cast<double>(rows) * (rows + 1) / 2);
  std::printf("prefill attention rows=%-5d %10.2f us  %7.1f TFLOP/s\n", rows, s * 1e6, flops / s / 1e12);
  char buf[200];
  std::snprintf(buf, sizeof buf, "{\"rows\":%d,\"n_head\":%d,\"n_head_kv\":%d,\"head_dim\":%d,\"us\":%.3f,\"tflops\":%.2f}", rows,
                n_head, n_kv, hd, s * 1e6, flops / s / 1e12);
  return buf;
}

/// A layer's q, k and v (4096, 1024 and 1024 rows of 4096) or its gate and up (2 x 14336 rows),
/// as one matvec_many launch or as one matvec each.
std::string fused_case(cudaStream_t stream, dtype t, bool gate_up, bool fused, std::mt19937& rng) {
  const std::vector<std::int64_t> rows = gate_up ? std::vector<std::int64_t>{14336, 14336} : std::vector<std::int64_t>{4096, 1024, 1024};
  constexpr std::int64_t k = 4096;
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<std::vector<std::byte>> host;
  for (std::int64_t r : rows) host.push_back(tiled_matrix(t, r, k, rng));
  // Sets of matrices, enough of them to overflow the L2 cache.
  std::vector<std::vector<device_matrix>> sets;
  std::size_t bytes = 0;
  while (sets.size() * bytes < k_rotate_bytes) {
    sets.emplace_back();
    bytes = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      sets.back().push_back(upload_matrix(t, host[i].data(), rows[i], k, stream));
      bytes += sets.back().back().bytes();
    }
  }
  std::vector<float> x(static_cast<std::size_t>(k));
  for (auto& v : x) v = d(rng);
  device_buffer xd(x.size() * sizeof(float)), yd(3 * 14336 * sizeof(float));
  xd.upload(x.data(), xd.bytes(), stream);
  act_q8 xq = make_act_q8(k, 1);
  quantize_act(xd.as<float>(), 1, xq, stream);
  const int calls = static_cast<int>(sets.size()) * std::max(1, static_cast<int>(40 / sets.size()));
  const double s = time_graph(stream, calls, [&](int c) {
    const auto& set = sets[static_cast<std::size_t>(c) % sets.size()];
    std::vector<matvec_out> outs;
    std::size_t at = 0;
    for (const auto& m : set) {
      outs.push_back({&m, yd.as<float>() + at});
      at += static_cast<std::size_t>(m.rows);
    }
    if (fused) matvec_many(outs.data(), static_cast<int>(outs.size()), xd.as<float>(), &xq, 1, stream);
    else for (const auto& o : outs) matvec(*o.w, xd.as<float>(), &xq, 1, o.y, stream);
  });
  const double gbs = static_cast<double>(bytes) / s / 1e9;
  const char* name = gate_up ? "gate+up" : "q,k,v";
  std::printf("matvec  %-5s %-8s %-9s %8.2f us  %7.1f GB/s  %5.1f%%\n", dtype_name(t), name, fused ? "one launch" : "separate",
              s * 1e6, gbs, 100.0 * gbs * 1e9 / k_h100_bandwidth);
  char buf[300];
  std::snprintf(buf, sizeof buf, "{\"type\":\"%s\",\"set\":\"%s\",\"one_launch\":%s,\"bytes\":%zu,\"us\":%.3f,\"gb_per_s\":%.1f,\"pct_of_3350\":%.1f}",
                dtype_name(t), name, fused ? "true" : "false", bytes, s * 1e6, gbs, 100.0 * gbs * 1e9 / k_h100_bandwidth);
  return buf;
}

/// The prefill GEMM: m activation rows against one matrix, TFLOP/s (2 m rows k operations).
std::string gemm_case(cudaStream_t stream, dtype t, std::int64_t rows, std::int64_t k, int m, std::mt19937& rng) {
  const std::vector<std::byte> w = tiled_matrix(t, rows, k, rng);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  const device_matrix dm = upload_matrix(t, w.data(), rows, k, stream);
  std::vector<float> x(static_cast<std::size_t>(m * k));
  for (auto& v : x) v = d(rng);
  device_buffer xd(x.size() * 4), x16(x.size() * 2), yd(static_cast<std::size_t>(m * rows) * 4);
  xd.upload(x.data(), xd.bytes(), stream);
  to_f16(xd.as<float>(), x16.data(), static_cast<std::int64_t>(x.size()), stream);
  const std::size_t ws_bytes = gemm_workspace(dm, m);
  device_buffer ws(ws_bytes);
  gemm(dm, x16.data(), m, yd.as<float>(), stream, ws.data(), ws_bytes);  // once outside the capture: it sets the kernel's attributes
  const double s = time_graph(stream, 10, [&](int) { gemm(dm, x16.data(), m, yd.as<float>(), stream, ws.data(), ws_bytes); });
  const double tflops = 2.0 * m * static_cast<double>(rows) * static_cast<double>(k) / s / 1e12;
  std::printf("gemm    %-5s %6lld x %-6lld m=%d  %8.2f us  %7.1f TFLOP/s\n", dtype_name(t), static_cast<long long>(rows),
              static_cast<long long>(k), m, s * 1e6, tflops);
  char buf[200];
  std::snprintf(buf, sizeof buf, "{\"type\":\"%s\",\"rows\":%lld,\"k\":%lld,\"m\":%d,\"us\":%.3f,\"tflops\":%.2f}", dtype_name(t),
                static_cast<long long>(rows), static_cast<long long>(k), m, s * 1e6, tflops);
  return buf;
}

/// A device-to-device copy of 1 GiB: the bandwidth the card reaches at all (read + written bytes).
double copy_bandwidth(cudaStream_t stream) {
  const std::size_t n = 1u << 30;
  device_buffer a(n), b(n);
  check(cudaMemsetAsync(a.data(), 1, n, stream), "cudaMemset");
  const double s = time_graph(stream, 4, [&](int) { check(cudaMemcpyAsync(b.data(), a.data(), n, cudaMemcpyDeviceToDevice, stream), "copy"); });
  return 2.0 * static_cast<double>(n) / s / 1e9;
}

}  // namespace
}  // namespace strata::kernels::cuda

int main(int argc, char** argv) {
  using namespace strata::kernels;
  using namespace strata::kernels::cuda;
  try {
    cudaStream_t stream;
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    std::printf("device %s, %d multiprocessors, %.0f MB L2\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6);
    const double copy = copy_bandwidth(stream);
    std::printf("device-to-device copy: %.1f GB/s (read + written)\n", copy);
    std::mt19937 rng(1);
    // argv[2]: the parts to run (matvec, sets, gemm, attention, prefill; default all).
    const std::string parts = argc > 2 ? argv[2] : "matvec,sets,gemm,attention,prefill";
    auto wants = [&](const char* part) { return parts.find(part) != std::string::npos; };
    const char* types_env = std::getenv("STRATA_CUDA_BENCH_TYPES");
    const std::string types = types_env ? std::string(",") + types_env + "," : "";
    auto wants_type = [&](dtype t) { return types.empty() || types.find(std::string(",") + dtype_name(t) + ",") != std::string::npos; };
    std::string mv, at, pa;
    const std::int64_t shapes[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {32000, 4096}};
    for (dtype t : {dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0, dtype::q4_1, dtype::q4_k, dtype::q5_k, dtype::q6_k})
      for (const auto& sh : shapes)
        for (int n : {1, 8}) {
          if (!wants("matvec") || !wants_type(t) || (n == 8 && sh[0] != 14336)) continue;  // the batched kernel on one shape
          mv += (mv.empty() ? "" : ",\n    ") + matvec_case(stream, t, sh[0], sh[1], n, rng);
        }
    std::string fu;
    for (dtype t : {dtype::q8_0, dtype::q4_0, dtype::q4_k, dtype::q6_k})
      for (bool gate_up : {false, true})
        for (bool fused : {false, true})
          if (wants("sets") && wants_type(t)) fu += (fu.empty() ? "" : ",\n    ") + fused_case(stream, t, gate_up, fused, rng);
    std::string ge;
    for (dtype t : {dtype::f16, dtype::q8_0, dtype::q4_0, dtype::q4_k, dtype::q6_k})
      for (const auto& sh : {std::array<std::int64_t, 2>{4096, 4096}, std::array<std::int64_t, 2>{14336, 4096}})
        for (int m : {64, 512, 4096})
          if (wants("gemm")) ge += (ge.empty() ? "" : ",\n    ") + gemm_case(stream, t, sh[0], sh[1], m, rng);
    // Each context with the split chosen (0), then with a few forced ones to compare.
    // Then q8_0 pages at the lengths the decode bench takes, and 64 rows.
    const int cases[][4] = {{128, 1, 0, 16},    {128, 1, 2, 16},    {1024, 1, 0, 16},  {1024, 1, 16, 16}, {1024, 1, 8, 16},
                            {1024, 64, 0, 16},  {1024, 64, 2, 16},  {4096, 1, 0, 16},  {4096, 1, 32, 16}, {16384, 1, 0, 16},
                            {16384, 1, 16, 16}, {16384, 1, 33, 16}, {128, 1, 0, 8},    {1024, 1, 0, 8},   {1024, 64, 0, 8},
                            {4096, 1, 0, 8},    {16384, 1, 0, 8}};
    for (const auto& c : cases)
      if (wants("attention")) at += (at.empty() ? "" : ",\n    ") + attention_case(stream, c[0], c[1], c[2], c[3]);
    for (int rows : {512, 4096})
      if (wants("prefill")) pa += (pa.empty() ? "" : ",\n    ") + prefill_case(stream, rows);
    std::string json = "{\n  \"device\": \"" + std::string(prop.name) + "\",\n  \"multiprocessors\": " +
                       std::to_string(prop.multiProcessorCount) + ",\n  \"copy_gb_per_s\": " + std::to_string(copy) +
                       ",\n  \"matvec\": [\n    " + mv + "\n  ],\n  \"matvec_sets\": [\n    " + fu + "\n  ],\n  \"gemm\": [\n    " + ge + "\n  ],\n  \"attention\": [\n    " + at + "\n  ],\n  \"prefill_attention\": [\n    " + pa + "\n  ]\n}\n";
    if (argc > 1) {
      FILE* f = std::fopen(argv[1], "w");
      if (!f) throw std::runtime_error(std::string("cannot write ") + argv[1]);
      std::fputs(json.c_str(), f);
      std::fclose(f);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata_cuda_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
