#include "kernels/matmul.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#include "kernels/quants.hpp"

namespace strata::kernels {
namespace {

constexpr std::int64_t k_row_block = 16;  // weight rows per row GEMM call / f32 tile
// Below these sizes, quantizing activation rows (values) or interleaving them (bytes) takes a
// few microseconds: less than handing the work to the pool and waiting for every worker (a decode
// step's expert products would otherwise add two such hand-offs per layer).
constexpr std::int64_t k_min_pooled_values = 1 << 14;
constexpr std::size_t k_min_pooled_bytes = std::size_t{1} << 16;

/// A per-thread buffer that grows on first use and is reused afterwards.
template <class T>
T* scratch(std::vector<T>& buf, std::size_t n) {
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

bool is_float(dtype t) { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; }

/// Rows [r0, r1) of a float-typed W against all m activation rows: f32 tiles of k_row_block rows.
void gemm_f32_rows(const kernel_table& kt, dtype wt, const std::byte* w, std::int64_t r0, std::int64_t r1,
                   std::int64_t rows, std::int64_t k, const float* x, std::int64_t m, float* y) {
  thread_local std::vector<float> tile_buf;
  float* tile = wt == dtype::f32 ? nullptr : scratch(tile_buf, static_cast<std::size_t>(k_row_block * k));
  const std::size_t stride = row_bytes(wt, k);
  for (std::int64_t rb = r0; rb < r1; rb += k_row_block) {
    const int nr = static_cast<int>(std::min(k_row_block, r1 - rb));
    const std::byte* src = w + static_cast<std::size_t>(rb) * stride;
    const float* wf = reinterpret_cast<const float*>(src);
    if (wt == dtype::f16) {
      kt.f16_to_f32(reinterpret_cast<const std::uint16_t*>(src), tile, nr * k);
      wf = tile;
    } else if (wt == dtype::bf16) {
      dequantize_row(wt, src, tile, nr * k);
      wf = tile;
    }
    kt.gemm_f32(wf, x, k, nr, static_cast<int>(m), y + rb, rows);
  }
}

/// Rows [r0, r1) of W against the m prepared activation rows; all read from `packed` when it is
/// given (r0 is then a multiple of 16): the whole groups of 16 through the type's packed kernel,
/// against the same rows interleaved in `xt`, the rows left over through the row dots.
void dot_rows(const kernel_table& kt, dtype wt, const std::byte* w, std::int64_t r0, std::int64_t r1,
              std::int64_t rows, std::int64_t k, const act_row* xs, std::int64_t m, float* y, const std::byte* packed,
              const std::byte* xt) {
  const std::size_t stride = row_bytes(wt, k);
  if (packed) {
    const std::int64_t g1 = std::min(r1, rows / 16 * 16) / 16;
    if (r0 / 16 < g1) kt.packed_gemm[dtype_slot(wt)](packed, r0 / 16, g1, xt, static_cast<int>(m), k, y, rows);
    r0 = std::max(r0, g1 * 16);
    if (r0 >= r1) return;
    w = packed;  // the rows % 16 left over follow the groups, in the GGUF layout, at their own offsets
  }
  const row_gemm_fn gemm = kt.row_gemm[dtype_slot(wt)];
  if (gemm == nullptr) {
    const row_dot_fn dot = kt.row_dot[dtype_slot(wt)];
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::byte* wr = w + static_cast<std::size_t>(r) * stride;
      for (std::int64_t i = 0; i < m; ++i) y[i * rows + r] = dot(wr, xs[i], k);
    }
    return;
  }
  for (std::int64_t rb = r0; rb < r1; rb += k_row_block) {
    const int nr = static_cast<int>(std::min(k_row_block, r1 - rb));
    gemm(w + static_cast<std::size_t>(rb) * stride, stride, nr, xs, static_cast<int>(m), k, y + rb, rows);
  }
}

/// How many contiguous runs [0, rows) is cut into, aligned to `grain`: a few per worker, handed
/// out as workers free up, so that a worker slowed down (by another process on its core, say)
/// takes fewer runs instead of holding up the whole matmul with its fixed half.
int row_runs(const compute_pool& pool, std::int64_t rows, std::int64_t grain) {
  constexpr int k_runs_per_worker = 4;
  const std::int64_t grains = (rows + grain - 1) / grain;
  return static_cast<int>(std::min<std::int64_t>(grains, static_cast<std::int64_t>(pool.size()) * k_runs_per_worker));
}

/// Calls fn(begin, end) for the row_runs runs of [0, rows), spread over the pool.
template <class Fn>
void for_row_runs(compute_pool& pool, std::int64_t rows, std::int64_t grain, Fn&& fn) {
  const int n_runs = row_runs(pool, rows, grain);
  auto task = [&](int t, int n) {
    std::int64_t b, e;
    compute_pool::split(rows, grain, t, n, b, e);
    if (b < e) fn(b, e);
  };
  pool.parallel_for(n_runs, std::ref(task));
}

/// Activation rows of one matmul call, prepared by the calling thread.
struct prepared_x {
  std::vector<act_row> rows;
  std::vector<std::byte> data;
  std::vector<std::byte> interleaved;  // for packed weights
};

/// The m activation rows of x (m x k) as the row dots read them: pointers to x itself for float
/// formats, else quantized into px (on the pool's workers unless `single`), and with `interleave`
/// also interleaved in tiles for packed weights (their buffer returned in xt, else null).
act_row* prepare_rows(compute_pool& pool, const kernel_table& kt, prepared_x& px, act_format fmt, const float* x, std::int64_t m,
                      std::int64_t k, bool single, bool interleave, std::byte*& xt) {
  act_row* xs = scratch(px.rows, static_cast<std::size_t>(m));
  xt = nullptr;
  if (fmt == act_format::f32) {
    for (std::int64_t i = 0; i < m; ++i) xs[i] = act_row{x + i * k, nullptr, nullptr, nullptr};
    return xs;
  }
  const std::size_t per_row = act_row_bytes(fmt, k);
  // One spare row of bytes lets the start be rounded up to 64.
  std::byte* data = scratch(px.data, per_row * static_cast<std::size_t>(m + 1));
  data += (64 - reinterpret_cast<std::uintptr_t>(data) % 64) % 64;
  if (interleave) xt = scratch(px.interleaved, interleaved_q8_x8_bytes(fmt, m, k));
  auto quantize = [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i)
      xs[i] = quantize_activations(kt, fmt, x + i * k, k, data + static_cast<std::size_t>(i) * per_row);
    if (xt) interleave_q8_x8(fmt, xs, b, e, m, k, xt);
  };
  if (single || m < 4 || m * k < k_min_pooled_values) {
    quantize(0, m);
  } else {
    // Whole tiles of interleaved rows per worker: rows of one tile share cache lines.
    pool.run_split(m, xt ? k_interleave_rows : 1, std::ref(quantize));
  }
  return xs;
}

/// The rows of each group (xs[first, first + count)) interleaved for the packed kernels, group
/// after group, each as a matrix of its own rows (its tiles of 8 start at its first row); at[g]
/// is where group g's start in the returned buffer (px's).
std::byte* interleave_groups(compute_pool& pool, prepared_x& px, act_format fmt, const act_row* xs, std::span<const expert_rows> groups,
                             std::int64_t k, bool single, std::vector<std::size_t>& at) {
  at.resize(groups.size() + 1);
  at[0] = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) at[g + 1] = at[g] + interleaved_q8_x8_bytes(fmt, groups[g].count, k);
  std::byte* xt = scratch(px.interleaved, at.back());
  auto one = [&](std::size_t g) { interleave_q8_x8(fmt, xs + groups[g].first, 0, groups[g].count, groups[g].count, k, xt + at[g]); };
  if (single || at.back() < k_min_pooled_bytes) {
    for (std::size_t g = 0; g < groups.size(); ++g) one(g);
  } else {
    auto each = [&](int g, int) { one(static_cast<std::size_t>(g)); };
    pool.parallel_for(static_cast<int>(groups.size()), std::ref(each));
  }
  return xt;
}

}  // namespace

