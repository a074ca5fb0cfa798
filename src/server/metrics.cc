#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace hachi::server::metrics {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      counts_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {}

void Histogram::Observe(double v) {
  if (std::isnan(v)) return;  // would land in the first bucket and poison the sum
  // The first bound >= v: Prometheus buckets are "less than or equal".
  const size_t i = static_cast<size_t>(
      std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::Cumulative() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  uint64_t acc = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    acc += counts_[i].load(std::memory_order_relaxed);
    out[i] = acc;
  }
  return out;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> b;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) b.push_back(v);
  return b;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Shortest text that reads back as the same double ("0.005", not
  // 0.0050000000000000001).
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string EscapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

bool NameChar(char c, bool first, bool colon) {
  const bool alpha =
      (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
  return alpha || (!first && c >= '0' && c <= '9');
}

bool ValidName(std::string_view name, bool colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!NameChar(name[i], i == 0, colon)) return false;
  }
  return true;
}

std::string_view TypeName(Type t) {
  switch (t) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

Writer::Labels Zip(const std::vector<std::string>& names,
                   const std::vector<std::string>& values) {
  Writer::Labels l;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    l.emplace_back(names[i], values[i]);
  }
  return l;
}

template <typename T>
void WriteFamily(const Family<T>& f, Type type, Writer& w) {
  w.Begin(f.name(), f.help(), type);
  f.ForEach([&](const std::vector<std::string>& values, const T& s) {
    Writer::Labels labels = Zip(f.labels(), values);
    if constexpr (std::is_same_v<T, Histogram>) {
      const std::vector<uint64_t> cum = s.Cumulative();
      std::vector<std::string> les;  // kept alive while `labels` points into them
      les.reserve(cum.size());
      for (size_t i = 0; i < cum.size(); ++i) {
        les.push_back(i < s.bounds().size() ? FormatValue(s.bounds()[i]) : "+Inf");
      }
      for (size_t i = 0; i < cum.size(); ++i) {
        Writer::Labels b = labels;
        b.emplace_back("le", les[i]);
        w.Sample(b, static_cast<double>(cum[i]), "_bucket");
      }
      w.Sample(labels, s.sum(), "_sum");
      w.Sample(labels, static_cast<double>(cum.back()), "_count");
    } else {
      w.Sample(labels, s.value());
    }
  });
}

}  // namespace

bool ValidMetricName(std::string_view name) { return ValidName(name, true); }
bool ValidLabelName(std::string_view name) { return ValidName(name, false); }

void Writer::Begin(std::string_view name, std::string_view help, Type type) {
  name_ = std::string(name);
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += EscapeHelp(help);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += TypeName(type);
  out_ += '\n';
}

void Writer::Sample(const Labels& labels, double value, std::string_view suffix) {
  out_ += name_;
  out_ += suffix;
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out_ += ',';
      out_ += labels[i].first;
      out_ += "=\"";
      out_ += EscapeLabelValue(labels[i].second);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += FormatValue(value);
  out_ += '\n';
}

Family<Counter>& Registry::AddCounter(std::string name, std::string help,
                                      std::vector<std::string> labels) {
  MutexLock lock(&mu_);
  Entry e{Type::kCounter, {}, {}, {}};
  e.counter = std::make_unique<Family<Counter>>(std::move(name), std::move(help),
                                                std::move(labels));
  entries_.push_back(std::move(e));
  return *entries_.back().counter;
}

Family<Gauge>& Registry::AddGauge(std::string name, std::string help,
                                  std::vector<std::string> labels) {
  MutexLock lock(&mu_);
  Entry e{Type::kGauge, {}, {}, {}};
  e.gauge = std::make_unique<Family<Gauge>>(std::move(name), std::move(help),
                                            std::move(labels));
  entries_.push_back(std::move(e));
  return *entries_.back().gauge;
}

Family<Histogram>& Registry::AddHistogram(std::string name, std::string help,
                                          std::vector<double> bounds,
                                          std::vector<std::string> labels) {
  MutexLock lock(&mu_);
  Entry e{Type::kHistogram, {}, {}, {}};
  e.histogram = std::make_unique<Family<Histogram>>(std::move(name), std::move(help),
                                                    std::move(labels), std::move(bounds));
  entries_.push_back(std::move(e));
  return *entries_.back().histogram;
}

void Registry::AddCollector(std::function<void(Writer&)> collect) {
  MutexLock lock(&mu_);
  collectors_.push_back(std::move(collect));
}

std::string Registry::Render() const {
  // Families are never removed, so the pointers outlive the copy of the list; the
  // collectors run with no registry lock held.
  std::vector<const Entry*> entries;
  std::vector<std::function<void(Writer&)>> collectors;
  {
    MutexLock lock(&mu_);
    for (const Entry& e : entries_) entries.push_back(&e);
    collectors = collectors_;
  }
  Writer w;
  for (const Entry* e : entries) {
    switch (e->type) {
      case Type::kCounter:
        WriteFamily(*e->counter, e->type, w);
        break;
      case Type::kGauge:
        WriteFamily(*e->gauge, e->type, w);
        break;
      case Type::kHistogram:
        WriteFamily(*e->histogram, e->type, w);
        break;
    }
  }
  for (const auto& c : collectors) c(w);
  return w.Take();
}

}  // namespace hachi::server::metrics
