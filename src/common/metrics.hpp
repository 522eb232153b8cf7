#pragma once
// metrics: Prometheus counters, gauges and histograms, updated lock-free from any thread and
// rendered in the text exposition format for GET /metrics. Every name starts with "strata_".

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace strata::metrics {

class counter {
 public:
  void inc(std::uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

class gauge {
 public:
  void set(double v) { v_.store(v, std::memory_order_relaxed); }
  void add(double d);
  double value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0};
};

/// Cumulative buckets as Prometheus defines them (le = upper bound, +Inf implied).
class histogram {
 public:
  explicit histogram(std::vector<double> bounds);
  void observe(double v);
  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  const std::vector<double>& bounds() const { return bounds_; }
  std::uint64_t bucket(std::size_t i) const { return buckets_[i].load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // per bound, not cumulative
  std::atomic<std::uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

/// Owns every metric; metrics live as long as the registry, so references to them stay valid.
class registry {
 public:
  counter& make_counter(const std::string& name, const std::string& help, const std::string& labels = {});
  gauge& make_gauge(const std::string& name, const std::string& help, const std::string& labels = {});
  histogram& make_histogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                            const std::string& labels = {});
  /// The text exposition format (version 0.0.4).
  std::string render() const;

 private:
  struct family {
    std::string help;
    std::string type;
    // label set ("" or `a="b",c="d"`) -> metric, in insertion order
    std::vector<std::pair<std::string, std::size_t>> members;
  };
  mutable std::mutex mu_;
  std::map<std::string, family> families_;
  std::deque<counter> counters_;
  std::deque<gauge> gauges_;
  std::deque<histogram> histograms_;
};

}  // namespace strata::metrics