void matmul(compute_pool& pool, const kernel_table& kt, dtype wt, const void* w, std::int64_t rows, std::int64_t k,
            const float* x, std::int64_t m, float* y, const void* packed) {
  const matmul_out out{wt, w, rows, y, packed};
  matmul_many(pool, kt, std::span(&out, 1), k, x, m);
}

void matmul_many(compute_pool& pool, const kernel_table& kt, std::span<const matmul_out> outs, std::int64_t k, const float* x,
                 std::int64_t m) {
  if (outs.empty()) return;
  const act_format fmt = act_format_for(outs[0].type);
  const bool shared = outs.size() <= k_matmul_max_outputs && std::all_of(outs.begin(), outs.end(), [&](const matmul_out& o) {
    return !is_float(o.type) && act_format_for(o.type) == fmt;
  });
  if (outs.size() > 1 && !shared) {
    for (const auto& o : outs) matmul_many(pool, kt, std::span(&o, 1), k, x, m);
    return;
  }
  thread_local prepared_x px;
  std::int64_t total_rows = 0;
  for (const auto& o : outs) total_rows += o.rows;
  const bool single = total_rows * k * m < 32 * 1024 || pool.size() == 1;
  const matmul_out& first = outs[0];
  if (is_float(first.type) && m >= k_gemm_min_m && k % 16 == 0) {
    const auto* wb = static_cast<const std::byte*>(first.w);
    auto rows_in = [&](std::int64_t b, std::int64_t e) { gemm_f32_rows(kt, first.type, wb, b, e, first.rows, k, x, m, first.y); };
    if (single) rows_in(0, first.rows);
    else for_row_runs(pool, first.rows, k_row_block, rows_in);
    return;
  }
  auto packed_of = [&](const matmul_out& o) {
    return kt.packed_gemm[dtype_slot(o.type)] ? static_cast<const std::byte*>(o.packed) : nullptr;
  };
  const bool any_packed = std::any_of(outs.begin(), outs.end(), [&](const matmul_out& o) { return packed_of(o) != nullptr; });
  std::byte* xt;  // the calling thread's buffers: the workers see them through these pointers
  act_row* xs = prepare_rows(pool, kt, px, fmt, x, m, k, single, any_packed, xt);
  auto rows_of = [&](const matmul_out& o, std::int64_t b, std::int64_t e) {
    dot_rows(kt, o.type, static_cast<const std::byte*>(o.w), b, e, o.rows, k, xs, m, o.y, packed_of(o), xt);
  };
  if (single) {
    for (const auto& o : outs) rows_of(o, 0, o.rows);
    return;
  }
  if (m > 1) {
    // The runs of every output, handed out from one counter.
    std::array<int, k_matmul_max_outputs> runs{};
    int total = 0;
    for (std::size_t i = 0; i < outs.size(); ++i) {
      runs[i] = row_runs(pool, outs[i].rows, k_row_block);
      total += runs[i];
    }
    auto task = [&](int t, int) {
      std::size_t i = 0;
      while (t >= runs[i]) t -= runs[i++];
      std::int64_t b, e;
      compute_pool::split(outs[i].rows, k_row_block, t, runs[i], b, e);
      if (b < e) rows_of(outs[i], b, e);
    };
    pool.parallel_for(total, std::ref(task));
    return;
  }
  // One row streams the weights: the outputs' rows, one after the other, in chunks of 64 rows
  // (tens of kilobytes: the hand-out costs nothing next to them); each core streams its share of
  // them and then helps the others from the back of theirs.
  constexpr std::int64_t chunk_rows = 4 * k_row_block;
  std::array<std::int64_t, k_matmul_max_outputs + 1> first_chunk{};
  for (std::size_t i = 0; i < outs.size(); ++i)
    first_chunk[i + 1] = first_chunk[i] + (outs[i].rows + chunk_rows - 1) / chunk_rows;
  auto chunk = [&](std::int64_t c) {
    std::size_t i = 0;
    while (c >= first_chunk[i + 1]) ++i;
    const std::int64_t b = (c - first_chunk[i]) * chunk_rows;
    rows_of(outs[i], b, std::min(outs[i].rows, b + chunk_rows));
  };
  pool.run_shares(first_chunk[outs.size()], std::ref(chunk));
}

