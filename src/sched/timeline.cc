#include "sched/timeline.h"

#include <algorithm>

namespace hachi::sched {

void Timeline::Reset(int nodes) {
  // Keeps the inner vectors' memory: a Scheduler reuses one Timeline every cycle.
  releases_.resize(nodes);
  holds_.resize(nodes);
  for (auto& v : releases_) v.clear();
  for (auto& v : holds_) v.clear();
}

void Timeline::AddRelease(int node, const Release& r) {
  auto& v = releases_[node];
  auto it = std::upper_bound(v.begin(), v.end(), r.end,
                             [](Time t, const Release& x) { return t < x.end; });
  v.insert(it, r);
}

void Timeline::Advance(int node, JobId job, Time end) {
  auto& v = releases_[node];
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].job != job || v[i].end <= end) continue;
    Release r = v[i];
    r.end = end;
    v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
    AddRelease(node, r);
    return;
  }
}

void Timeline::AddHold(int node, const Hold& h) { holds_[node].push_back(h); }

bool Timeline::HasWholeHold(int node) const {
  for (const Hold& h : holds_[node]) {
    if (h.whole) return true;
  }
  return false;
}

Timeline::Offer Timeline::At(int node, GpuSet free_now, int cpus_now, int64_t memory_now,
                             bool whole_now, bool shared_now, Time now, Time t,
                             Duration d, const std::vector<JobId>* gone) const {
  Offer o;
  o.gpus = free_now;
  o.cpus = cpus_now;
  o.memory_mib = memory_now;
  o.whole_running = whole_now;
  o.shared_running = shared_now;
  if (t > now || gone != nullptr) {
    o.whole_running = false;
    o.shared_running = false;
    for (const Release& r : releases_[node]) {
      if (r.end <= t || (gone != nullptr &&
                         std::find(gone->begin(), gone->end(), r.job) != gone->end())) {
        o.gpus = o.gpus | r.gpus;
        o.cpus += r.cpus;
        o.memory_mib += r.memory_mib;
        o.last_release = r.job;
        o.last_release_end = r.end;
      } else if (r.whole) {
        o.whole_running = true;
      } else {
        o.shared_running = true;
      }
    }
  }
  const Time end = t + d;
  for (const Hold& h : holds_[node]) {
    if (h.start < end && h.end > t) {
      o.gpus = o.gpus - h.gpus;
      o.cpus -= h.cpus;
      o.memory_mib -= h.memory_mib;
      if (h.whole) o.whole_held = true;
    }
  }
  return o;
}

void Timeline::ChangePoints(int node, Time from, Duration d,
                            std::vector<Time>* out) const {
  out->clear();
  out->push_back(from);
  for (const Release& r : releases_[node]) {
    if (r.end > from) out->push_back(r.end);
  }
  for (const Hold& h : holds_[node]) {
    if (h.end > from) out->push_back(h.end);
    // The hold overlaps [t, t + d) for t in (start - d, end).
    if (h.start - d + 1 > from) out->push_back(h.start - d + 1);
  }
  // Releases come sorted; holds are few, so sort only when there are some.
  if (!holds_[node].empty()) std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
}

Time Timeline::EarliestCount(int node, GpuSet free_now, int count, Time now) const {
  if (free_now.size() >= count) return now;
  GpuSet g = free_now;
  for (const Release& r : releases_[node]) {
    g = g | r.gpus;
    if (g.size() >= count) return std::max(r.end, now);
  }
  return kNever;
}

}  // namespace hachi::sched
