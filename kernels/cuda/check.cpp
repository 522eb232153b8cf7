// Checks every CUDA kernel against the CPU kernels of kernels/ on fresh random inputs and returns
// non-zero when one fails. The seed is printed; STRATA_TEST_SEED reruns with the same inputs.
//
// Tolerances, each against a double-precision or CPU reference:
//  - matvec, float weights: f32 sums of k products of values in [-1, 1]; rounding grows like
//    sqrt(k) * 2^-24, so 2e-5 relative (L2) leaves room for k = 14336.
//  - matvec, quantized weights: x is rounded to 8 bits per 32 values (as the CPU path rounds it,
//    per 32 or 256), and the kernels sum exact integer products per block; against the exact
//    product of the weights with that rounded x, only the f32 sums of the block products remain:
//    1e-5. Against the unrounded x the error is the rounding's, about 4e-3 here (the CPU's own
//    matmul shows the same), checked below 2e-2.
//  - a batch's rows equal the same rows computed alone to 1e-6 (the same sums, another kernel).
//  - rms_norm, swiglu: one f32 operation chain per value (the CPU sums squares in double): 1e-5, 1e-6.
//  - rope: the same angles (the inverse frequencies are computed on the host as the CPU does),
//    sincosf within 2 ulp: 1e-5 absolute on values in [-1, 1].
//  - gemm: activations and dequantized weights rounded to f16 (2^-11 relative each), products
//    summed in f32 on the tensor cores: 2e-3 relative against the exact product.
//  - attention (check_attention.cpp): f32 with exp by ex2.approx: 1e-4 relative, over f16 and over
//    q8_0 pages (the CPU's quantize_row bytes); the q8_0 KV store: those bytes exactly.
//  - prefill attention (check_prefill.cpp): queries and probabilities as two f16 parts each for
//    the tensor cores (about 22 bits), sums in f32: 1e-4 relative, as the decode kernel.
//  - the fused steps (check_fused.cpp): bit for bit against the kernels they replace.
//  - a chain of programmatic launches (norm, then matvec, 200 rounds): bit for bit against the
//    same kernels queued one at a time.

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "kernels/compute_pool.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/matvec.hpp"
#include "kernels/cuda/ops.hpp"
#include "kernels/matmul.hpp"
#include "kernels/ops.hpp"
#include "kernels/quants.hpp"
#include "kernels/simd.hpp"

