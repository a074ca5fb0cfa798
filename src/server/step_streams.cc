#include "server/step_streams.h"

#include <algorithm>

namespace hachi::server {

std::string StepTopic(state::JobId job, int step) {
  return "step/" + std::to_string(job) + "." + std::to_string(step);
}

StepStreams::Stream& StepStreams::OpenLocked(const state::StepKey& key,
                                             const std::vector<std::string>& nodes) {
  auto [it, fresh] = streams_.try_emplace(key);
  if (fresh) it->second.nodes = nodes;
  return it->second;
}

void StepStreams::Open(const state::StepKey& key, std::vector<std::string> nodes,
                       bool kill_on_bad_exit, bool pty) {
  MutexLock lock(&mu_);
  Stream& s = OpenLocked(key, nodes);
  s.kill_on_bad_exit = kill_on_bad_exit;
  s.pty = pty;
}

bool StepStreams::IsPty(const state::StepKey& key) const {
  MutexLock lock(&mu_);
  auto it = streams_.find(key);
  return it != streams_.end() && it->second.pty;
}

void StepStreams::HoldLocked(state::JobId job, Stream* s, int64_t bytes) {
  s->held += bytes;
  auto it = job_held_.try_emplace(job, 0).first;
  it->second += bytes;
  if (it->second == 0) job_held_.erase(it);
}

int64_t StepStreams::JobHeldLocked(state::JobId job) const {
  auto it = job_held_.find(job);
  return it == job_held_.end() ? 0 : it->second;
}

Status StepStreams::RoomForStep(state::JobId job) const {
  MutexLock lock(&mu_);
  const int64_t held = JobHeldLocked(job);
  if (held < max_held_per_job_) return Status::Ok();
  return Busy("job " + std::to_string(job) + "'s steps hold " + std::to_string(held) +
              " bytes of output that their sruns have not read, and the server holds at "
              "most " +
              std::to_string(max_held_per_job_) +
              " for one job's steps; let them read it, or cancel those steps, before "
              "starting another");
}

bool StepStreams::Has(const state::StepKey& key) const {
  MutexLock lock(&mu_);
  return streams_.count(key) > 0;
}

StepStreams::Added StepStreams::Add(const state::StepKey& key, const std::string& node,
                                    const api::StepReport& report,
                                    const std::vector<std::string>& nodes,
                                    bool last_word) {
  MutexLock lock(&mu_);
  Stream& s = OpenLocked(key, nodes);
  Added out;
  out.kill_on_bad_exit = s.kill_on_bad_exit;
  int64_t& taken = s.node_next[node];
  // The batch covers [seq, seq + its chunks' sizes) of the node's stream: what is below
  // `taken` came before (a batch sent again); a gap above it was lost with an earlier
  // server (its buffers), and is said so.
  int64_t at = report.seq;
  if (at > taken) {
    api::OutputChunk gap;
    gap.lost = at - taken;
    gap.task = report.chunks.empty() ? 0 : report.chunks.front().task;
    s.chunks.push_back(std::move(gap));
    s.end += at - taken;
    taken = at;
  }
  bool whole = true;  // every chunk of the batch is taken
  for (const api::OutputChunk& c : report.chunks) {
    const int64_t size = c.size();
    const int64_t skip = std::clamp<int64_t>(taken - at, 0, size);
    if (skip == size) {
      at += size;
      continue;
    }
    api::OutputChunk piece = c;
    if (piece.lost > 0) {
      piece.lost -= skip;
    } else if (skip > 0) {
      piece.data.erase(0, static_cast<size_t>(skip));
    }
    // Bounded: past max_held unread bytes (or the job's steps past max_held_per_job)
    // nothing more is taken, and the agent keeps it (it stops reading its tasks, which
    // then wait on their writes). A step's last word has no later batch to wait for:
    // what does not fit is marked lost for the reader.
    if (piece.lost == 0 &&
        (s.held >= max_held_ || JobHeldLocked(key.job) >= max_held_per_job_)) {
      if (!last_word) {
        whole = false;
        break;
      }
      piece.lost = static_cast<int64_t>(piece.data.size());
      piece.data.clear();
    }
    at += size;
    HoldLocked(key.job, &s, static_cast<int64_t>(piece.data.size()));
    s.end += piece.size();
    s.chunks.push_back(std::move(piece));
    taken = at;
  }
  for (const api::TaskExit& reported : report.exits) {
    api::TaskExit e = reported;
    e.node = node;
    if (!s.exits.emplace(e.task, e).second) continue;
    const bool failed = !(e.kind == api::ExitKind::kExited && e.exit_code == 0);
    if (failed && !s.bad_exit_seen) {
      s.bad_exit_seen = true;
      out.bad_exit = true;
    }
  }
  // A last word is the node's last report: its agent drops the rest on `gone`.
  if ((report.done || last_word) && whole) s.nodes_done.insert(node);
  if (!s.all_done &&
      std::all_of(s.nodes.begin(), s.nodes.end(),
                  [&](const std::string& n) { return s.nodes_done.count(n) > 0; })) {
    s.all_done = true;
    out.all_done = true;
  }
  out.next = taken;
  return out;
}

StepStreams::Read StepStreams::ReadFrom(const state::StepKey& key, int64_t from,
                                        int64_t max_bytes, bool observe) {
  MutexLock lock(&mu_);
  Read r;
  auto it = streams_.find(key);
  if (it == streams_.end()) return r;
  Stream& s = it->second;
  r.known = true;
  from = std::clamp<int64_t>(from, 0, s.end);
  // What lies below `from` the reader has: dropped, its last bytes kept for observers.
  while (!observe && !s.chunks.empty() && s.base + s.chunks.front().size() <= from) {
    api::OutputChunk& front = s.chunks.front();
    const int64_t bytes = static_cast<int64_t>(front.data.size());
    HoldLocked(key.job, &s, -bytes);
    s.base += front.size();
    s.seen_held += bytes;
    s.seen.push_back(std::move(front));
    s.chunks.pop_front();
    while (s.seen.size() > 1 && s.seen_held > kObserverTail) {
      s.seen_held -= static_cast<int64_t>(s.seen.front().data.size());
      s.seen.pop_front();
    }
  }
  // An observer reads the kept tail, then what is held.
  int64_t at = s.base;
  if (observe) {
    for (const api::OutputChunk& c : s.seen) at -= c.size();
  }
  r.lost = std::max<int64_t>(0, at - from);
  r.from = std::max(from, at);
  int64_t room = max_bytes;
  auto take = [&](const api::OutputChunk& c) {
    const int64_t size = c.size();
    if (at + size <= r.from) {
      at += size;
      return;
    }
    if (room <= 0) return;
    api::OutputChunk piece = c;
    const int64_t skip = r.from - at;  // > 0 only for the first chunk
    if (skip > 0) {
      if (piece.lost > 0) {
        piece.lost -= skip;
      } else {
        piece.data.erase(0, static_cast<size_t>(skip));
      }
    }
    room -= static_cast<int64_t>(piece.data.size());
    at += size;
    r.chunks.push_back(std::move(piece));
  };
  if (observe) {
    for (const api::OutputChunk& c : s.seen) take(c);
  }
  for (const api::OutputChunk& c : s.chunks) take(c);
  r.next = std::max(at, r.from);
  r.all_done = s.all_done;
  r.ended = s.ended;
  if (s.ended) {
    r.ended_for = std::chrono::microseconds(clock_->MonotonicMicros() - s.ended_at_us);
  }
  for (const auto& [task, e] : s.exits) r.exits.push_back(e);
  return r;
}

std::vector<api::TaskExit> StepStreams::Exits(const state::StepKey& key) const {
  MutexLock lock(&mu_);
  std::vector<api::TaskExit> out;
  auto it = streams_.find(key);
  if (it == streams_.end()) return out;
  for (const auto& [task, e] : it->second.exits) out.push_back(e);
  return out;
}

void StepStreams::End(const state::StepKey& key) {
  MutexLock lock(&mu_);
  auto it = streams_.find(key);
  if (it == streams_.end() || it->second.ended) return;
  it->second.ended = true;
  it->second.ended_at_us = clock_->MonotonicMicros();
}

void StepStreams::Delivered(const state::StepKey& key) {
  MutexLock lock(&mu_);
  auto it = streams_.find(key);
  if (it != streams_.end()) it->second.delivered = true;
}

void StepStreams::Sweep(std::chrono::microseconds keep_for) {
  MutexLock lock(&mu_);
  const int64_t now = clock_->MonotonicMicros();
  for (auto it = streams_.begin(); it != streams_.end();) {
    const Stream& s = it->second;
    if (s.ended && (s.delivered || now - s.ended_at_us > keep_for.count())) {
      HoldLocked(it->first.job, &it->second, -s.held);
      it = streams_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t StepStreams::size() const {
  MutexLock lock(&mu_);
  return streams_.size();
}

}  // namespace hachi::server
