#include "kernels/simd.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/quants.hpp"

namespace strata::kernels {
namespace {

std::size_t round64(std::size_t n) { return (n + 63) / 64 * 64; }

}  // namespace

act_format act_format_for(dtype wt) {
  switch (wt) {
    case dtype::q4_0: case dtype::q4_1: case dtype::q5_0: case dtype::q5_1: case dtype::q8_0: case dtype::iq4_nl:
    case dtype::mxfp4:
      return act_format::q8_32;
    case dtype::q4_k: case dtype::q5_k: case dtype::q6_k: return act_format::q8_256;
    default: return act_format::f32;
  }
}

std::size_t act_row_bytes(act_format fmt, std::int64_t k) {
  const auto n = static_cast<std::size_t>(k);
  switch (fmt) {
    case act_format::f32: return round64(n * 4);
    case act_format::q8_32: return round64(n) + round64(n / 32 * 4) + round64(n / 32 * 4);
    case act_format::q8_256: return round64(n) + round64(n / 256 * 4) + round64(n / 16 * 4);
  }
  return 0;
}

void interleave_q8_x8(act_format fmt, const act_row* x, std::int64_t r0, std::int64_t r1, std::int64_t n, std::int64_t k,
                      std::byte* xt) {
  const bool k_quant = fmt == act_format::q8_256;
  const int values = k_quant ? 256 : 32, words = values / 4;
  const std::int64_t nb = k / values;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t c0 = r / k_interleave_rows * k_interleave_rows;
    const std::int64_t tile = std::min<std::int64_t>(k_interleave_rows, n - c0);
    // Row r's words go to every tile-th word from its column on: the levels, then the bias (or
    // the sums) and the scale.
    auto* dst = reinterpret_cast<std::uint32_t*>(xt + interleaved_q8_x8_bytes(fmt, c0, k)) + (r - c0);
    std::uint32_t level_words[64];
    for (std::int64_t b = 0; b < nb; ++b, dst += interleaved_row_block_bytes(fmt) / 4 * tile) {
      std::memcpy(level_words, x[r].qs + values * b, static_cast<std::size_t>(values));
      for (int s = 0; s < words; ++s) dst[s * tile] = level_words[s];
      std::uint32_t* after = dst + words * tile;
      if (k_quant) {
        for (int j = 0; j < 16; ++j) std::memcpy(after + j * tile, x[r].sums + 16 * b + j, 4);
        after += 16 * tile;
      } else {
        const std::int32_t bias = -128 * x[r].sums[b];
        std::memcpy(after, &bias, 4);
        after += tile;
      }
      std::memcpy(after, x[r].d + b, 4);
    }
  }
}

act_row quantize_activations(act_format fmt, const float* x, std::int64_t k, void* buf) {
  return quantize_activations(kernels_for(simd_level::scalar), fmt, x, k, buf);
}

act_row quantize_activations(const kernel_table& kt, act_format fmt, const float* x, std::int64_t k, void* buf) {
  act_row r;
  auto* b = static_cast<std::byte*>(buf);
  const auto n = static_cast<std::size_t>(k);
  switch (fmt) {
    case act_format::f32:
      std::memcpy(buf, x, n * 4);
      r.f = static_cast<const float*>(buf);
      return r;
    case act_format::q8_32:
    case act_format::q8_256: {
      // q8_32: a scale and a sum per 32; q8_256: a scale per 256 and a sum per 16.
      const int group = fmt == act_format::q8_32 ? 32 : 256, sum_group = fmt == act_format::q8_32 ? 32 : 16;
      auto* qs = reinterpret_cast<std::int8_t*>(b);
      auto* d = reinterpret_cast<float*>(b + round64(n));
      auto* sums = reinterpret_cast<std::int32_t*>(b + round64(n) + round64(n / static_cast<std::size_t>(group) * 4));
      kt.quantize_groups(x, k, group, sum_group, qs, d, sums);
      r.qs = qs, r.d = d, r.sums = sums;
      return r;
    }
  }
  return r;
}

int dtype_slot(dtype t) {
  switch (t) {
    case dtype::f32: return 0;
    case dtype::f16: return 1;
    case dtype::bf16: return 2;
    case dtype::q4_0: return 3;
    case dtype::q8_0: return 4;
    case dtype::q4_k: return 5;
    case dtype::q5_k: return 6;
    case dtype::q6_k: return 7;
    case dtype::q4_1: return 8;
    case dtype::q5_0: return 9;
    case dtype::q5_1: return 10;
    case dtype::iq4_nl: return 11;
    case dtype::mxfp4: return 12;
  }
  return 0;
}

const char* simd_level_name(simd_level level) {
  switch (level) {
    case simd_level::scalar: return "scalar";
    case simd_level::avx2: return "avx2";
    case simd_level::avx512: return "avx512";
  }
  return "?";
}

bool cpu_supports(simd_level level) {
#if defined(__x86_64__)
  switch (level) {
    case simd_level::scalar: return true;
    case simd_level::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case simd_level::avx512:
      return cpu_supports(simd_level::avx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vnni");
  }
  return false;
#else
  return level == simd_level::scalar;
#endif
}

const kernel_table& kernels_for(simd_level level) {
  static const auto tables = [] {
    struct all {
      kernel_table t[3];
    } a;
    scalar::fill_table(a.t[0]);
    a.t[1] = a.t[0];  // a level falls back to the scalar kernel wherever it has none of its own
    avx2::fill_table(a.t[1]);
    a.t[2] = a.t[1];
    avx512::fill_table(a.t[2]);
    a.t[1].level = simd_level::avx2;
    a.t[2].level = simd_level::avx512;
    return a;
  }();
  return tables.t[static_cast<int>(level)];
}

simd_level best_simd_level() {
  if (cpu_supports(simd_level::avx512)) return simd_level::avx512;
  if (cpu_supports(simd_level::avx2)) return simd_level::avx2;
  return simd_level::scalar;
}

simd_choice choose_simd_level(const char* forced, simd_level best) {
  if (!forced || !*forced) return {best, {}};
  std::string have;
  for (auto l : {simd_level::scalar, simd_level::avx2, simd_level::avx512}) {
    if (l > best) break;
    have += have.empty() ? "" : ", ";
    have += simd_level_name(l);
  }
  for (auto l : {simd_level::scalar, simd_level::avx2, simd_level::avx512}) {
    if (std::strcmp(forced, simd_level_name(l)) != 0) continue;
    if (l > best) return {l, std::string("STRATA_ISA=") + forced + ": this CPU lacks it (it has " + have + ")"};
    return {l, {}};
  }
  return {best, std::string("STRATA_ISA=") + forced + ": not a level (scalar, avx2 or avx512; this CPU has " + have + ")"};
}

simd_choice configured_simd_level() {
  const char* forced = std::getenv("STRATA_ISA");
  if (!forced || !*forced) forced = std::getenv("STRATA_KERNELS");
  return choose_simd_level(forced, best_simd_level());
}

const kernel_table& active_kernels() {
  static const kernel_table& table = []() -> const kernel_table& {
    const simd_choice choice = configured_simd_level();
    if (!choice.error.empty()) {
      // No caller can go on without kernels, and running another level than the one asked for
      // would hide the mistake.
      std::fprintf(stderr, "strata: %s\n", choice.error.c_str());
      std::_Exit(2);
    }
    return kernels_for(choice.level);
  }();
  return table;
}

bool simd_level_enabled(simd_level level) { return level <= active_kernels().level; }

}  // namespace strata::kernels
