// Key centering for q4_0 pages (src/model/q4_kv.hpp): taking a fixed vector from every key leaves
// attention unchanged, and on keys with a common offset it lowers what 4 bits lose. Both run the
// real preparation, page formats and attention kernel, against a float reference of attention over
// the raw rows.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/ops.hpp"
#include "src/kv/kv_format.hpp"
#include "src/model/q4_kv.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::model {
namespace {

constexpr int k_tokens = 40;
constexpr int k_page = 16;

hparams small_hparams() {
  hparams h;
  h.n_head = 4;
  h.n_head_kv = 2;
  h.head_dim = 64;
  h.n_rot = 64;
  h.attn_scale = 1.0f / 8.0f;
  return h;
}

struct rows {
  std::vector<float> q, k, v;  // k_tokens rows each
};

/// Random rows; every key gets `offset` (kv_dim values) added.
rows random_rows(const hparams& h, std::mt19937& rng, const std::vector<float>& offset) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  rows r;
  r.q.resize(static_cast<std::size_t>(k_tokens) * h.q_dim());
  r.k.resize(static_cast<std::size_t>(k_tokens) * h.kv_dim());
  r.v.resize(r.k.size());
  for (float& x : r.q) x = n(rng);
  for (std::size_t i = 0; i < r.k.size(); ++i) r.k[i] = n(rng) + offset[i % offset.size()];
  for (float& x : r.v) x = n(rng);
  return r;
}

/// Causal attention in double over the raw rows: every row attends positions [0, its own].
std::vector<float> reference(const hparams& h, const rows& r) {
  const int hd = h.head_dim, group = h.n_head / h.n_head_kv;
  std::vector<float> out(r.q.size());
  for (int t = 0; t < k_tokens; ++t)
    for (int hh = 0; hh < h.n_head; ++hh) {
      const float* q = r.q.data() + static_cast<std::size_t>(t) * h.q_dim() + hh * hd;
      const int kvh = hh / group;
      std::vector<double> s(static_cast<std::size_t>(t + 1));
      double top = -INFINITY;
      for (int p = 0; p <= t; ++p) {
        const float* k = r.k.data() + static_cast<std::size_t>(p) * h.kv_dim() + kvh * hd;
        double d = 0;
        for (int i = 0; i < hd; ++i) d += static_cast<double>(q[i]) * k[i];
        s[static_cast<std::size_t>(p)] = d * h.attn_scale;
        top = std::max(top, s[static_cast<std::size_t>(p)]);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - top));
      for (int i = 0; i < hd; ++i) {
        double acc = 0;
        for (int p = 0; p <= t; ++p) acc += s[static_cast<std::size_t>(p)] * r.v[static_cast<std::size_t>(p) * h.kv_dim() + kvh * hd + i];
        out[static_cast<std::size_t>(t) * h.q_dim() + hh * hd + i] = static_cast<float>(acc / sum);
      }
    }
  return out;
}

/// The rows prepared as q4_0 pages take them (prepare_q4_row with key_mean), written to pages of
/// `format` (f16 or q4_0), attended by kernels::attention and turned back (finish_q4_rows).
std::vector<float> attend_prepared(const hparams& h, rows r, const float* key_mean, kv::kv_format format) {
  const std::int64_t kvd = h.kv_dim();
  const std::int64_t row_bytes = kv::kv_row_bytes(format, kvd);
  const int n_pages = (k_tokens + k_page - 1) / k_page;
  std::vector<std::byte> kp(static_cast<std::size_t>(n_pages * k_page * row_bytes)), vp(kp.size());
  for (int t = 0; t < k_tokens; ++t) {
    float* q = r.q.data() + static_cast<std::size_t>(t) * h.q_dim();
    float* k = r.k.data() + static_cast<std::size_t>(t) * kvd;
    float* v = r.v.data() + static_cast<std::size_t>(t) * kvd;
    prepare_q4_row(h, nullptr, key_mean, q, k, v);
    std::byte* ks = kp.data() + static_cast<std::size_t>(t) * row_bytes;
    std::byte* vs = vp.data() + static_cast<std::size_t>(t) * row_bytes;
    if (format == kv::kv_format::q4_0) {
      quantize_q4_row(k, v, kvd, ks, vs);
    } else {
      kernels::convert_row_to_f16(k, reinterpret_cast<std::uint16_t*>(ks), kvd);
      kernels::convert_row_to_f16(v, reinterpret_cast<std::uint16_t*>(vs), kvd);
    }
  }
  std::vector<std::int32_t> blocks(static_cast<std::size_t>(n_pages));
  for (int i = 0; i < n_pages; ++i) blocks[static_cast<std::size_t>(i)] = i;
  const kernels::kv_page_view view{kp.data(), vp.data(), k_page * row_bytes, row_bytes, row_bytes / h.n_head_kv, k_page, blocks.data(), 0,
                                   format == kv::kv_format::q4_0 ? kernels::dtype::q4_0 : kernels::dtype::f16};
  const kernels::attention_shape shape{h.n_head, h.n_head_kv, h.head_dim, h.attn_scale, 0.0f};
  std::vector<float> out(r.q.size());
  for (int t = 0; t < k_tokens; ++t) {
    const kernels::attention_row row{r.q.data() + static_cast<std::size_t>(t) * h.q_dim(), out.data() + static_cast<std::size_t>(t) * h.q_dim(), 0, t,
                                     nullptr};
    kernels::attention(shape, view, &row, 1, 0, h.n_head);
  }
  finish_q4_rows(h, out.data(), k_tokens);
  return out;
}

