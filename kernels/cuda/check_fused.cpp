// The fused layer steps (fused.hpp) against the kernels they replace, run one after another on
// the same random inputs: every output the same bit for bit.

#include <algorithm>
#include <cstddef>
#include <numeric>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/fused.hpp"
#include "kernels/cuda/kv_store.hpp"
#include "kernels/quants.hpp"

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

    // Rows of both formats in one launch (odd rows into q8_0 pages, even rows into f16 ones),
    // against the turned k1 stored row by row by store_kv_f16 and store_kv_q8_0.
    std::vector<std::int32_t> s16(slots), s8(slots);
    for (std::size_t r = 0; r < slots.size(); ++r) (r % 2 ? s16 : s8)[r] = -1;
    const std::size_t pool8 = static_cast<std::size_t>(n_slots) * (kvd / 32 * 34) / 4;  // q8_0 pages, counted as floats
    const device_buffer q3 = to_device(q), k3 = to_device(k), s16d = to_device(s16), s8d = to_device(s8);
    const device_buffer kp3 = poisoned(pool), vp3 = poisoned(pool), kq3 = poisoned(pool8), vq3 = poisoned(pool8);
    const device_buffer kp4 = copy_of(kp3), vp4 = copy_of(vp3), kq4 = copy_of(kq3), vq4 = copy_of(vq3);
    for (int r = 0; r < sh.n; ++r) {
      const float* kr = k1.as<float>() + static_cast<std::size_t>(r) * kvd;
      const float* vr = vd.as<float>() + static_cast<std::size_t>(r) * kvd;
      if (r % 2) store_kv_q8_0(kr, vr, 1, kvd, s8d.as<std::int32_t>() + r, kq4.data(), vq4.data(), nullptr);
      else store_kv_f16(kr, vr, 1, kvd, s16d.as<std::int32_t>() + r, kp4.data(), vp4.data(), nullptr);
    }
    rope_kv_args m = a;
    m.q = q3.as<float>();
    m.k = k3.as<float>();
    m.slots = s16d.as<std::int32_t>();
    m.k_pages = kp3.data();
    m.v_pages = vp3.data();
    m.slots_q8 = s8d.as<std::int32_t>();
    m.k_pages_q8 = kq3.data();
    m.v_pages_q8 = vq3.data();
    rope_store_kv(m, ra, nullptr);
    v.expect(bytes(q1) == bytes(q3) && bytes(k1) == bytes(k3) && bytes(kp3) == bytes(kp4) && bytes(vp3) == bytes(vp4) &&
                 bytes(kq3) == bytes(kq4) && bytes(vq3) == bytes(vq4),
             fmt("rope_store_kv (%.0f rows, head %.0f", sh.n, sh.head_dim) + (sh.neox ? ", neox)" : ")") +
                 " into f16 and q8_0 pages (alternate rows) equals rope, rope, store_kv_f16 and store_kv_q8_0 row by row, bit for bit");
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

device_matrix random_matrix(std::mt19937& rng, dtype t, std::int64_t rows, std::int64_t k) {
  const auto wf = uniform(rng, static_cast<std::size_t>(rows * k));
  std::vector<std::byte> w(row_bytes(t, k) * static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) quantize_row(t, wf.data() + r * k, w.data() + r * row_bytes(t, k), k);
  return upload_matrix(t, w.data(), rows, k, nullptr);
}