void matmul(compute_pool& pool, dtype wt, const void* w, std::int64_t rows, std::int64_t k, const float* x,
            std::int64_t m, float* y, const void* packed) {
  matmul(pool, active_kernels(), wt, w, rows, k, x, m, y, packed);
}

namespace {

bool is_quantized_family(std::span<const grouped_out> outs, act_format fmt) {
  return fmt != act_format::f32 &&
         std::all_of(outs.begin(), outs.end(), [&](const grouped_out& o) { return !is_float(o.type) && act_format_for(o.type) == fmt; });
}

/// One grouped product, its activation rows prepared: every (group, weight, run of rows) is a
/// task, group after group.
struct grouped_tasks {
  const kernel_table* kt = nullptr;
  std::span<const grouped_out> outs;
  std::span<const expert_rows> groups;
  std::int64_t k = 0;
  const float* x = nullptr;           // the gathered float rows (float weights)
  const act_row* xs = nullptr;        // the gathered rows, quantized
  const std::byte* xt = nullptr;      // packed weights: each group's interleaved rows, from xt_at[g]
  const std::size_t* xt_at = nullptr;
  std::int64_t run = 0;
  std::array<std::int64_t, k_matmul_max_outputs> runs_per_group{};
  std::int64_t per_group = 0;

  grouped_tasks(const compute_pool& pool, const kernel_table& table, std::span<const grouped_out> o, std::span<const expert_rows> g,
                std::int64_t k_) : kt(&table), outs(o), groups(g), k(k_) {
    // Runs of 64 rows (16 when that leaves too few tasks for the workers), per expert and weight.
    std::int64_t total_rows = 0;
    for (const auto& out : outs) total_rows += out.rows * static_cast<std::int64_t>(groups.size());
    run = total_rows / (4 * k_row_block) >= 4 * pool.size() ? 4 * k_row_block : k_row_block;
    for (std::size_t i = 0; i < outs.size(); ++i) {
      runs_per_group[i] = (outs[i].rows + run - 1) / run;
      per_group += runs_per_group[i];
    }
  }
  std::int64_t count() const { return per_group * static_cast<std::int64_t>(groups.size()); }
  const std::byte* packed_of(const grouped_out& o) const {
    return kt->packed_gemm[dtype_slot(o.type)] ? static_cast<const std::byte*>(o.packed) : nullptr;
  }
  bool any_packed() const {
    return std::any_of(outs.begin(), outs.end(), [&](const grouped_out& o) { return packed_of(o) != nullptr; });
  }
  void operator()(std::int64_t t) const {
    const std::size_t gi = static_cast<std::size_t>(t / per_group);
    const expert_rows& g = groups[gi];
    t %= per_group;
    std::size_t i = 0;
    while (t >= runs_per_group[i]) t -= runs_per_group[i++];
    const grouped_out& o = outs[i];
    const std::size_t stride = row_bytes(o.type, k);
    const auto* w = static_cast<const std::byte*>(o.w) + static_cast<std::size_t>(g.expert) * static_cast<std::size_t>(o.rows) * stride;
    const std::int64_t b = t * run, e = std::min(o.rows, b + run);
    float* y = o.y + g.first * o.rows;
    if (is_float(o.type) && g.count >= k_gemm_min_m && k % 16 == 0) gemm_f32_rows(*kt, o.type, w, b, e, o.rows, k, x + g.first * k, g.count, y);
    else if (const std::byte* p = packed_of(o))
      dot_rows(*kt, o.type, w, b, e, o.rows, k, xs + g.first, g.count, y,
               p + static_cast<std::size_t>(g.expert) * static_cast<std::size_t>(o.rows) * stride, xt + xt_at[gi]);
    else dot_rows(*kt, o.type, w, b, e, o.rows, k, xs + g.first, g.count, y, nullptr, nullptr);
  }
};

/// Whether a grouped product is small enough for the calling thread alone.
bool grouped_single(const compute_pool& pool, std::span<const grouped_out> outs, std::span<const expert_rows> groups, std::int64_t k) {
  std::int64_t work = 0;
  for (const auto& o : outs) work += o.rows * k * static_cast<std::int64_t>(groups.size());
  return work < 32 * 1024 || pool.size() == 1;
}

/// X's rows for a grouped product (quantized once per token with `source`; with packed weights
/// also interleaved group by group), into tasks' xs / xt.
void prepare_grouped(compute_pool& pool, const kernel_table& kt, prepared_x& px, std::vector<act_row>& gathered,
                     std::vector<std::size_t>& xt_offsets, grouped_tasks& tasks, act_format fmt, const float* x,
                     const std::int32_t* source, bool single) {
  std::int64_t m = 0;
  for (const expert_rows& g : tasks.groups) m = std::max(m, g.first + g.count);
  std::byte* xt;
  act_row* xs;
  if (source) {
    // The tokens' rows quantized once, then viewed in gathered order.
    const std::int64_t tokens = *std::max_element(source, source + m) + 1;
    const act_row* by_token = prepare_rows(pool, kt, px, fmt, x, tokens, tasks.k, single, false, xt);
    xs = scratch(gathered, static_cast<std::size_t>(m));
    for (std::int64_t i = 0; i < m; ++i) xs[i] = by_token[source[i]];
  } else {
    xs = prepare_rows(pool, kt, px, fmt, x, m, tasks.k, single, false, xt);
  }
  // Packed weights: each group's rows interleaved in a tile stream of their own, from xt_at[g].
  if (tasks.any_packed()) xt = interleave_groups(pool, px, fmt, xs, tasks.groups, tasks.k, single, xt_offsets);
  tasks.x = x;
  tasks.xs = xs;
  tasks.xt = xt;
  tasks.xt_at = xt_offsets.data();  // the workers see this thread's through it
}

}  // namespace

