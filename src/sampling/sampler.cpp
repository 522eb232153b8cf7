#include "src/sampling/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace strata::sampling {

result<void> sampling_params::validate() const {
  if (!(temperature >= 0.0f && temperature <= 2.0f)) return fail(errc::invalid_argument, "temperature must be in [0, 2]");
  if (!(top_p > 0.0f && top_p <= 1.0f)) return fail(errc::invalid_argument, "top_p must be in (0, 1]");
  if (top_k < 0) return fail(errc::invalid_argument, "top_k must be >= 0");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return fail(errc::invalid_argument, "min_p must be in [0, 1]");
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) return fail(errc::invalid_argument, "presence_penalty must be in [-2, 2]");
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) return fail(errc::invalid_argument, "frequency_penalty must be in [-2, 2]");
  if (!(repetition_penalty > 0.0f && repetition_penalty <= 10.0f)) return fail(errc::invalid_argument, "repetition_penalty must be in (0, 10]");
  if (top_logprobs < 0 || top_logprobs > 20) return fail(errc::invalid_argument, "top_logprobs must be in [0, 20]");
  for (const auto& [t, b] : logit_bias)
    if (!(b >= -100.0f && b <= 100.0f)) return fail(errc::invalid_argument, "logit_bias values must be in [-100, 100]");
  return {};
}

sampler::sampler(sampling_params p, std::vector<std::int32_t> history) : p_(std::move(p)), rng_(p_.seed) {
  for (std::int32_t t : history) ++prompt_counts_[t];
}

choice sampler::draw(float* logits, std::int32_t n) {
  choice c;
  // Logprobs of the unmodified distribution.
  if (p_.logprobs || p_.top_logprobs > 0) {
    float mx = *std::max_element(logits, logits + n);
    double sum = 0;
    for (std::int32_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
    const float lse = mx + static_cast<float>(std::log(sum));
    if (p_.top_logprobs > 0) {
      cand_.resize(static_cast<std::size_t>(n));
      for (std::int32_t i = 0; i < n; ++i) cand_[static_cast<std::size_t>(i)] = {i, logits[i]};
      const auto k = static_cast<std::ptrdiff_t>(std::min(p_.top_logprobs, n));
      std::partial_sort(cand_.begin(), cand_.begin() + k, cand_.end(), [](const candidate& a, const candidate& b) { return a.logit > b.logit; });
      for (std::ptrdiff_t i = 0; i < k; ++i) c.top_logprobs.emplace_back(cand_[static_cast<std::size_t>(i)].id, cand_[static_cast<std::size_t>(i)].logit - lse);
    }
    lse_ = lse;
    raw_.assign(logits, logits + n);  // the chosen token's logprob is read from here at the end
  }
  for (const auto& [t, b] : p_.logit_bias)
    if (t >= 0 && t < n) logits[t] += b;
  if (p_.repetition_penalty != 1.0f) {
    auto penalize = [&](std::int32_t t) {
      if (t < 0 || t >= n) return;
      logits[t] = logits[t] > 0 ? logits[t] / p_.repetition_penalty : logits[t] * p_.repetition_penalty;
    };
    for (const auto& [t, cnt] : prompt_counts_)
      if (!generated_counts_.contains(t)) penalize(t);
    for (const auto& [t, cnt] : generated_counts_) penalize(t);
  }
  if (p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) {
    for (const auto& [t, cnt] : generated_counts_)
      if (t >= 0 && t < n) logits[t] -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(cnt);
  }

  std::int32_t chosen = 0;
  if (p_.temperature <= 0.0f) {
    chosen = static_cast<std::int32_t>(std::max_element(logits, logits + n) - logits);
  } else {
    cand_.resize(static_cast<std::size_t>(n));
    for (std::int32_t i = 0; i < n; ++i) cand_[static_cast<std::size_t>(i)] = {i, logits[i]};
    auto by_logit = [](const candidate& a, const candidate& b) { return a.logit > b.logit; };
    std::size_t keep = cand_.size();
    if (p_.top_k > 0 && static_cast<std::size_t>(p_.top_k) < keep) {
      keep = static_cast<std::size_t>(p_.top_k);
      std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(keep), cand_.end(), by_logit);
    } else if (p_.top_p < 1.0f || p_.min_p > 0.0f) {
      std::sort(cand_.begin(), cand_.end(), by_logit);
    } else {
      // No truncation: the maximum is enough for a stable softmax.
      auto mx = std::max_element(cand_.begin(), cand_.end(), [](const candidate& a, const candidate& b) { return a.logit < b.logit; });
      std::iter_swap(cand_.begin(), mx);
    }
    cand_.resize(keep);
    // Probabilities at temperature 1 decide top_p and min_p (llama.cpp applies temperature last).
    const float mx = cand_[0].logit;
    std::vector<double> prob(keep);
    double sum = 0;
    for (std::size_t i = 0; i < keep; ++i) sum += prob[i] = std::exp(static_cast<double>(cand_[i].logit - mx));
    if (p_.top_p < 1.0f) {
      double acc = 0;
      for (std::size_t i = 0; i < keep; ++i) {
        acc += prob[i] / sum;
        if (acc >= p_.top_p) {
          keep = i + 1;
          break;
        }
      }
    }
    if (p_.min_p > 0.0f) {
      std::size_t i = 1;
      while (i < keep && prob[i] >= p_.min_p * prob[0]) ++i;
      keep = i;
    }
    double total = 0;
    std::vector<double>& w = prob;
    for (std::size_t i = 0; i < keep; ++i) total += w[i] = std::exp(static_cast<double>(cand_[i].logit - mx) / p_.temperature);
    double r = std::uniform_real_distribution<double>(0.0, total)(rng_);
    chosen = cand_[keep - 1].id;
    for (std::size_t i = 0; i < keep; ++i) {
      if (r < w[i]) {
        chosen = cand_[i].id;
        break;
      }
      r -= w[i];
    }
  }
  c.token = chosen;
  if (p_.logprobs || p_.top_logprobs > 0) c.logprob = raw_[static_cast<std::size_t>(chosen)] - lse_;
  ++generated_counts_[chosen];
  return c;
}

}  // namespace strata::sampling
