// Prefill attention on the tensor cores against the CPU's scalar attention over the same pages,
// as the GPU layers run it: the rows of a step's sequences with many rows in tiles through
// prefill_attention, the other rows through decode_attention (by their indices), every row checked;
// over f16 pages and over q8_0 pages (the CPU's quantize_row bytes, its attention over them).

#include <algorithm>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/prefill_attention.hpp"

namespace strata::kernels::cuda::checks {
namespace {

constexpr double k_prefill_tolerance = 1e-4;  // as the decode kernel's: f32 sums of two-part f16 products
constexpr int k_page = 32;

struct chunk {
  int start, n_rows;  // the sequence's rows in this step: positions start .. start + n_rows - 1
};

struct prefill_case {
  int head_dim, n_head, n_head_kv;
  std::vector<chunk> seqs;
  int window = 0;  // > 0: row at p attends [p - window + 1, p]
  float softcap = 0.0f;
  int bits = 16;  // 16: f16 pages; 8: q8_0
};

void run_case(verdicts& v, std::mt19937& rng, const prefill_case& c) {
  const int hd = c.head_dim, per_row = c.n_head * hd;
  std::vector<int> seq_last;
  for (const auto& s : c.seqs) seq_last.push_back(s.start + s.n_rows - 1);
  const random_pages pages = make_pages(rng, k_page, c.n_head_kv, hd, seq_last, c.bits);
  // The step's rows, sequence after sequence; one block table per row (or one for all rows when
  // the step holds one sequence, as the GPU layers pass a prefill).
  const bool one_table = c.seqs.size() == 1;
  std::vector<std::int32_t> first, last, tables, decode;
  std::vector<prefill_tile> tiles;
  std::vector<int> row_seq;
  const int tile_rows = prefill_tile_rows(c.n_head, c.n_head_kv, hd);
  for (std::size_t s = 0; s < c.seqs.size(); ++s) {
    const int row0 = static_cast<int>(first.size());
    for (int r = 0; r < c.seqs[s].n_rows; ++r) {
      const int p = c.seqs[s].start + r;
      first.push_back(c.window > 0 ? std::max(0, p - c.window + 1) : 0);
      last.push_back(p);
      row_seq.push_back(static_cast<int>(s));
      if (c.seqs[s].n_rows < k_prefill_attention_min_rows) decode.push_back(row0 + r);
      if (!one_table || r == 0)
        tables.insert(tables.end(), pages.table.begin() + static_cast<std::ptrdiff_t>(s * pages.stride),
                      pages.table.begin() + static_cast<std::ptrdiff_t>((s + 1) * pages.stride));
    }
    if (c.seqs[s].n_rows >= k_prefill_attention_min_rows)
      for (int r = 0; r < c.seqs[s].n_rows; r += tile_rows) tiles.push_back({row0 + r, std::min(tile_rows, c.seqs[s].n_rows - r)});
  }
  std::shuffle(tiles.begin(), tiles.end(), rng);  // any order gives the same rows
  const int n = static_cast<int>(first.size());
  const std::size_t q_values = static_cast<std::size_t>(n) * per_row;
  const auto q = uniform(rng, q_values, -2.0f, 2.0f);
  const attention_shape shape = pages.shape(c.n_head, c.softcap);
  std::vector<float> ref(q_values);
  for (int i = 0; i < n; ++i) {
    const std::size_t at = static_cast<std::size_t>(i) * per_row;
    pages.cpu_attention(shape, row_seq[static_cast<std::size_t>(i)], q.data() + at, ref.data() + at, first[static_cast<std::size_t>(i)],
                        last[static_cast<std::size_t>(i)]);
  }

  const device_buffer kd = to_device(pages.k), vd = to_device(pages.v), td = to_device(tables), fd = to_device(first),
                      ld = to_device(last), qd = to_device(q), od = poisoned(q_values), tiles_d = to_device(tiles),
                      dd = to_device(decode.empty() ? std::vector<std::int32_t>{0} : decode);
  const kv_pages_f16 kv = pages.on_device(kd, vd);
  decode_rows r;
  r.q = qd.as<float>();
  r.out = od.as<float>();
  r.n_seq = static_cast<int>(decode.size());
  r.n_head = c.n_head;
  r.blocks = td.as<std::int32_t>();
  r.blocks_stride = one_table ? 0 : pages.stride;
  r.first = fd.as<std::int32_t>();
  r.last = ld.as<std::int32_t>();
  for (int i : decode) r.max_positions = std::max(r.max_positions, last[static_cast<std::size_t>(i)] + 1);
  r.scale = shape.scale;
  r.softcap = c.softcap;
  r.rows = dd.as<std::int32_t>();
  prefill_attention(kv, r, tiles_d.as<prefill_tile>(), static_cast<int>(tiles.size()), nullptr);
  const std::size_t ws_bytes = decode_attention_workspace(kv, r);
  const device_buffer ws(ws_bytes);
  decode_attention(kv, r, ws.data(), ws_bytes, nullptr);
  check(cudaDeviceSynchronize(), "prefill_attention");
  const auto out = to_host(od, q_values);
  const double err = rel_l2(out.data(), ref.data(), q_values);
  std::string seqs;
  for (const auto& s : c.seqs) seqs += (seqs.empty() ? "" : ",") + std::to_string(s.start) + "+" + std::to_string(s.n_rows);
  char what[300];
  std::snprintf(what, sizeof what, "prefill attention %s hd=%d heads=%d/%d rows %s (%zu tiles of %d, %zu decode rows)%s%s: error %.3g",
                c.bits == 8 ? "q8_0" : "f16", hd, c.n_head, c.n_head_kv, seqs.c_str(), tiles.size(), tile_rows, decode.size(),
                c.window > 0 ? " window" : "",
                c.softcap > 0 ? " softcap" : "", err);
  v.expect(err <= k_prefill_tolerance, what);
}

}  // namespace

void check_prefill_attention(verdicts& v, std::mt19937& rng) {
  run_case(v, rng, {128, 32, 8, {{0, 333}}});                       // a fresh prompt, one table for all rows
  run_case(v, rng, {128, 32, 8, {{1000, 77}, {0, 1}, {0, 200}, {4099, 1}}});  // a chunk after cached positions, decode rows beside
  run_case(v, rng, {64, 14, 2, {{37, 100}, {500, 3}}, 0, 30.0f});   // 7 query heads per kv head: tiles of 9 rows
  run_case(v, rng, {256, 8, 8, {{0, 130}, {64, 65}}});              // one query head per kv head: tiles of 64 rows
  run_case(v, rng, {128, 40, 4, {{17, 90}}, 50});                   // a sliding window
  run_case(v, rng, {32, 8, 4, {{0, 16}, {5, 15}, {300, 40}}});      // the shared test models' heads
  // q8_0 pages: values dequantized in registers, kept as two f16 parts.
  run_case(v, rng, {128, 32, 8, {{0, 333}}, 0, 0.0f, 8});
  run_case(v, rng, {128, 32, 8, {{1000, 77}, {0, 1}, {0, 200}, {4099, 1}}, 0, 0.0f, 8});
  run_case(v, rng, {64, 14, 2, {{37, 100}, {500, 3}}, 0, 30.0f, 8});
  run_case(v, rng, {256, 8, 8, {{0, 130}, {64, 65}}, 0, 0.0f, 8});
  run_case(v, rng, {32, 8, 4, {{0, 16}, {5, 15}, {300, 40}}, 0, 0.0f, 8});
}

}  // namespace strata::kernels::cuda::checks