void matmul_grouped(compute_pool& pool, const kernel_table& kt, std::span<const grouped_out> outs, std::span<const expert_rows> groups,
                    std::int64_t k, const float* x, const std::int32_t* source) {
  if (outs.empty() || groups.empty()) return;
  const act_format fmt = act_format_for(outs[0].type);
  if (outs.size() > k_matmul_max_outputs ||
      (outs.size() > 1 && !std::all_of(outs.begin(), outs.end(), [&](const grouped_out& o) { return act_format_for(o.type) == fmt; }))) {
    for (const auto& o : outs) matmul_grouped(pool, kt, std::span(&o, 1), groups, k, x, source);
    return;
  }
  if (source && fmt == act_format::f32) throw std::invalid_argument("matmul_grouped: source rows are for quantized weights");
  const bool single = grouped_single(pool, outs, groups, k);
  thread_local prepared_x px;
  thread_local std::vector<act_row> gathered;
  thread_local std::vector<std::size_t> xt_offsets;
  grouped_tasks tasks(pool, kt, outs, groups, k);
  prepare_grouped(pool, kt, px, gathered, xt_offsets, tasks, fmt, x, source, single);
  const std::int64_t n_tasks = tasks.count();
  if (single) {
    for (std::int64_t t = 0; t < n_tasks; ++t) tasks(t);
    return;
  }
  auto each = [&](int t, int) { tasks(t); };
  pool.parallel_for(static_cast<int>(n_tasks), std::ref(each));
}