/// The mean of the keys as prepare_q4_row leaves them (without centering).
std::vector<float> prepared_key_mean(const hparams& h, rows r) {
  std::vector<double> sum(static_cast<std::size_t>(h.kv_dim()));
  for (int t = 0; t < k_tokens; ++t) {
    float* k = r.k.data() + static_cast<std::size_t>(t) * h.kv_dim();
    prepare_q4_row(h, nullptr, nullptr, r.q.data() + static_cast<std::size_t>(t) * h.q_dim(), k, r.v.data() + static_cast<std::size_t>(t) * h.kv_dim());
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += k[i];
  }
  std::vector<float> m(sum.size());
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(sum[i] / k_tokens);
  return m;
}

double rms_error(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return std::sqrt(s / static_cast<double>(a.size()));
}

double max_error(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

TEST(q4_kv, centering_leaves_attention_unchanged) {
  std::mt19937 rng(test_seed());
  const hparams h = small_hparams();
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int round = 0; round < 4; ++round) {
    // Without and with a common offset in the keys; m random, or the keys' own mean.
    std::vector<float> offset(static_cast<std::size_t>(h.kv_dim()), 0.0f);
    if (round % 2 == 1)
      for (float& x : offset) x = 3.0f * n(rng);
    const rows r = random_rows(h, rng, offset);
    std::vector<float> m(static_cast<std::size_t>(h.kv_dim()));
    if (round < 2) {
      for (float& x : m) x = 2.0f * n(rng);
    } else {
      m = prepared_key_mean(h, r);
    }
    const auto ref = reference(h, r);
    // f16 pages: the only difference between the two is the rounding of k and of k - m to f16.
    const auto plain = attend_prepared(h, r, nullptr, kv::kv_format::f16);
    const auto centered = attend_prepared(h, r, m.data(), kv::kv_format::f16);
    EXPECT_LT(max_error(plain, ref), 2e-2) << "round " << round;
    EXPECT_LT(max_error(centered, ref), 2e-2) << "round " << round;
    EXPECT_LT(max_error(centered, plain), 2e-2) << "round " << round;
    EXPECT_LT(rms_error(centered, plain), 2e-3) << "round " << round;
  }
}

TEST(q4_kv, centering_lowers_q4_0_error_on_keys_with_a_common_offset) {
  std::mt19937 rng(test_seed());
  const hparams h = small_hparams();
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int round = 0; round < 4; ++round) {
    std::vector<float> offset(static_cast<std::size_t>(h.kv_dim()));
    for (float& x : offset) x = 4.0f * n(rng);
    const rows r = random_rows(h, rng, offset);
    const auto ref = reference(h, r);
    const auto m = prepared_key_mean(h, r);
    const double plain = rms_error(attend_prepared(h, r, nullptr, kv::kv_format::q4_0), ref);
    const double centered = rms_error(attend_prepared(h, r, m.data(), kv::kv_format::q4_0), ref);
    std::printf("round %d: q4_0 attention RMS error %.5f plain, %.5f centered\n", round, plain, centered);
    EXPECT_LT(centered, 0.6 * plain) << "round " << round;
  }
}

TEST(q4_kv, centering_applies_only_where_scores_are_not_read_raw) {
  hparams h = small_hparams();
  h.n_layer = 1;
  layer_weights w;
  EXPECT_TRUE(q4_centering_applies(w, h, 0));
  h.attn_softcap = 50.0f;
  EXPECT_FALSE(q4_centering_applies(w, h, 0));
}

TEST(q4_kv, key_means_layer_is_null_when_zero) {
  q4_key_means means;
  EXPECT_EQ(means.layer(0), nullptr);
  means.kv_dim = 4;
  means.m = {0, 0, 0, 0, 0, 1.5f, 0, 0};
  EXPECT_EQ(means.layer(0), nullptr);
  ASSERT_NE(means.layer(1), nullptr);
  EXPECT_EQ(means.layer(1)[1], 1.5f);
}

}  // namespace
}  // namespace strata::model
