// Paged decode attention on the GPU against the CPU's scalar attention over the same pages.

#include <algorithm>
#include <numeric>

#include "kernels/attention.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/quants.hpp"

namespace strata::kernels::cuda::checks {
namespace {

constexpr double k_attention_tolerance = 1e-4;
constexpr int k_page = 32;

struct attention_case {
  int head_dim, n_head, n_head_kv;
  std::vector<int> first, last;
  float softcap = 0.0f;
};

void run_case(verdicts& v, std::mt19937& rng, const attention_case& c) {
  const int n_seq = static_cast<int>(c.last.size()), hd = c.head_dim;
  const int max_positions = *std::max_element(c.last.begin(), c.last.end()) + 1;
  const int stride = (max_positions + k_page - 1) / k_page;
  // Each sequence's pages, scattered over a shared pool in random order.
  int n_pages = 3;
  for (int l : c.last) n_pages += l / k_page + 1;
  std::vector<std::int32_t> order(static_cast<std::size_t>(n_pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::int32_t> table(static_cast<std::size_t>(n_seq * stride), 0);
  for (int s = 0, next = 0; s < n_seq; ++s)
    for (int p = 0; p <= c.last[static_cast<std::size_t>(s)] / k_page; ++p) table[static_cast<std::size_t>(s * stride + p)] = order[next++];
  const std::size_t row_values = static_cast<std::size_t>(c.n_head_kv * hd), pool_values = n_pages * k_page * row_values;
  std::vector<std::uint16_t> k(pool_values), vv(pool_values);
  for (auto* pool : {&k, &vv}) {
    const auto f = uniform(rng, pool_values);
    for (std::size_t i = 0; i < pool_values; ++i) (*pool)[i] = fp32_to_fp16(f[i]);
  }
  const std::size_t q_values = static_cast<std::size_t>(n_seq * c.n_head * hd);
  const auto q = uniform(rng, q_values, -2.0f, 2.0f);

  std::vector<float> ref(q_values);
  attention_shape shape;
  shape.n_head = c.n_head;
  shape.n_head_kv = c.n_head_kv;
  shape.head_dim = hd;
  shape.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  shape.softcap = c.softcap;
  for (int s = 0; s < n_seq; ++s) {
    kv_page_view view;
    view.k = reinterpret_cast<const std::byte*>(k.data());
    view.v = reinterpret_cast<const std::byte*>(vv.data());
    view.row_bytes = static_cast<std::int64_t>(row_values * 2);
    view.head_bytes = hd * 2;
    view.page_bytes = k_page * view.row_bytes;
    view.page_tokens = k_page;
    view.blocks = table.data() + s * stride;
    attention_row row;
    row.q = q.data() + static_cast<std::size_t>(s * c.n_head * hd);
    row.out = ref.data() + static_cast<std::size_t>(s * c.n_head * hd);
    row.first = c.first[static_cast<std::size_t>(s)];
    row.last = c.last[static_cast<std::size_t>(s)];
    scalar::attention(shape, view, &row, 1, 0, c.n_head);
  }

  const device_buffer kd = to_device(k), vd = to_device(vv), td = to_device(table), fd = to_device(c.first),
                      ld = to_device(c.last), qd = to_device(q), od = poisoned(q_values);
  kv_pages_f16 kv;
  kv.k = kd.data();
  kv.v = vd.data();
  kv.page_tokens = k_page;
  kv.n_head_kv = c.n_head_kv;
  kv.head_dim = hd;
  decode_rows r;
  r.q = qd.as<float>();
  r.out = od.as<float>();
  r.n_seq = n_seq;
  r.n_head = c.n_head;
  r.blocks = td.as<std::int32_t>();
  r.blocks_stride = stride;
  r.first = fd.as<std::int32_t>();
  r.last = ld.as<std::int32_t>();
  r.max_positions = max_positions;
  r.scale = shape.scale;
  r.softcap = c.softcap;
  const std::size_t ws_bytes = decode_attention_workspace(kv, r);
  const device_buffer ws(ws_bytes);
  decode_attention(kv, r, ws.data(), ws_bytes, nullptr);
  check(cudaDeviceSynchronize(), "decode_attention");
  const auto out = to_host(od, q_values);
  const double err = rel_l2(out.data(), ref.data(), q_values);
  char what[200];
  std::snprintf(what, sizeof what, "attention hd=%d heads=%d/%d rows=%d longest=%d splits=%d%s: error %.3g", hd, c.n_head,
                c.n_head_kv, n_seq, max_positions, decode_attention_splits(kv, r), c.softcap > 0 ? " softcap" : "", err);
  v.expect(err <= k_attention_tolerance, what);
}

}  // namespace

void check_attention(verdicts& v, std::mt19937& rng) {
  run_case(v, rng, {128, 32, 8, {0, 0, 0}, {999, 0, 4099}});
  run_case(v, rng, {64, 14, 2, {0, 500}, {76, 599}, 30.0f});
  run_case(v, rng, {256, 8, 8, {0}, {4999}});
  run_case(v, rng, {128, 40, 4, {0, 17}, {299, 1999}});
  run_case(v, rng, {128, 32, 8, {0}, {16383}});
  run_case(v, rng, {32, 8, 4, {0, 3}, {700, 40}});  // the shared test models' heads
}

}  // namespace strata::kernels::cuda::checks