void matmul_experts(compute_pool& pool, const kernel_table& kt, std::span<const grouped_out> first, const grouped_out& second,
                    std::span<const expert_rows> groups, std::int64_t k, const float* x, const std::int32_t* source,
                    const float* second_x, const std::function<void(const expert_rows& group)>& between) {
  if (first.empty() || groups.empty()) return;
  const std::int64_t k2 = first[0].rows;
  const act_format fmt = act_format_for(first[0].type), fmt2 = act_format_for(second.type);
  const std::span<const grouped_out> second_outs(&second, 1);
  if (first.size() > k_matmul_max_outputs || !is_quantized_family(first, fmt) || !is_quantized_family(second_outs, fmt2) ||
      std::any_of(first.begin(), first.end(), [&](const grouped_out& o) { return o.rows != k2; })) {
    matmul_grouped(pool, kt, first, groups, k, x, source);
    for (const expert_rows& g : groups) between(g);
    matmul_grouped(pool, kt, second_outs, groups, k2, second_x);
    return;
  }
  const bool single = grouped_single(pool, first, groups, k) && grouped_single(pool, second_outs, groups, k2);
  thread_local prepared_x px, px2;
  thread_local std::vector<act_row> gathered;
  thread_local std::vector<std::size_t> xt_offsets, xt2_offsets;
  grouped_tasks one(pool, kt, first, groups, k), two(pool, kt, second_outs, groups, k2);
  prepare_grouped(pool, kt, px, gathered, xt_offsets, one, fmt, x, source, single);

  // The second product's rows: buffers sized here, filled group by group inside the job.
  std::int64_t m = 0;
  for (const expert_rows& g : groups) m = std::max(m, g.first + g.count);
  const std::size_t per_row = act_row_bytes(fmt2, k2);
  act_row* xs2 = scratch(px2.rows, static_cast<std::size_t>(m));
  std::byte* data2 = scratch(px2.data, per_row * static_cast<std::size_t>(m + 1));
  data2 += (64 - reinterpret_cast<std::uintptr_t>(data2) % 64) % 64;
  std::byte* xt2 = nullptr;
  if (two.any_packed()) {
    xt2_offsets.resize(groups.size() + 1);
    xt2_offsets[0] = 0;
    for (std::size_t g = 0; g < groups.size(); ++g) xt2_offsets[g + 1] = xt2_offsets[g] + interleaved_q8_x8_bytes(fmt2, groups[g].count, k2);
    xt2 = scratch(px2.interleaved, xt2_offsets.back());
  }
  two.xs = xs2;
  two.xt = xt2;
  two.xt_at = xt2_offsets.data();  // the workers see this thread's through it

  // Per group: first-product runs still to finish, and whether its second-product rows are ready.
  thread_local std::unique_ptr<std::atomic<std::int64_t>[]> left_buf;
  thread_local std::unique_ptr<std::atomic<int>[]> ready_buf;
  thread_local std::size_t state_size = 0;
  if (state_size < groups.size()) {
    state_size = groups.size();
    left_buf = std::make_unique<std::atomic<std::int64_t>[]>(state_size);
    ready_buf = std::make_unique<std::atomic<int>[]>(state_size);
  }
  std::atomic<std::int64_t>* left = left_buf.get();
  std::atomic<int>* ready = ready_buf.get();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    left[g].store(one.per_group, std::memory_order_relaxed);
    ready[g].store(0, std::memory_order_relaxed);
  }
  auto finish_group = [&](std::size_t gi) {
    const expert_rows& g = groups[gi];
    between(g);
    for (std::int64_t i = g.first; i < g.first + g.count; ++i)
      xs2[i] = quantize_activations(kt, fmt2, second_x + i * k2, k2, data2 + static_cast<std::size_t>(i) * per_row);
    if (xt2) interleave_q8_x8(fmt2, xs2 + g.first, 0, g.count, g.count, k2, xt2 + two.xt_at[gi]);
    ready[gi].store(1, std::memory_order_release);
  };
  // The tasks group by group, each group's first-product runs and then its second's. Each thread
  // runs its own contiguous share of them front to back (so its prefetch runs ahead along its own
  // rows, run after run), then takes what is left from the back. A task runs where it is claimed.
  // Before a group's second-product task, the thread claims and runs that group's first-product
  // tasks nobody has claimed yet: it then waits only on work in progress, whose threads never
  // wait themselves.
  const std::int64_t per = one.per_group + two.per_group, n_tasks = per * static_cast<std::int64_t>(groups.size());
  thread_local std::unique_ptr<std::atomic<std::uint8_t>[]> claimed_buf;
  thread_local std::int64_t claimed_size = 0;
  if (claimed_size < n_tasks) {
    claimed_size = n_tasks;
    claimed_buf = std::make_unique<std::atomic<std::uint8_t>[]>(static_cast<std::size_t>(n_tasks));
  }
  std::atomic<std::uint8_t>* claimed = claimed_buf.get();
  for (std::int64_t u = 0; u < n_tasks; ++u) claimed[u].store(0, std::memory_order_relaxed);
  auto claim = [&](std::int64_t u) {
    return claimed[u].load(std::memory_order_relaxed) == 0 && claimed[u].exchange(1, std::memory_order_acq_rel) == 0;
  };
  auto first_task = [&](std::size_t gi, std::int64_t r) {
    one(static_cast<std::int64_t>(gi) * one.per_group + r);
    if (left[gi].fetch_sub(1, std::memory_order_acq_rel) == 1) finish_group(gi);
  };
  auto task = [&](std::int64_t u) {
    const std::size_t gi = static_cast<std::size_t>(u / per);
    const std::int64_t r = u % per, g0 = static_cast<std::int64_t>(gi) * per;
    if (r < one.per_group) {
      first_task(gi, r);
      return;
    }
    for (std::int64_t f = 0; f < one.per_group; ++f)
      if (claim(g0 + f)) first_task(gi, f);
    compute_pool::wait_for(ready[gi]);
    two(static_cast<std::int64_t>(gi) * two.per_group + r - one.per_group);
  };
  if (single) {
    // One thread: every group's first products, then every group's second (each weight tensor
    // read in one sweep).
    for (std::size_t gi = 0; gi < groups.size(); ++gi)
      for (std::int64_t r = 0; r < one.per_group; ++r) first_task(gi, r);
    for (std::int64_t t = 0; t < two.count(); ++t) two(t);
    return;
  }
  auto job = [&](int ith, int nth) {
    std::int64_t b, e;
    compute_pool::split(n_tasks, 1, ith, nth, b, e);
    for (std::int64_t u = b; u < e; ++u)
      if (claim(u)) task(u);
    for (std::int64_t u = n_tasks - 1; u >= 0; --u)
      if (claim(u)) task(u);
  };
  pool.run(std::ref(job));
}

void matmul_reference(dtype wt, const void* w, std::int64_t rows, std::int64_t k, const float* x, std::int64_t m,
                      float* y) {
  std::vector<float> row(static_cast<std::size_t>(k));
  const auto* wb = static_cast<const std::byte*>(w);
  for (std::int64_t r = 0; r < rows; ++r) {
    dequantize_row(wt, wb + static_cast<std::size_t>(r) * row_bytes(wt, k), row.data(), k);
    for (std::int64_t i = 0; i < m; ++i) {
      double s = 0;
      for (std::int64_t j = 0; j < k; ++j) s += static_cast<double>(row[j]) * x[i * k + j];
      y[i * rows + r] = static_cast<float>(s);
    }
  }
}

}  // namespace strata::kernels