namespace strata::kernels::cuda::checks {
namespace {

constexpr double k_float_tolerance = 2e-5;
constexpr double k_quant_tolerance = 1e-5, k_rounding_bound = 2e-2;
constexpr double k_batch_tolerance = 1e-6;

/// x rounded as quantize_act rounds it: levels round(x * 127 / amax) per 32 values, times amax / 127.
std::vector<float> rounded_activations(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (std::size_t b = 0; b < x.size(); b += 32) {
    float amax = 0.0f;
    for (std::size_t j = b; j < b + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f, d = amax / 127.0f;
    for (std::size_t j = b; j < b + 32; ++j) r[j] = std::clamp(std::nearbyint(x[j] * inv), -127.0f, 127.0f) * d;
  }
  return r;
}

void check_matvec(verdicts& v, std::mt19937& rng, compute_pool& pool, dtype t, std::int64_t rows, std::int64_t k) {
  const int n_max = k_matvec_max_batch;
  const auto wf = uniform(rng, static_cast<std::size_t>(rows * k));
  const auto x = uniform(rng, static_cast<std::size_t>(n_max * k));
  std::vector<std::byte> w(row_bytes(t, k) * static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) quantize_row(t, wf.data() + r * k, w.data() + r * row_bytes(t, k), k);
  const device_matrix m = upload_matrix(t, w.data(), rows, k, nullptr);
  const device_buffer xd = to_device(x);
  act_q8 xq = make_act_q8(k, n_max);
  const bool quantized = t != dtype::f16 && t != dtype::bf16;
  if (quantized) quantize_act(xd.as<float>(), n_max, xq, nullptr);

  std::vector<float> alone(static_cast<std::size_t>(n_max * rows));
  for (int n : {1, 3, 8}) {
    const std::size_t out = static_cast<std::size_t>(n * rows);
    std::vector<float> exact(out), ref(out), cpu(out);
    matmul_reference(t, w.data(), rows, k, x.data(), n, exact.data());
    if (quantized) matmul_reference(t, w.data(), rows, k, rounded_activations(x).data(), n, ref.data());
    else ref = exact;
    matmul(pool, kernels_for(simd_level::scalar), t, w.data(), rows, k, x.data(), n, cpu.data());
    const device_buffer yd = poisoned(out);
    matvec(m, xd.as<float>(), quantized ? &xq : nullptr, n, yd.as<float>(), nullptr);
    check(cudaDeviceSynchronize(), "matvec");
    const auto y = to_host(yd, out);
    const double err = rel_l2(y.data(), ref.data(), out), err_exact = rel_l2(y.data(), exact.data(), out);
    const double err_cpu = rel_l2(cpu.data(), exact.data(), out);
    char what[240];
    std::snprintf(what, sizeof what, "matvec %s %lldx%lld n=%d: error %.3g (against unrounded x %.3g, the CPU's %.3g)",
                  dtype_name(t), static_cast<long long>(rows), static_cast<long long>(k), n, err, err_exact, err_cpu);
    v.expect(err <= (quantized ? k_quant_tolerance : k_float_tolerance) && err_exact <= k_rounding_bound, what);
    if (n == 1) {
      // Every row alone, to compare the batched kernel's rows with.
      for (int b = 0; b < n_max; ++b) {
        const device_buffer yb = poisoned(static_cast<std::size_t>(rows));
        act_q8 xb = make_act_q8(k, 1);
        const float* xrow = xd.as<float>() + static_cast<std::size_t>(b * k);
        if (quantized) quantize_act(xrow, 1, xb, nullptr);
        matvec(m, xrow, quantized ? &xb : nullptr, 1, yb.as<float>(), nullptr);
        const auto yr = to_host(yb, static_cast<std::size_t>(rows));
        std::memcpy(alone.data() + b * rows, yr.data(), yr.size() * sizeof(float));
      }
    } else {
      v.expect(rel_l2(y.data(), alone.data(), out) <= k_batch_tolerance,
               std::string("matvec ") + dtype_name(t) + " batch of " + std::to_string(n) + " equals its rows alone");
    }
  }
}

/// Three matrices of one type in one matvec_many launch give what three matvecs give, bit for bit;
/// the second is added to what its y held (`add`), which must equal that y plus its matvec.
void check_matvec_many(verdicts& v, std::mt19937& rng, dtype t) {
  const std::int64_t k = 512, rows[3] = {37, 5, 130};
  const int n = 3;
  const auto x = uniform(rng, static_cast<std::size_t>(n * k));
  const device_buffer xd = to_device(x);
  act_q8 xq = make_act_q8(k, n);
  quantize_act(xd.as<float>(), n, xq, nullptr);
  std::vector<device_matrix> ms;
  std::vector<device_buffer> fused, alone;
  std::vector<matvec_out> outs;
  const auto held = uniform(rng, static_cast<std::size_t>(n * rows[1]));
  for (std::int64_t r : rows) {
    const auto wf = uniform(rng, static_cast<std::size_t>(r * k));
    std::vector<std::byte> w(row_bytes(t, k) * static_cast<std::size_t>(r));
    for (std::int64_t i = 0; i < r; ++i) quantize_row(t, wf.data() + i * k, w.data() + i * row_bytes(t, k), k);
    ms.push_back(upload_matrix(t, w.data(), r, k, nullptr));
    fused.push_back(ms.size() == 2 ? to_device(held) : poisoned(static_cast<std::size_t>(n * r)));
    alone.push_back(poisoned(static_cast<std::size_t>(n * r)));
  }
  for (std::size_t i = 0; i < ms.size(); ++i) {
    outs.push_back({&ms[i], fused[i].as<float>(), i == 1});
    matvec(ms[i], xd.as<float>(), &xq, n, alone[i].as<float>(), nullptr);
  }
  matvec_many(outs.data(), static_cast<int>(outs.size()), xd.as<float>(), &xq, n, nullptr);
  bool same = true;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    const std::size_t count = static_cast<std::size_t>(n * rows[i]);
    const auto a = to_host(fused[i], count), b = to_host(alone[i], count);
    for (std::size_t j = 0; j < count; ++j) same &= std::isfinite(a[j]) && a[j] == (i == 1 ? held[j] + b[j] : b[j]);
  }
  v.expect(same, std::string("matvec_many ") + dtype_name(t) + " of 37, 5 (added to y) and 130 rows equals three matvecs");
}

void check_gemm(verdicts& v, std::mt19937& rng, dtype t, int m, std::int64_t rows, std::int64_t k) {
  const auto wf = uniform(rng, static_cast<std::size_t>(rows * k));
  const auto x = uniform(rng, static_cast<std::size_t>(m * k));
  std::vector<std::byte> w(row_bytes(t, k) * static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) quantize_row(t, wf.data() + r * k, w.data() + r * row_bytes(t, k), k);
  const device_matrix dm = upload_matrix(t, w.data(), rows, k, nullptr);
  const device_buffer xd = to_device(x), x16(x.size() * 2), yd = poisoned(static_cast<std::size_t>(m * rows));
  to_f16(xd.as<float>(), x16.data(), static_cast<std::int64_t>(x.size()), nullptr);
  const std::size_t ws_bytes = gemm_workspace(dm, m);  // > 0: k split over several blocks
  const device_buffer ws(ws_bytes);
  gemm(dm, x16.data(), m, yd.as<float>(), nullptr, ws.data(), ws_bytes);
  const auto y = to_host(yd, static_cast<std::size_t>(m * rows));
  std::vector<float> ref(y.size());
  matmul_reference(t, w.data(), rows, k, x.data(), m, ref.data());
  const double err = rel_l2(y.data(), ref.data(), y.size());
  char what[160];
  std::snprintf(what, sizeof what, "gemm %s m=%d %lldx%lld%s: error %.3g", dtype_name(t), m, static_cast<long long>(rows),
                static_cast<long long>(k), ws_bytes > 0 ? " (k split)" : "", err);
  v.expect(err <= 2e-3, what);
}

void check_rms_norm(verdicts& v, std::mt19937& rng) {
  for (int dim : {896, 4096}) {
    const int n = 5;
    const auto x = uniform(rng, static_cast<std::size_t>(n * dim), -3.0f, 3.0f);
    const auto w = uniform(rng, static_cast<std::size_t>(dim));
    for (bool weighted : {true, false}) {
      std::vector<float> ref(x.size());
      for (int r = 0; r < n; ++r)
        kernels::rms_norm(x.data() + r * dim, weighted ? w.data() + 0 : nullptr, ref.data() + r * dim, dim, 1e-6f);
      const device_buffer xd = to_device(x), wd = to_device(w), yd = poisoned(x.size());
      rms_norm(xd.as<float>(), weighted ? wd.as<float>() : nullptr, yd.as<float>(), n, dim, 1e-6f, nullptr);
      const auto y = to_host(yd, x.size());
      const double err = rel_l2(y.data(), ref.data(), y.size());
      v.expect(err <= 1e-5, fmt("rms_norm dim=%.0f: error %.3g", dim, err) + (weighted ? " (weighted)" : ""));
    }
  }
}

/// rms_norm_quantize gives what rms_norm then quantize_act give, bit for bit (at 896 values and
/// at 4096, where it keeps the row in registers); add adds.
void check_fused_ops_at(verdicts& v, std::mt19937& rng, int dim) {
  const int n = 3;
  const auto x = uniform(rng, static_cast<std::size_t>(n * dim), -3.0f, 3.0f);
  const auto w = uniform(rng, static_cast<std::size_t>(dim));
  const device_buffer xd = to_device(x), wd = to_device(w), y1 = poisoned(x.size()), y2 = poisoned(x.size());
  act_q8 a = make_act_q8(dim, n), b = make_act_q8(dim, n);
  rms_norm(xd.as<float>(), wd.as<float>(), y1.as<float>(), n, dim, 1e-6f, nullptr);
  quantize_act(y1.as<float>(), n, a, nullptr);
  rms_norm_quantize(xd.as<float>(), wd.as<float>(), y2.as<float>(), n, dim, 1e-6f, b, nullptr);
  check(cudaDeviceSynchronize(), "rms_norm_quantize");
  auto bytes = [](const device_buffer& d) {
    std::vector<std::byte> h(d.bytes());
    d.download(h.data(), h.size(), nullptr);
    return h;
  };
  v.expect(bytes(y1) == bytes(y2) && bytes(a.q) == bytes(b.q) && bytes(a.ds) == bytes(b.ds),
           fmt("rms_norm_quantize dim=%.0f equals rms_norm then quantize_act, bit for bit", dim));
  const device_buffer sum = poisoned(x.size());
  add(xd.as<float>(), y1.as<float>(), sum.as<float>(), static_cast<std::int64_t>(x.size()), nullptr);
  const auto got = to_host(sum, x.size()), y = to_host(y1, x.size());
  std::vector<float> ref(x.size());
  kernels::add(ref.data(), x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  v.expect(got == ref, "add equals the CPU's add");
}

void check_fused_ops(verdicts& v, std::mt19937& rng) {
  for (int dim : {896, 4096}) check_fused_ops_at(v, rng, dim);
}

void check_rope(verdicts& v, std::mt19937& rng) {
  const int n_tok = 7, n_heads = 8, hd = 128;
  std::uniform_int_distribution<int> pos_d(0, 32767);
  for (int n_rot : {128, 64}) {
    for (bool neox : {false, true}) {
      for (bool with_factors : {false, true}) {
        const float base = neox ? 1e6f : 1e4f, fscale = with_factors ? 0.25f : 1.0f;
        const auto x = uniform(rng, static_cast<std::size_t>(n_tok * n_heads * hd));
        const auto factors = uniform(rng, static_cast<std::size_t>(n_rot / 2), 1.0f, 8.0f);
        std::vector<std::int32_t> pos(n_tok);
        for (auto& p : pos) p = pos_d(rng);
        std::vector<float> ref = x, cs(static_cast<std::size_t>(n_rot));
        for (int t = 0; t < n_tok; ++t) {
          rope_angles(pos[t], n_rot, base, fscale, with_factors ? factors.data() : nullptr, cs.data());
          rope_rotate(ref.data() + t * n_heads * hd, n_heads, hd, n_rot, cs.data(), neox);
        }
        const device_buffer xd = to_device(x), pd = to_device(pos), fd = to_device(factors),
                            id = to_device(rope_inv_freq(n_rot, base));
        rope_args a;
        a.pos = pd.as<std::int32_t>();
        a.inv_freq = id.as<float>();
        a.factors = with_factors ? fd.as<float>() : nullptr;
        a.freq_scale = fscale;
        a.n_rot = n_rot;
        a.neox = neox;
        rope(xd.as<float>(), n_tok, n_heads, hd, a, nullptr);
        const auto y = to_host(xd, x.size());
        double worst = 0;
        for (std::size_t i = 0; i < y.size(); ++i)
          worst = std::isfinite(y[i]) ? std::max(worst, std::fabs(static_cast<double>(y[i]) - ref[i])) : INFINITY;
        v.expect(worst <= 1e-5, fmt("rope n_rot=%.0f: largest difference %.3g", n_rot, worst) + (neox ? " neox" : " normal") +
                                    (with_factors ? " with factors" : ""));
      }
    }
  }
}

void check_swiglu(verdicts& v, std::mt19937& rng) {
  const std::size_t n = 100003;
  const auto g = uniform(rng, n, -8.0f, 8.0f), u = uniform(rng, n, -2.0f, 2.0f);
  std::vector<float> ref = g;
  scalar::silu(ref.data(), static_cast<std::int64_t>(n));
  for (std::size_t i = 0; i < n; ++i) ref[i] *= u[i];
  const device_buffer gd = to_device(g), ud = to_device(u), yd = poisoned(n);
  swiglu(gd.as<float>(), ud.as<float>(), yd.as<float>(), static_cast<std::int64_t>(n), nullptr);
  const auto y = to_host(yd, n);
  const double err = rel_l2(y.data(), ref.data(), n);
  v.expect(err <= 1e-6, fmt("swiglu n=%.0f: error %.3g", static_cast<double>(n), err));
}

/// A chain of programmatic launches as a decode layer queues them gives the bits of the same
/// kernels queued one at a time: a norm quantizes one of four rows into the one activation buffer,
/// then a q8_0 matvec (4096 x 4096) reads it, 200 times with no wait between, each product
/// compared bit for bit with that row's product alone. The matvec starts while the norm still
/// writes (pdl.cuh), and earlier matvecs have read the same buffer with other values: a stale
/// activation read (the non-coherent path) shows as a round that differs.
void check_pdl_chain(verdicts& v, std::mt19937& rng) {
  const int k = 4096, rows = 4096, inputs = 4, rounds = 200;
  const dtype t = dtype::q8_0;
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  const auto wf = uniform(rng, static_cast<std::size_t>(rows) * k);
  std::vector<std::byte> w(row_bytes(t, k) * static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r) quantize_row(t, wf.data() + static_cast<std::size_t>(r) * k, w.data() + r * row_bytes(t, k), k);
  const device_matrix m = upload_matrix(t, w.data(), rows, k, nullptr);
  const device_buffer nw = to_device(uniform(rng, k)), xs = to_device(uniform(rng, static_cast<std::size_t>(inputs) * k, -3.0f, 3.0f));
  act_q8 xq = make_act_q8(k, 1);
  const device_buffer alone = poisoned(static_cast<std::size_t>(inputs) * rows), chain = poisoned(static_cast<std::size_t>(rounds) * rows);
  for (int i = 0; i < inputs; ++i) {
    rms_norm_quantize(xs.as<float>() + static_cast<std::size_t>(i) * k, nw.as<float>(), nullptr, 1, k, 1e-6f, xq, s);
    matvec(m, nullptr, &xq, 1, alone.as<float>() + static_cast<std::size_t>(i) * rows, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  }
  for (int r = 0; r < rounds; ++r) {
    rms_norm_quantize(xs.as<float>() + static_cast<std::size_t>(r % inputs) * k, nw.as<float>(), nullptr, 1, k, 1e-6f, xq, s);
    matvec(m, nullptr, &xq, 1, chain.as<float>() + static_cast<std::size_t>(r) * rows, s);
  }
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
  const auto a = to_host(alone, static_cast<std::size_t>(inputs) * rows), c = to_host(chain, static_cast<std::size_t>(rounds) * rows);
  int differ = 0;
  for (int r = 0; r < rounds; ++r)
    if (std::memcmp(c.data() + static_cast<std::size_t>(r) * rows, a.data() + static_cast<std::size_t>(r % inputs) * rows,
                    static_cast<std::size_t>(rows) * sizeof(float)) != 0)
      ++differ;
  v.expect(differ == 0, fmt("PDL chain of norm and matvec: %.0f of %.0f rounds differ from the kernels alone", differ, rounds));
}

std::uint32_t seed() {
  const char* s = std::getenv("STRATA_TEST_SEED");
  return s && *s ? static_cast<std::uint32_t>(std::strtoul(s, nullptr, 10)) : std::random_device{}();
}

}  // namespace
}  // namespace strata::kernels::cuda::checks

/// `strata_cuda_check [GROUP...]`: every check, or only the groups named (matvec, norm, rope,
/// attention, prefill, fused, pdl; e.g. the new kernels' under compute-sanitizer, which is slow).
int main(int argc, char** argv) {
  using namespace strata::kernels;
  using namespace strata::kernels::cuda::checks;
  const auto want = [&](std::string_view group) {
    if (argc < 2) return true;
    for (int i = 1; i < argc; ++i)
      if (group == argv[i]) return true;
    return false;
  };
  const std::uint32_t s = seed();
  std::printf("seed %u (STRATA_TEST_SEED=%u reruns it)\n", s, s);
  std::mt19937 rng(s);
  verdicts v;
  try {
    compute_pool pool(1);
    for (dtype t : {dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0, dtype::q4_1, dtype::q4_k, dtype::q5_k, dtype::q6_k}) {
      if (!want("matvec")) break;
      check_matvec(v, rng, pool, t, 37, 768);
      check_matvec(v, rng, pool, t, 130, 4096);
      check_matvec(v, rng, pool, t, 19, 14336);  // long rows: a block's warps share each row group
      check_matvec_many(v, rng, t);
      check_gemm(v, rng, t, 77, 130, 512);
      check_gemm(v, rng, t, 130, 64, 4096);
      check_gemm(v, rng, t, 40, 300, 2048);  // few rows: k split, a ragged last tile of weights
      if (t == dtype::f16 || t == dtype::q4_k) check_gemm(v, rng, t, 300, 4096, 256);  // tiles enough: k whole
    }
    if (want("norm")) {
      check_rms_norm(v, rng);
      check_fused_ops(v, rng);
    }
    if (want("rope")) {
      check_rope(v, rng);
      check_swiglu(v, rng);
    }
    if (want("attention")) check_attention(v, rng);
    if (want("prefill")) check_prefill_attention(v, rng);
    if (want("fused")) check_fused(v, rng);
    if (want("pdl")) check_pdl_chain(v, rng);
  } catch (const std::exception& e) {
    std::printf("FAILED with an exception: %s\n", e.what());
    return 1;
  }
  std::printf("%d passed, %d failed (seed %u)\n", v.passed, v.failed, s);
  return v.failed == 0 ? 0 : 1;
}
