#include "src/sampling/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "src/sampling/vocab_ops.hpp"

namespace strata::sampling {
namespace {

constexpr float minus_inf = -std::numeric_limits<float>::infinity();

}  // namespace

sampler::sampler(sampling_params p, const std::vector<std::int32_t>& history) : p_(std::move(p)), rng_(p_.seed) {
  repetition_on_ = p_.repetition_penalty != 1.0f && p_.penalty_last_n != 0;
  presence_on_ = p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f;
  if (repetition_on_) {
    std::size_t first = 0;
    if (p_.penalty_last_n > 0) {
      const auto n = static_cast<std::size_t>(p_.penalty_last_n);
      window_.reserve(n);
      window_counts_.reserve(n);
      first = history.size() > n ? history.size() - n : 0;
    } else {
      window_counts_.reserve(history.size() + 256);
    }
    for (std::size_t i = first; i < history.size(); ++i) {
      if (p_.penalty_last_n > 0) window_.push_back(history[i]);
      window_counts_.add(history[i]);
    }
  }
  if (presence_on_) generated_counts_.reserve(256);
}

void sampler::accept(std::int32_t token) {
  if (repetition_on_) {
    if (p_.penalty_last_n < 0) {
      window_counts_.add(token);
    } else if (window_.size() < static_cast<std::size_t>(p_.penalty_last_n)) {
      window_.push_back(token);
      window_counts_.add(token);
    } else {
      // Full ring: window_next_ holds the oldest token, which leaves the window.
      window_counts_.remove(window_[window_next_]);
      window_[window_next_] = token;
      window_counts_.add(token);
      window_next_ = (window_next_ + 1) % window_.size();
    }
  }
  if (presence_on_) generated_counts_.add(token);
}

void sampler::remember_raw(std::int32_t token, float raw) { raw_.emplace_back(token, raw); }

void sampler::apply_bias_and_penalties(float* logits, std::int32_t n, bool keep_raw) {
  for (const auto& [t, b] : p_.logit_bias) {
    if (t < 0 || t >= n) continue;
    if (keep_raw) remember_raw(t, logits[t]);
    // -100 is OpenAI's "ban": make it exact rather than merely very unlikely.
    logits[t] = b <= -100.0f ? minus_inf : logits[t] + b;
  }
  if (repetition_on_) {
    const float rp = p_.repetition_penalty;
    window_counts_.for_each([&](std::int32_t t, std::int32_t) {
      if (t >= n) return;
      if (keep_raw) remember_raw(t, logits[t]);
      logits[t] = logits[t] > 0.0f ? logits[t] / rp : logits[t] * rp;
    });
  }
  if (presence_on_) {
    generated_counts_.for_each([&](std::int32_t t, std::int32_t count) {
      if (t >= n) return;
      if (keep_raw) remember_raw(t, logits[t]);
      logits[t] -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(count);
    });
  }
}

choice sampler::draw(float* logits, std::int32_t n) {
  choice c;
  if (n <= 0) return c;
  const bool want_logprobs = p_.logprobs || p_.top_logprobs > 0;
  double lse = 0.0;
  if (want_logprobs) {
    const float mx = max_logit(logits, n);
    lse = mx + std::log(sum_exp(logits, n, mx));
    if (p_.top_logprobs > 0) {
      // The N largest raw logits, kept sorted by insertion: N <= 20, and most logits fail the
      // first comparison.
      const auto want = static_cast<std::size_t>(std::min(p_.top_logprobs, n));
      auto& top = c.top_logprobs;
      top.reserve(want);
      for (std::int32_t i = 0; i < n; ++i) {
        const float l = logits[i];
        if (l != l) continue;
        if (top.size() == want) {
          if (!(l > top.back().second)) continue;
        } else {
          top.emplace_back();
        }
        std::size_t pos = top.size() - 1;
        for (; pos > 0 && top[pos - 1].second < l; --pos) top[pos] = top[pos - 1];
        top[pos] = {i, l};
      }
      for (auto& e : top) e.second = static_cast<float>(e.second - lse);
    }
  }
  raw_.clear();
  apply_bias_and_penalties(logits, n, want_logprobs);

  if (p_.temperature <= 0.0f) {
    c.token = argmax(logits, n);
  } else {
    c.token = sample(logits, n);
  }

  if (want_logprobs) {
    float raw = logits[c.token];
    for (const auto& [t, v] : raw_) {
      if (t == c.token) {
        raw = v;  // the first saved value is the one before any change
        break;
      }
    }
    c.logprob = static_cast<float>(raw - lse);
  }
  accept(c.token);
  return c;
}

double sampler::uniform() noexcept { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

std::int32_t sampler::sample(const float* logits, std::int32_t n) {
  const auto un = static_cast<std::size_t>(n);
  if (cand_.size() < un) cand_.resize(un);
  if (weights_.size() < un) weights_.resize(un);
  const bool top_k_on = p_.top_k > 0 && p_.top_k < n;
  const bool top_p_on = p_.top_p < 1.0f;
  const bool min_p_on = p_.min_p > 0.0f;

  std::size_t keep = 0;
  if (top_k_on) {
    keep = static_cast<std::size_t>(p_.top_k);
    select_top_k(logits, n, keep);
    if (top_p_on) keep = cut_nucleus(keep);
    if (min_p_on) keep = cut_min_p(keep);
    return draw_candidates(keep);
  }
  if (top_p_on) {
    keep = select_nucleus(logits, n);
    if (min_p_on) keep = cut_min_p(keep);
    return draw_candidates(keep);
  }
  const float mx = max_logit(logits, n);
  if (!(mx > minus_inf)) return 0;  // everything banned
  if (min_p_on) {
    // p_i >= min_p * p_max  <=>  logit_i >= max + log(min_p): one pass, no sort.
    const float threshold = mx + std::log(p_.min_p);
    for (std::int32_t i = 0; i < n; ++i)
      if (logits[i] >= threshold) cand_[keep++] = {i, logits[i]};
    return draw_candidates(keep);
  }
  // No truncation: draw straight from the whole vocabulary.
  const float inv_t = 1.0f / p_.temperature;
  const double total = exp_and_sum(logits, n, mx, inv_t, weights_.data());
  double r = uniform() * total;
  std::int32_t last = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    const double w = weights_[static_cast<std::size_t>(i)];
    if (w <= 0.0 || w != w) continue;
    if (r < w) return i;
    r -= w;
    last = i;
  }
  return last;  // rounding left r just past the end
}

void sampler::select_top_k(const float* logits, std::int32_t n, std::size_t k) {
  // A min-heap of the k largest seen so far; most logits lose to its root and cost one compare.
  auto greater = [](const candidate& a, const candidate& b) { return a.logit > b.logit; };
  const auto first = cand_.begin();
  const auto last = first + static_cast<std::ptrdiff_t>(k);
  for (std::size_t i = 0; i < k; ++i) {
    const float l = logits[i];
    cand_[i] = {static_cast<std::int32_t>(i), l == l ? l : minus_inf};  // NaN would break the order
  }
  std::make_heap(first, last, greater);
  for (auto i = static_cast<std::int32_t>(k); i < n; ++i) {
    if (logits[i] > cand_[0].logit) {
      std::pop_heap(first, last, greater);
      cand_[k - 1] = {i, logits[i]};
      std::push_heap(first, last, greater);
    }
  }
  std::sort_heap(first, last, greater);  // ascending under `greater`: largest first
}

std::size_t sampler::select_nucleus(const float* logits, std::int32_t n) {
  const float mx = max_logit(logits, n);
  if (!(mx > minus_inf)) {
    cand_[0] = {0, logits[0]};
    return 1;
  }
  // Bucket the vocabulary by distance below the top logit, in bins of equal width, with each
  // bin's probability mass. Walking the bins from the top finds the one where the mass crosses
  // top_p: every token above it is in the nucleus, and only that bin's tokens need sorting.
  // Tokens more than nucleus_span below the top share the last bin.
  constexpr float nucleus_span = 32.0f;
  constexpr float bin_scale = static_cast<float>(nucleus_bins) / nucleus_span;
  auto bin_of = [&](float l) {
    const float d = (mx - l) * bin_scale;
    return d < static_cast<float>(nucleus_bins - 1) ? static_cast<std::size_t>(d) : nucleus_bins - 1;  // NaN, -inf: last
  };
  bin_mass_.fill(0.0);
  double z = 0.0;
  for (std::int32_t i = 0; i < n; ++i) {
    const float w = std::exp(logits[i] - mx);
    z += w;
    bin_mass_[bin_of(logits[i])] += w;
  }
  const double target = p_.top_p * z;
  double cum = 0.0;
  std::size_t edge = 0;
  while (edge + 1 < nucleus_bins && cum + bin_mass_[edge] < target) cum += bin_mass_[edge++];
  // Tokens of the bins above the edge first, then the edge bin's, which alone get sorted.
  std::size_t above = 0, m = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    const std::size_t b = bin_of(logits[i]);
    if (b < edge) {
      if (m > above) cand_[m] = cand_[above];
      cand_[above++] = {i, logits[i]};
      ++m;
    } else if (b == edge) {
      cand_[m++] = {i, logits[i]};
    }
  }
  auto greater = [](const candidate& a, const candidate& b) { return a.logit > b.logit; };
  std::sort(cand_.begin() + static_cast<std::ptrdiff_t>(above), cand_.begin() + static_cast<std::ptrdiff_t>(m), greater);
  for (std::size_t i = above; i < m; ++i) {
    cum += std::exp(cand_[i].logit - mx);
    if (cum >= target) return i + 1;
  }
  return m;  // rounding kept the sum just short of the target: the whole edge bin
}

