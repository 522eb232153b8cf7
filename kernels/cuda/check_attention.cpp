// Paged decode attention on the GPU against the CPU's scalar attention over the same pages (f16
// and q8_0), and the q8_0 KV store against the CPU's quantize_row, byte for byte.

#include <algorithm>
#include <cstring>
#include <numeric>

#include "kernels/attention.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/kv_store.hpp"
#include "kernels/cuda/matvec.hpp"
#include "kernels/quants.hpp"

namespace strata::kernels::cuda::checks {
namespace {

constexpr double k_attention_tolerance = 1e-4;
constexpr int k_page = 32;

struct attention_case {
  int head_dim, n_head, n_head_kv;
  std::vector<int> first, last;
  float softcap = 0.0f;
  int bits = 16;
  int splits = 0;  // 0: as decode_attention chooses; else at most this many parts
};

void run_case(verdicts& v, std::mt19937& rng, const attention_case& c) {
  const int n_seq = static_cast<int>(c.last.size()), hd = c.head_dim;
  const int max_positions = *std::max_element(c.last.begin(), c.last.end()) + 1;
  const random_pages pages = make_pages(rng, k_page, c.n_head_kv, hd, c.last, c.bits);
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
  r.splits = c.splits;
  // The output also rounded by the attention (out_q): the bytes quantize_act makes of out.
  act_q8 rounded = make_act_q8(static_cast<std::int64_t>(c.n_head) * hd, n_seq), plain = make_act_q8(rounded.k, n_seq);
  r.out_q = rounded.q.as<std::int8_t>();
  r.out_ds = rounded.ds.as<float2>();
  const std::size_t ws_bytes = decode_attention_workspace(kv, r);
  const device_buffer ws(ws_bytes);
  decode_attention(kv, r, ws.data(), ws_bytes, nullptr);
  quantize_act(od.as<float>(), n_seq, plain, nullptr);
  check(cudaDeviceSynchronize(), "decode_attention");
  const auto out = to_host(od, q_values);
  std::vector<std::int8_t> q_got(q_values), q_want(q_values);
  std::vector<float> ds_got(q_values / 16), ds_want(ds_got.size());
  rounded.q.download(q_got.data(), q_values, nullptr);
  plain.q.download(q_want.data(), q_values, nullptr);
  rounded.ds.download(ds_got.data(), ds_got.size() * 4, nullptr);
  plain.ds.download(ds_want.data(), ds_want.size() * 4, nullptr);
  const double err = rel_l2(out.data(), ref.data(), q_values);
  char what[200];
  std::snprintf(what, sizeof what, "attention %s hd=%d heads=%d/%d rows=%d longest=%d splits=%d%s: error %.3g",
                c.bits == 8 ? "q8_0" : "f16", hd, c.n_head, c.n_head_kv, n_seq, max_positions, decode_attention_splits(kv, r),
                c.softcap > 0 ? " softcap" : "", err);
  v.expect(err <= k_attention_tolerance, what);
  std::snprintf(what, sizeof what, "attention %s hd=%d rows=%d splits=%d: its rounded output equals quantize_act's, bit for bit",
                c.bits == 8 ? "q8_0" : "f16", hd, n_seq, decode_attention_splits(kv, r));
  v.expect(q_got == q_want && std::memcmp(ds_got.data(), ds_want.data(), ds_got.size() * 4) == 0, what);
}

/// n rows of dim random keys and values stored by store_kv_q8_0 into random slots of q8_0 pools:
/// every byte of the pools as the CPU's quantize_row writes them there.
void check_store_q8_0(verdicts& v, std::mt19937& rng, int n, int dim) {
  const int slots_in_pool = 4 * n;
  const std::size_t row = static_cast<std::size_t>(dim / 32 * 34);
  std::vector<std::int32_t> slots(static_cast<std::size_t>(slots_in_pool));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(static_cast<std::size_t>(n));
  auto k = uniform(rng, static_cast<std::size_t>(n) * dim, -3.0f, 3.0f), vv = uniform(rng, k.size(), -0.5f, 0.5f);
  for (int i = 0; i < dim; ++i) k[static_cast<std::size_t>(i)] = 0.0f;  // an all-zero row: scale 0
  std::vector<std::uint16_t> want_k(row * slots_in_pool / 2, 0), want_v(want_k.size(), 0);
  for (int r = 0; r < n; ++r) {
    const std::size_t at = static_cast<std::size_t>(slots[static_cast<std::size_t>(r)]) * row;
    quantize_row(dtype::q8_0, k.data() + static_cast<std::size_t>(r) * dim, reinterpret_cast<std::byte*>(want_k.data()) + at, dim);
    quantize_row(dtype::q8_0, vv.data() + static_cast<std::size_t>(r) * dim, reinterpret_cast<std::byte*>(want_v.data()) + at, dim);
  }
  const std::vector<std::uint16_t> zeros(want_k.size(), 0);
  const device_buffer kd = to_device(k), vd = to_device(vv), sd = to_device(slots), kp = to_device(zeros), vp = to_device(zeros);
  store_kv_q8_0(kd.as<float>(), vd.as<float>(), n, dim, sd.as<std::int32_t>(), kp.data(), vp.data(), nullptr);
  check(cudaDeviceSynchronize(), "store_kv_q8_0");
  std::vector<std::uint16_t> got_k(zeros.size()), got_v(zeros.size());
  kp.download(got_k.data(), got_k.size() * 2, nullptr);
  vp.download(got_v.data(), got_v.size() * 2, nullptr);
  // The first byte that differs (of the keys, then the values), for the message.
  auto first_diff = [](const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b) {
    const auto* x = reinterpret_cast<const unsigned char*>(a.data());
    const auto* y = reinterpret_cast<const unsigned char*>(b.data());
    for (std::size_t i = 0; i < a.size() * 2; ++i)
      if (x[i] != y[i]) return static_cast<long long>(i);
    return -1LL;
  };
  const long long dk = first_diff(got_k, want_k), dv = first_diff(got_v, want_v);
  auto byte = [](const std::vector<std::uint16_t>& a, long long i) {
    return i < 0 ? 0 : static_cast<int>(reinterpret_cast<const unsigned char*>(a.data())[i]);
  };
  char what[300];
  std::snprintf(what, sizeof what, "store_kv_q8_0 rows=%d dim=%d: the bytes of the CPU's quantize_row", n, dim);
  std::string message = what;
  if (dk >= 0 || dv >= 0) {
    std::snprintf(what, sizeof what, " (first difference: keys at byte %lld, %d not %d; values at %lld, %d not %d)", dk,
                  byte(got_k, dk), byte(want_k, dk), dv, byte(got_v, dv), byte(want_v, dv));
    message += what;
  }
  v.expect(dk < 0 && dv < 0, message);
}

}  // namespace

std::size_t random_pages::row_bytes() const {
  const std::size_t values = static_cast<std::size_t>(n_head_kv) * head_dim;
  return bits == 8 ? values / 32 * 34 : values * 2;
}

random_pages make_pages(std::mt19937& rng, int page_tokens, int n_head_kv, int head_dim, const std::vector<int>& last, int bits) {
  random_pages p;
  p.page_tokens = page_tokens;
  p.n_head_kv = n_head_kv;
  p.head_dim = head_dim;
  p.bits = bits;
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
  const std::size_t rows = static_cast<std::size_t>(n_pages) * page_tokens, dim = static_cast<std::size_t>(n_head_kv) * head_dim;
  for (auto* pool : {&p.k, &p.v}) {
    const auto f = uniform(rng, rows * dim);
    pool->assign(rows * p.row_bytes() / 2, 0);
    for (std::size_t r = 0; r < rows; ++r) {
      if (bits == 8) {
        quantize_row(dtype::q8_0, f.data() + r * dim, reinterpret_cast<std::byte*>(pool->data()) + r * p.row_bytes(),
                     static_cast<std::int64_t>(dim));
      } else {
        for (std::size_t i = 0; i < dim; ++i) (*pool)[r * dim + i] = fp32_to_fp16(f[r * dim + i]);
      }
    }
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
  view.row_bytes = static_cast<std::int64_t>(row_bytes());
  view.head_bytes = bits == 8 ? head_dim / 32 * 34 : head_dim * 2;
  view.format = bits == 8 ? dtype::q8_0 : dtype::f16;
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
  kv.bits = bits;
  return kv;
}

void check_attention(verdicts& v, std::mt19937& rng) {
  run_case(v, rng, {128, 32, 8, {0, 0, 0}, {999, 0, 4099}});
  run_case(v, rng, {64, 14, 2, {0, 500}, {76, 599}, 30.0f});
  run_case(v, rng, {256, 8, 8, {0}, {4999}});
  run_case(v, rng, {128, 40, 4, {0, 17}, {299, 1999}});
  run_case(v, rng, {128, 32, 8, {0}, {16383}});
  run_case(v, rng, {32, 8, 4, {0, 3}, {700, 40}});  // the shared test models' heads
  // q8_0 pages: the same shapes' kinds, read as the CPU reads them.
  run_case(v, rng, {128, 32, 8, {0, 0, 0}, {999, 0, 4099}, 0.0f, 8});
  run_case(v, rng, {64, 14, 2, {0, 500}, {76, 599}, 30.0f, 8});
  run_case(v, rng, {256, 8, 8, {0}, {4999}, 0.0f, 8});
  run_case(v, rng, {32, 8, 4, {0, 3}, {700, 40}, 0.0f, 8});
  run_case(v, rng, {128, 32, 8, {0}, {16383}, 0.0f, 8});
  // q8_0 by aligned words: every query-heads-per-kv-head kernel (1, 2, 4, 8; 5 and 7 padded to 8),
  // every head size (32: 16-bit loads), rows starting past 0, and rows of one launch ending at
  // different places in a part: with 4 parts of 64 positions forced, a row of 128 ends with the
  // second part (its last two are empty), one of 129 one position into the third; with 3 parts
  // of 34 (not a multiple of a trip's positions), rows of 100 and 101.
  run_case(v, rng, {128, 32, 8, {0, 0, 0}, {255, 127, 128}, 0.0f, 8, 4});
  run_case(v, rng, {64, 8, 2, {0, 0}, {99, 100}, 0.0f, 8, 3});
  run_case(v, rng, {128, 32, 8, {0, 0}, {4095, 4096}, 0.0f, 8});
  run_case(v, rng, {128, 8, 1, {0, 0}, {63, 64}, 0.0f, 8});
  run_case(v, rng, {128, 16, 16, {5, 0}, {200, 127}, 0.0f, 8});
  run_case(v, rng, {64, 32, 4, {0}, {8191}, 0.0f, 8});
  run_case(v, rng, {256, 16, 8, {0, 100}, {129, 3000}, 0.0f, 8});
  run_case(v, rng, {128, 40, 8, {0, 1000}, {2047, 1063}, 0.0f, 8});
  run_case(v, rng, {64, 21, 3, {0}, {1000}, 50.0f, 8});
  run_case(v, rng, {32, 12, 4, {0, 0}, {1500, 31}, 0.0f, 8});
  check_store_q8_0(v, rng, 37, 1024);
  check_store_q8_0(v, rng, 5, 128);
}

}  // namespace strata::kernels::cuda::checks
