// The fused layer steps (fused.hpp) against the kernels they replace, run one after another on
// the same random inputs: every output the same bit for bit.

#include <algorithm>
#include <cstddef>
#include <numeric>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/fused.hpp"
#include "kernels/cuda/kv_store.hpp"

namespace strata::kernels::cuda::checks {
namespace {

std::vector<std::byte> bytes(const device_buffer& d) {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<std::byte> h(d.bytes());
  d.download(h.data(), h.size(), nullptr);
  return h;
}

device_buffer copy_of(const device_buffer& d) {
  device_buffer c(d.bytes());
  check(cudaMemcpy(c.data(), d.data(), d.bytes(), cudaMemcpyDeviceToDevice), "cudaMemcpy");
  return c;
}

void check_add_norm(verdicts& v, std::mt19937& rng) {
  for (int dim : {896, 4096}) {
    for (bool weighted : {true, false}) {
      const int n = 5;
      const auto x = uniform(rng, static_cast<std::size_t>(n * dim), -3.0f, 3.0f), r = uniform(rng, x.size(), -1.0f, 1.0f);
      const auto w = uniform(rng, static_cast<std::size_t>(dim));
      const device_buffer x1 = to_device(x), x2 = to_device(x), rd = to_device(r), wd = to_device(w), y1 = poisoned(x.size()),
                          y2 = poisoned(x.size());
      act_q8 a = make_act_q8(dim, n), b = make_act_q8(dim, n);
      const float* wp = weighted ? wd.as<float>() : nullptr;
      add(x1.as<float>(), rd.as<float>(), x1.as<float>(), static_cast<std::int64_t>(x.size()), nullptr);
      rms_norm_quantize(x1.as<float>(), wp, y1.as<float>(), n, dim, 1e-5f, a, nullptr);
      add_rms_norm_quantize(x2.as<float>(), rd.as<float>(), wp, y2.as<float>(), n, dim, 1e-5f, b, nullptr);
      v.expect(bytes(x1) == bytes(x2) && bytes(y1) == bytes(y2) && bytes(a.q) == bytes(b.q) && bytes(a.ds) == bytes(b.ds),
               fmt("add_rms_norm_quantize dim=%.0f equals add then rms_norm_quantize, bit for bit", dim) +
                   (weighted ? " (weighted)" : ""));
    }
  }
}

void check_rope_kv(verdicts& v, std::mt19937& rng) {
  struct shape {
    int n, n_head, n_head_kv, head_dim, n_rot;
    bool neox;
  };
  for (const shape& sh : {shape{1, 32, 8, 128, 128, false}, shape{6, 8, 4, 64, 64, true}, shape{3, 4, 2, 256, 128, true},
                          shape{9, 16, 16, 32, 32, false}}) {
    const int kvd = sh.n_head_kv * sh.head_dim, page = 32, n_slots = 4 * page;
    const auto q = uniform(rng, static_cast<std::size_t>(sh.n * sh.n_head * sh.head_dim));
    const auto k = uniform(rng, static_cast<std::size_t>(sh.n * kvd)), vv = uniform(rng, k.size());
    std::vector<std::int32_t> slots(static_cast<std::size_t>(n_slots)), pos(static_cast<std::size_t>(sh.n));
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(static_cast<std::size_t>(sh.n));
    std::uniform_int_distribution<int> pos_d(0, 20000);
    for (auto& p : pos) p = pos_d(rng);
    const auto factors = uniform(rng, static_cast<std::size_t>(sh.n_rot / 2), 1.0f, 8.0f);
    const device_buffer q1 = to_device(q), q2 = to_device(q), k1 = to_device(k), k2 = to_device(k), vd = to_device(vv),
                        sd = to_device(slots), pd = to_device(pos), fd = to_device(factors),
                        id = to_device(rope_inv_freq(sh.n_rot, sh.neox ? 1e6f : 5e5f));
    const std::size_t pool = static_cast<std::size_t>(n_slots) * kvd / 2;  // f16 pages, counted as floats
    const device_buffer kp1 = poisoned(pool), vp1 = poisoned(pool);
    const device_buffer kp2 = copy_of(kp1), vp2 = copy_of(vp1);
    rope_args ra;
    ra.pos = pd.as<std::int32_t>();
    ra.inv_freq = id.as<float>();
    ra.factors = sh.neox ? fd.as<float>() : nullptr;
    ra.freq_scale = sh.neox ? 0.5f : 1.0f;
    ra.n_rot = sh.n_rot;
    ra.neox = sh.neox;
    rope(q1.as<float>(), sh.n, sh.n_head, sh.head_dim, ra, nullptr);
    rope(k1.as<float>(), sh.n, sh.n_head_kv, sh.head_dim, ra, nullptr);
    store_kv_f16(k1.as<float>(), vd.as<float>(), sh.n, kvd, sd.as<std::int32_t>(), kp1.data(), vp1.data(), nullptr);
    rope_kv_args a;
    a.q = q2.as<float>();
    a.k = k2.as<float>();
    a.v = vd.as<float>();
    a.n = sh.n;
    a.n_head = sh.n_head;
    a.n_head_kv = sh.n_head_kv;
    a.head_dim = sh.head_dim;
    a.slots = sd.as<std::int32_t>();
    a.k_pages = kp2.data();
    a.v_pages = vp2.data();
    rope_store_kv(a, ra, nullptr);
    v.expect(bytes(q1) == bytes(q2) && bytes(k1) == bytes(k2) && bytes(kp1) == bytes(kp2) && bytes(vp1) == bytes(vp2),
             fmt("rope_store_kv (%.0f rows, head %.0f", sh.n, sh.head_dim) + (sh.neox ? ", neox)" : ")") +
                 " equals rope, rope and store_kv_f16, bit for bit");
  }
}

void check_swiglu_quantize(verdicts& v, std::mt19937& rng) {
  for (int dim : {1536, 14336}) {
    const int n = 3;
    const auto g = uniform(rng, static_cast<std::size_t>(n * dim), -8.0f, 8.0f), u = uniform(rng, g.size(), -2.0f, 2.0f);
    const device_buffer g1 = to_device(g), g2 = to_device(g), ud = to_device(u);
    act_q8 a = make_act_q8(dim, n), b = make_act_q8(dim, n);
    swiglu(g1.as<float>(), ud.as<float>(), g1.as<float>(), static_cast<std::int64_t>(g.size()), nullptr);
    quantize_act(g1.as<float>(), n, a, nullptr);
    swiglu_quantize(g2.as<float>(), ud.as<float>(), n, dim, b, nullptr);
    v.expect(bytes(g1) == bytes(g2) && bytes(a.q) == bytes(b.q) && bytes(a.ds) == bytes(b.ds),
             fmt("swiglu_quantize dim=%.0f equals swiglu then quantize_act, bit for bit", dim));
  }
}

}  // namespace

void check_fused(verdicts& v, std::mt19937& rng) {
  check_add_norm(v, rng);
  check_rope_kv(v, rng);
  check_swiglu_quantize(v, rng);
}

}  // namespace strata::kernels::cuda::checks
