// Metrics: a small registry of counters, gauges and histograms with labels, rendered in
// the Prometheus text exposition format 0.0.4 (GET /metrics; docs/metrics.md).
//
// Thread-safety: every method may be called from any thread at any time. Updating a
// series (Counter::Inc, Gauge::Set, Histogram::Observe) is lock-free — relaxed atomics,
// no allocation, no string formatting — so the scheduling loop and the store may
// observe while holding their own locks. Finding a labelled series (Family::With)
// takes that family's mutex for one map lookup; a hot path keeps the reference, which
// stays valid for the registry's life (series are never removed). Render formats under
// each family's mutex in turn, never two at once, and runs the collectors with no
// registry lock held, so a collector may take its owner's lock.
//
// A histogram's _count is the sum of its buckets as read by Render, so _count always
// equals the +Inf bucket; _sum is read separately and may lag a concurrent Observe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/mutex.h"

namespace hachi::server::metrics {

enum class Type : uint8_t { kCounter, kGauge, kHistogram };

class Counter {
 public:
  void Inc(double by = 1) { value_.fetch_add(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double by) { value_.fetch_add(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Fixed buckets: `bounds` are the upper bounds (le), strictly ascending, +Inf implied.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);

  const std::vector<double>& bounds() const { return bounds_; }
  // Cumulative counts per bound, then +Inf (bounds().size() + 1 values), and the sum.
  std::vector<uint64_t> Cumulative() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  const std::vector<double> bounds_;
  // Per bucket (not cumulative), the last one for values above every bound.
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0};
};

// Bucket bounds: `count` bounds from `start`, each `factor` times the last.
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// One metric name with its series, one per distinct tuple of label values.
template <typename T>
class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> labels,
         std::vector<double> bounds = {})
      : name_(std::move(name)),
        help_(std::move(help)),
        labels_(std::move(labels)),
        bounds_(std::move(bounds)) {}

  // The series for these label values (as many as the family's label names, in their
  // order), created on first use.
  T& With(const std::vector<std::string>& values) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    auto it = series_.find(values);
    if (it == series_.end()) it = series_.emplace(values, Make()).first;
    return *it->second;
  }
  T& With(std::initializer_list<std::string_view> values) {
    return With(std::vector<std::string>(values.begin(), values.end()));
  }
  // The unlabelled series (a family without label names).
  T& Get() { return With(std::vector<std::string>{}); }

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& labels() const { return labels_; }
  // Calls f(values, series) for each series in label order, under the family's mutex.
  template <typename F>
  void ForEach(F&& f) const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    for (const auto& [values, series] : series_) f(values, *series);
  }

 private:
  std::unique_ptr<T> Make() const {
    if constexpr (std::is_same_v<T, Histogram>) {
      return std::make_unique<T>(bounds_);
    } else {
      return std::make_unique<T>();
    }
  }

  const std::string name_, help_;
  const std::vector<std::string> labels_;
  const std::vector<double> bounds_;  // histograms
  mutable Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> series_ GUARDED_BY(mu_);
};

// Writes metric families in the text format; collectors use it for values computed at
// scrape time. Call Begin once per family, then Sample for each of its series.
class Writer {
 public:
  using Labels = std::vector<std::pair<std::string_view, std::string_view>>;
  void Begin(std::string_view name, std::string_view help, Type type);
  // `name{labels} value` under the family begun last; `suffix` is "_bucket", "_sum",
  // "_count" for histograms, else empty.
  void Sample(const Labels& labels, double value, std::string_view suffix = {});
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
  std::string name_;
};

class Registry {
 public:
  // Names must be unique and match [a-zA-Z_:][a-zA-Z0-9_:]*; label names
  // [a-zA-Z_][a-zA-Z0-9_]* (not "le" on histograms). The registry keeps the family.
  Family<Counter>& AddCounter(std::string name, std::string help,
                              std::vector<std::string> labels = {}) EXCLUDES(mu_);
  Family<Gauge>& AddGauge(std::string name, std::string help,
                          std::vector<std::string> labels = {}) EXCLUDES(mu_);
  Family<Histogram>& AddHistogram(std::string name, std::string help,
                                  std::vector<double> bounds,
                                  std::vector<std::string> labels = {}) EXCLUDES(mu_);
  // Called by every Render, after the families, in the order added: writes families
  // whose values are computed at scrape time (gauges from the controller's state).
  void AddCollector(std::function<void(Writer&)> collect) EXCLUDES(mu_);

  // Every family, then every collector's output. A family with no series yet (a
  // labelled one nobody used) is written with its HELP and TYPE only.
  std::string Render() const EXCLUDES(mu_);

 private:
  struct Entry {
    Type type;
    std::unique_ptr<Family<Counter>> counter;
    std::unique_ptr<Family<Gauge>> gauge;
    std::unique_ptr<Family<Histogram>> histogram;
  };
  mutable Mutex mu_;  // guards the lists, not the families' series
  // A deque: Render keeps pointers while others add.
  std::deque<Entry> entries_ GUARDED_BY(mu_);
  std::vector<std::function<void(Writer&)>> collectors_ GUARDED_BY(mu_);
};

// The text format's pieces, exposed for tests: a sample value ("1", "0.25", "+Inf",
// "NaN"), a label value escaped (\\, \", \n), HELP text escaped (\\, \n).
std::string FormatValue(double v);
std::string EscapeLabelValue(std::string_view v);
std::string EscapeHelp(std::string_view v);
bool ValidMetricName(std::string_view name);
bool ValidLabelName(std::string_view name);

}  // namespace hachi::server::metrics