/// q, k and v of one decode row with RoPE and the page writes in the matvecs' epilogue
/// (matvec_many_rope) against matvec_many then rope_store_kv: q, k and both pages bit for bit.
/// q and k of type tq, v of type tv: one launch when they agree, else two (as Q4_K_M's layers).
void check_matvec_rope(verdicts& v, std::mt19937& rng) {
  struct shape {
    dtype tq, tv;
    int n_head, n_head_kv, head_dim, n_rot;
    std::int64_t k;
    bool factors;
  };
  for (const shape& sh : {shape{dtype::q4_k, dtype::q4_k, 8, 2, 128, 128, 512, false}, shape{dtype::q4_k, dtype::q6_k, 8, 4, 64, 64, 768, true},
                          shape{dtype::q6_k, dtype::q6_k, 4, 2, 128, 64, 256, false}, shape{dtype::q8_0, dtype::q8_0, 4, 1, 64, 64, 512, true},
                          shape{dtype::q4_k, dtype::q6_k, 4, 2, 128, 128, 8192, false}}) {
    if (!matvec_rope_supported(sh.tq, 1) || !matvec_rope_supported(sh.tv, 1)) {
      v.expect(false, std::string("matvec_rope_supported refuses ") + dtype_name(sh.tq) + " or " + dtype_name(sh.tv));
      continue;
    }
    const int qd = sh.n_head * sh.head_dim, kvd = sh.n_head_kv * sh.head_dim, page = 16, n_slots = 4 * page;
    const device_matrix wq = random_matrix(rng, sh.tq, qd, sh.k), wk = random_matrix(rng, sh.tq, kvd, sh.k),
                        wv = random_matrix(rng, sh.tv, kvd, sh.k);
    const device_buffer xd = to_device(uniform(rng, static_cast<std::size_t>(sh.k)));
    act_q8 xq = make_act_q8(sh.k, 1);
    quantize_act(xd.as<float>(), 1, xq, nullptr);
    std::uniform_int_distribution<int> pos_d(0, 30000), slot_d(0, n_slots - 1);
    const std::vector<std::int32_t> pos{pos_d(rng)}, slot{slot_d(rng)};
    const device_buffer pd = to_device(pos), sd = to_device(slot), fd = to_device(uniform(rng, static_cast<std::size_t>(sh.n_rot / 2), 1.0f, 8.0f)),
                        id = to_device(rope_inv_freq(sh.n_rot, 5e5f));
    const std::size_t pool = static_cast<std::size_t>(n_slots) * kvd / 2;  // f16 pages, counted as floats
    const device_buffer q1 = poisoned(static_cast<std::size_t>(qd)), k1 = poisoned(static_cast<std::size_t>(kvd)),
                        v1 = poisoned(static_cast<std::size_t>(kvd)), kp1 = poisoned(pool), vp1 = poisoned(pool);
    const device_buffer q2 = copy_of(q1), k2 = copy_of(k1), v2 = copy_of(v1), kp2 = copy_of(kp1), vp2 = copy_of(vp1);
    // The reference: the products, then rope_store_kv.
    const matvec_out ref[3] = {{&wq, q1.as<float>()}, {&wk, k1.as<float>()}, {&wv, v1.as<float>()}};
    const bool one = sh.tq == sh.tv;
    matvec_many(ref, one ? 3 : 2, nullptr, &xq, 1, nullptr);
    if (!one) matvec_many(ref + 2, 1, nullptr, &xq, 1, nullptr);
    rope_args ra;
    ra.pos = pd.as<std::int32_t>();
    ra.inv_freq = id.as<float>();
    ra.factors = sh.factors ? fd.as<float>() : nullptr;
    ra.freq_scale = sh.factors ? 0.5f : 1.0f;
    ra.n_rot = sh.n_rot;
    rope_kv_args a;
    a.q = q1.as<float>();
    a.k = k1.as<float>();
    a.v = v1.as<float>();
    a.n = 1;
    a.n_head = sh.n_head;
    a.n_head_kv = sh.n_head_kv;
    a.head_dim = sh.head_dim;
    a.slots = sd.as<std::int32_t>();
    a.k_pages = kp1.data();
    a.v_pages = vp1.data();
    rope_store_kv(a, ra, nullptr);
    // The epilogue.
    matvec_rope rp;
    rp.angles = ra;
    rp.head_dim = sh.head_dim;
    rp.slots = sd.as<std::int32_t>();
    rp.k_pages = kp2.data();
    rp.v_pages = vp2.data();
    rp.kv_dim = kvd;
    const matvec_out fused[3] = {{&wq, q2.as<float>()}, {&wk, k2.as<float>()}, {&wv, v2.as<float>()}};
    matvec_rope first = rp;
    first.rotate = 3u;
    first.to_k = 1;
    first.to_v = one ? 2 : -1;
    matvec_many_rope(fused, one ? 3 : 2, &xq, first, nullptr);
    if (!one) {
      matvec_rope second = rp;
      second.to_v = 0;
      matvec_many_rope(fused + 2, 1, &xq, second, nullptr);
    }
    v.expect(bytes(q1) == bytes(q2) && bytes(k1) == bytes(k2) && bytes(v1) == bytes(v2) && bytes(kp1) == bytes(kp2) &&
                 bytes(vp1) == bytes(vp2),
             std::string("matvec_many_rope ") + dtype_name(sh.tq) + "/" + dtype_name(sh.tv) +
                 fmt(" k=%.0f head %.0f", static_cast<double>(sh.k), sh.head_dim) + fmt(" n_rot %.0f", sh.n_rot) +
                 " equals the products then rope_store_kv, bit for bit");
  }
}

}  // namespace

void check_fused(verdicts& v, std::mt19937& rng) {
  check_add_norm(v, rng);
  check_rope_kv(v, rng);
  check_swiglu_quantize(v, rng);
  check_matvec_rope(v, rng);
}

}  // namespace strata::kernels::cuda::checks