std::size_t sampler::cut_nucleus(std::size_t keep) {
  const float mx = cand_[0].logit;
  if (!(mx > minus_inf)) return 1;
  double z = 0.0;
  for (std::size_t i = 0; i < keep; ++i) z += weights_[i] = std::exp(cand_[i].logit - mx);
  const double target = p_.top_p * z;
  double cum = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    cum += weights_[i];
    if (cum >= target) return i + 1;
  }
  return keep;
}

std::size_t sampler::cut_min_p(std::size_t keep) {
  float mx = minus_inf;
  for (std::size_t i = 0; i < keep; ++i) mx = std::max(mx, cand_[i].logit);
  const float threshold = mx + std::log(p_.min_p);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < keep; ++i)
    if (cand_[i].logit >= threshold) cand_[kept++] = cand_[i];
  return kept > 0 ? kept : 1;
}

std::int32_t sampler::draw_candidates(std::size_t keep) {
  float mx = minus_inf;
  for (std::size_t i = 0; i < keep; ++i) mx = std::max(mx, cand_[i].logit);
  if (!(mx > minus_inf)) return cand_[0].id;
  const float inv_t = 1.0f / p_.temperature;
  double total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) total += weights_[i] = std::exp((cand_[i].logit - mx) * inv_t);
  double r = uniform() * total;
  std::int32_t last = cand_[0].id;
  for (std::size_t i = 0; i < keep; ++i) {
    const double w = weights_[i];
    if (w <= 0.0) continue;
    if (r < w) return cand_[i].id;
    r -= w;
    last = cand_[i].id;
  }
  return last;
}

}  // namespace strata::sampling
