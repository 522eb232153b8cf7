#include "src/common/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace strata::metrics {

void gauge::add(double d) {
  double cur = v_.load(std::memory_order_relaxed);
  while (!v_.compare_exchange_weak(cur, cur + d, std::memory_order_relaxed)) {
  }
}

histogram::histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<std::uint64_t>[bounds_.size() + 1]) {
  std::sort(bounds_.begin(), bounds_.end());
  for (std::size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void histogram::observe(double v) {
  auto it = std::lower_bound(bounds_.begin(), bounds_.end(), v);
  buckets_[static_cast<std::size_t>(it - bounds_.begin())].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  double cur = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  // The shortest form that reads back as the same double.
  char buf[32];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string with_labels(const std::string& name, const std::string& labels, const std::string& extra = {}) {
  std::string all = labels;
  if (!extra.empty()) all += (all.empty() ? "" : ",") + extra;
  return all.empty() ? name : name + "{" + all + "}";
}

}  // namespace

counter& registry::make_counter(const std::string& name, const std::string& help, const std::string& labels) {
  std::lock_guard lock(mu_);
  auto& f = families_[name];
  if (!f.type.empty() && f.type != "counter") throw std::logic_error("metric " + name + " registered twice");
  f.type = "counter";
  f.help = help;
  counters_.emplace_back();
  f.members.emplace_back(labels, counters_.size() - 1);
  return counters_.back();
}

gauge& registry::make_gauge(const std::string& name, const std::string& help, const std::string& labels) {
  std::lock_guard lock(mu_);
  auto& f = families_[name];
  if (!f.type.empty() && f.type != "gauge") throw std::logic_error("metric " + name + " registered twice");
  f.type = "gauge";
  f.help = help;
  gauges_.emplace_back();
  f.members.emplace_back(labels, gauges_.size() - 1);
  return gauges_.back();
}

histogram& registry::make_histogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                                    const std::string& labels) {
  std::lock_guard lock(mu_);
  auto& f = families_[name];
  if (!f.type.empty() && f.type != "histogram") throw std::logic_error("metric " + name + " registered twice");
  f.type = "histogram";
  f.help = help;
  histograms_.emplace_back(std::move(bounds));
  f.members.emplace_back(labels, histograms_.size() - 1);
  return histograms_.back();
}

std::string registry::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n";
    for (const auto& [labels, idx] : f.members) {
      if (f.type == "counter") {
        out += with_labels(name, labels) + " " + std::to_string(counters_[idx].value()) + "\n";
      } else if (f.type == "gauge") {
        out += with_labels(name, labels) + " " + number(gauges_[idx].value()) + "\n";
      } else {
        const histogram& h = histograms_[idx];
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i < h.bounds().size(); ++i) {
          cumulative += h.bucket(i);
          out += with_labels(name + "_bucket", labels, "le=\"" + number(h.bounds()[i]) + "\"") + " " +
                 std::to_string(cumulative) + "\n";
        }
        cumulative += h.bucket(h.bounds().size());
        out += with_labels(name + "_bucket", labels, "le=\"+Inf\"") + " " + std::to_string(cumulative) + "\n";
        out += with_labels(name + "_sum", labels) + " " + number(h.sum()) + "\n";
        out += with_labels(name + "_count", labels) + " " + std::to_string(h.count()) + "\n";
      }
    }
  }
  return out;
}

}  // namespace strata::metrics
