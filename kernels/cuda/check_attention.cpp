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
  const random_pages pages = make_pages(rng, k_page, c.n_head_kv, hd, c.last);
  const std::size_t q_values = static_cast<std::size_t>(n_seq * c.n_head * hd);
  const auto q = uniform(rng, q_values, -2.0f, 2.0f);
  const attention_shape shape = pages.shape(c.n_head, c.softcap);
  std::vector<float> ref(q_values);
  for (int s = 0; s < n_seq; ++s) {
    const std::size_t at = static_cast<std::size_t>(s * c.n_head * hd);
    pages.cpu_attention(shape, s, q.data() + at, ref.data() + at, c.first[static_cast<std::size_t>(s)], c.last[static_cast<std::size_t>(s)]);
  }
  const device_buffer kd = to_device(pages.k), vd = to_device(pages.v), td = to_device(pages.table), fd = to_device(c.first),
                      ld = to_device(c.last), qd = to_device(q), od = poisoned(q_values);
  const kv_pages_f16 kv = pages.on_device(kd, vd);
  decode_rows r;
  r.q = qd.as<float>();
  r.out = od.as<float>();
  r.n_seq = n_seq;
  r.n_head = c.n_head;
  r.blocks = td.as<std::int32_t>();
  r.blocks_stride = pages.stride;
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

random_pages make_pages(std::mt19937& rng, int page_tokens, int n_head_kv, int head_dim, const std::vector<int>& last) {
  random_pages p;
  p.page_tokens = page_tokens;
  p.n_head_kv = n_head_kv;
  p.head_dim = head_dim;
  p.stride = (*std::max_element(last.begin(), last.end()) + 1 + page_tokens - 1) / page_tokens;
  // Each sequence's pages, scattered over a shared pool in random order.
  int n_pages = 3;
  for (int l : last) n_pages += l / page_tokens + 1;
  std::vector<std::int32_t> order(static_cast<std::size_t>(n_pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  p.table.assign(last.size() * static_cast<std::size_t>(p.stride), 0);
  for (std::size_t s = 0, next = 0; s < last.size(); ++s)
    for (int i = 0; i <= last[s] / page_tokens; ++i) p.table[s * static_cast<std::size_t>(p.stride) + static_cast<std::size_t>(i)] = order[next++];
  const std::size_t pool_values = static_cast<std::size_t>(n_pages) * page_tokens * n_head_kv * head_dim;
  for (auto* pool : {&p.k, &p.v}) {
    const auto f = uniform(rng, pool_values);
    pool->resize(pool_values);
    for (std::size_t i = 0; i < pool_values; ++i) (*pool)[i] = fp32_to_fp16(f[i]);
  }
  return p;
}

attention_shape random_pages::shape(int n_head, float softcap) const {
  attention_shape a;
  a.n_head = n_head;
  a.n_head_kv = n_head_kv;
  a.head_dim = head_dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  a.softcap = softcap;
  return a;
}

void random_pages::cpu_attention(const attention_shape& a, int seq, const float* q, float* out, int first, int last) const {
  kv_page_view view;
  view.k = reinterpret_cast<const std::byte*>(k.data());
  view.v = reinterpret_cast<const std::byte*>(v.data());
  view.row_bytes = static_cast<std::int64_t>(n_head_kv) * head_dim * 2;
  view.head_bytes = head_dim * 2;
  view.page_bytes = page_tokens * view.row_bytes;
  view.page_tokens = page_tokens;
  view.blocks = table.data() + static_cast<std::size_t>(seq) * stride;
  attention_row row;
  row.q = q;
  row.out = out;
  row.first = first;
  row.last = last;
  scalar::attention(a, view, &row, 1, 0, a.n_head);
}

kv_pages_f16 random_pages::on_device(const device_buffer& kd, const device_buffer& vd) const {
  kv_pages_f16 kv;
  kv.k = kd.data();
  kv.v = vd.data();
  kv.page_tokens = page_tokens;
  kv.n_head_kv = n_head_kv;
  kv.head_dim = head_dim;
  return kv;
}

void check_attention(verdicts& v, std::mt19937& rng) {
  run_case(v, rng, {128, 32, 8, {0, 0, 0}, {999, 0, 4099}});
  run_case(v, rng, {64, 14, 2, {0, 500}, {76, 599}, 30.0f});
  run_case(v, rng, {256, 8, 8, {0}, {4999}});
  run_case(v, rng, {128, 40, 4, {0, 17}, {299, 1999}});
  run_case(v, rng, {128, 32, 8, {0}, {16383}});
  run_case(v, rng, {32, 8, 4, {0, 3}, {700, 40}});  // the shared test models' heads
}

}  // namespace strata::kernels::cuda::checks
