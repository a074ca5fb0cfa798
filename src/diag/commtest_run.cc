// The measurement half of diag/commtest.h: CUDA contexts, buffers, streams and event
// timing. Every copy is timed by events recorded on its stream around it (the driver's
// clock, not the host's), so the same code measures a real GPU and the fake libcuda's
// virtual clocks.
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "diag/commtest.h"

namespace hachi::diag {
namespace {

struct Gpu {
  int index = 0;
  cuda::Device dev = 0;
  cuda::Context ctx = nullptr;
  cuda::DevicePtr src = 0, dst = 0;  // size_bytes each
  void* host = nullptr;              // pinned, size_bytes
  cuda::Stream stream = nullptr, stream2 = nullptr;
};

class Session {
 public:
  Session(const CudaApi& cu, int64_t size) : cu_(cu), size_(static_cast<size_t>(size)) {}
  ~Session() {
    for (cuda::Event e : events_) cu_.event_destroy(e);
    for (Gpu& g : gpus_) {
      if (!g.ctx) continue;
      cu_.ctx_set_current(g.ctx);
      for (cuda::Stream s : streams_[g.index]) cu_.stream_destroy(s);
      if (g.src) cu_.mem_free(g.src);
      if (g.dst) cu_.mem_free(g.dst);
      if (g.host) cu_.host_free(g.host);
      cu_.ctx_release(g.dev);
    }
  }

  // Retains the GPU's primary context and allocates its buffers and streams.
  Status Open(int index) {
    Gpu g;
    g.index = index;
    if (auto rc = cu_.device_get(&g.dev, index); rc != cuda::kSuccess) {
      return Fail("cuDeviceGet(" + std::to_string(index) + ")", rc);
    }
    if (auto rc = cu_.ctx_retain(&g.ctx, g.dev); rc != cuda::kSuccess) {
      g.ctx = nullptr;
      return Fail("cuDevicePrimaryCtxRetain(GPU " + std::to_string(index) + ")", rc);
    }
    gpus_.push_back(g);
    Gpu& G = gpus_.back();
    cu_.ctx_set_current(G.ctx);
    const std::string on = " on GPU " + std::to_string(index);
    if (auto rc = cu_.mem_alloc(&G.src, size_); rc != cuda::kSuccess) {
      return Fail("cuMemAlloc" + on, rc);
    }
    if (auto rc = cu_.mem_alloc(&G.dst, size_); rc != cuda::kSuccess) {
      return Fail("cuMemAlloc" + on, rc);
    }
    if (auto rc = cu_.host_alloc(&G.host, size_, cuda::kMemHostAllocPortable);
        rc != cuda::kSuccess) {
      G.host = nullptr;
      return Fail("cuMemHostAlloc" + on, rc);
    }
    for (cuda::Stream* s : {&G.stream, &G.stream2}) {
      if (auto rc = cu_.stream_create(s, cuda::kStreamNonBlocking);
          rc != cuda::kSuccess) {
        return Fail("cuStreamCreate" + on, rc);
      }
      streams_[index].push_back(*s);
    }
    return Status::Ok();
  }

  Gpu& gpu(int index) {
    for (Gpu& g : gpus_) {
      if (g.index == index) return g;
    }
    return gpus_.front();  // not reached: callers pass opened GPUs
  }

  // A new stream in `g`'s context (the all-pairs run needs one per copy).
  Result<cuda::Stream> NewStream(Gpu& g) {
    cu_.ctx_set_current(g.ctx);
    cuda::Stream s = nullptr;
    if (auto rc = cu_.stream_create(&s, cuda::kStreamNonBlocking); rc != cuda::kSuccess) {
      return Fail("cuStreamCreate", rc);
    }
    streams_[g.index].push_back(s);
    return s;
  }

  Result<cuda::Event> NewEvent() {
    cuda::Event e = nullptr;
    if (auto rc = cu_.event_create(&e, cuda::kEventDefault); rc != cuda::kSuccess) {
      return Fail("cuEventCreate", rc);
    }
    events_.push_back(e);
    return e;
  }

  Status Fail(const std::string& what, cuda::Result rc) const {
    return Internal(what + ": " + cu_.ErrorText(rc));
  }

  const CudaApi& cu_;
  const size_t size_;

 private:
  std::vector<Gpu> gpus_;
  std::map<int, std::vector<cuda::Stream>> streams_;
  std::vector<cuda::Event> events_;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// A copy issued into a stream (returns its CUresult).
struct Copy {
  cuda::Stream stream;
  std::function<cuda::Result()> issue;
  std::string what;  // "cuMemcpyPeerAsync 2->5", for errors
};

// Copies issued together, each on its own stream of one context.
struct Group {
  cuda::Context ctx;
  std::vector<Copy> copies;
};

// Times `groups` issued together: in each group start events, the copies, end events
// (events live in the group's context, so spans are per group); a group's span runs from
// its earliest start to its latest end. Milliseconds per group, or the failed call.
Result<std::vector<double>> TimeGroups(Session& s, const std::vector<Group>& groups) {
  const CudaApi& cu = s.cu_;
  std::vector<std::vector<cuda::Event>> starts(groups.size()), ends(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    cu.ctx_set_current(groups[g].ctx);
    for (const Copy& c : groups[g].copies) {
      Result<cuda::Event> a = s.NewEvent(), b = s.NewEvent();
      if (!a.ok()) return a.status();
      if (!b.ok()) return b.status();
      starts[g].push_back(*a);
      ends[g].push_back(*b);
      if (auto rc = cu.event_record(*a, c.stream); rc != cuda::kSuccess) {
        return s.Fail("cuEventRecord", rc);
      }
    }
  }
  // Every start is recorded before any copy is issued, so that the copies overlap.
  for (size_t g = 0; g < groups.size(); ++g) {
    cu.ctx_set_current(groups[g].ctx);
    for (size_t i = 0; i < groups[g].copies.size(); ++i) {
      const Copy& c = groups[g].copies[i];
      if (auto rc = c.issue(); rc != cuda::kSuccess) return s.Fail(c.what, rc);
      if (auto rc = cu.event_record(ends[g][i], c.stream); rc != cuda::kSuccess) {
        return s.Fail("cuEventRecord", rc);
      }
    }
  }
  std::vector<double> spans;
  for (size_t g = 0; g < groups.size(); ++g) {
    double first = 0, last = 0;
    for (size_t i = 0; i < ends[g].size(); ++i) {
      if (auto rc = cu.event_sync(ends[g][i]); rc != cuda::kSuccess) {
        return s.Fail("cuEventSynchronize after " + groups[g].copies[i].what, rc);
      }
      float to_start = 0, to_end = 0;
      if (auto rc = cu.event_elapsed(&to_start, starts[g][0], starts[g][i]);
          rc != cuda::kSuccess) {
        return s.Fail("cuEventElapsedTime", rc);
      }
      if (auto rc = cu.event_elapsed(&to_end, starts[g][0], ends[g][i]);
          rc != cuda::kSuccess) {
        return s.Fail("cuEventElapsedTime", rc);
      }
      first = std::min(first, static_cast<double>(to_start));
      last = std::max(last, static_cast<double>(to_end));
    }
    spans.push_back(last - first);
  }
  return spans;
}

// A warm-up, then `repeats` timed runs of `groups`, group g moving bytes[g]: the median
// bandwidth of each group in GB/s, or the error in every Figure.
std::vector<Figure> Measure(Session& s, const std::vector<Group>& groups,
                            const std::vector<double>& bytes, int repeats) {
  std::vector<Figure> out(groups.size());
  std::vector<std::vector<double>> gbps(groups.size());
  for (int r = 0; r <= repeats; ++r) {
    Result<std::vector<double>> ms = TimeGroups(s, groups);
    if (!ms.ok()) {
      for (Figure& f : out) f.error = ms.status().message();
      return out;
    }
    if (r == 0) continue;  // the warm-up: first-touch mappings, peer setup
    for (size_t g = 0; g < groups.size(); ++g) {
      if ((*ms)[g] <= 0) {
        out[g].error = "the copy took no measurable time";
        continue;
      }
      gbps[g].push_back(bytes[g] / ((*ms)[g] * 1e-3) / 1e9);
    }
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!out[g].failed()) out[g].gbps = Median(gbps[g]);
  }
  return out;
}

Figure MeasureOne(Session& s, cuda::Context ctx, std::vector<Copy> copies, double bytes,
                  int repeats) {
  return Measure(s, {Group{ctx, std::move(copies)}}, {bytes}, repeats)[0];
}

bool Selected(const CommtestOptions& o, int gpu) {
  return o.gpus.empty() || std::find(o.gpus.begin(), o.gpus.end(), gpu) != o.gpus.end();
}

// The options' bounds.
Status CheckOptions(const CommtestOptions& opts) {
  if (opts.size_bytes < 4) return InvalidArgument("--size: at least 4 bytes");
  if (opts.repeats < 1) return InvalidArgument("repeats: at least 1");
  if (opts.latency_iters < 1) return InvalidArgument("latency iterations: at least 1");
  if (!(opts.threshold > 0 && opts.threshold <= 1)) {
    return InvalidArgument("--threshold: a fraction in (0, 1], e.g. 0.70");
  }
  return Status::Ok();
}

// The driver and its GPUs: *r's header and whether NVML's facts fit them (r's
// expectations); the number of GPUs.
Result<int> OpenDriver(const CudaApi& cu, const LinkFacts* facts,
                       const CommtestOptions& opts, CommtestReport* r) {
  if (auto rc = cu.init(0); rc != cuda::kSuccess) {
    return Unavailable("cuInit failed: " + cu.ErrorText(rc) + " (" + cu.path + ")");
  }
  r->size_bytes = opts.size_bytes;
  r->threshold = opts.threshold;
  cu.driver_version(&r->driver_version);
  int count = 0;
  if (auto rc = cu.device_count(&count); rc != cuda::kSuccess || count < 1) {
    return Unavailable("no CUDA device: " +
                       (rc != cuda::kSuccess ? cu.ErrorText(rc) : std::string("0 GPUs")));
  }
  for (int g : opts.gpus) {
    if (g < 0 || g >= count) {
      return InvalidArgument("--gpu " + std::to_string(g) + ": the driver has GPUs 0-" +
                             std::to_string(count - 1));
    }
  }
  if (facts) {
    r->expectations_known = true;
    if (facts->topology.gpu_count() != count) {
      r->expectations_known = false;
      r->expectations_note = "NVML sees " + std::to_string(facts->topology.gpu_count()) +
                             " GPUs, CUDA " + std::to_string(count) +
                             " (CUDA_VISIBLE_DEVICES?): expectations unknown";
    }
  } else {
    r->expectations_note = "no NVML: link facts and expected figures unknown";
  }
  return count;
}

// Host to device, device to host and device to device on GPU i.
GpuResult MeasureGpu(Session& s, const CudaApi& cu, int i, const LinkFacts* known,
                     int reps) {
  const double size = static_cast<double>(s.size_);
  Gpu& g = s.gpu(i);
  GpuResult out;
  out.index = i;
  char name[256] = {};
  if (cu.device_name(name, sizeof(name), g.dev) == cuda::kSuccess) out.name = name;
  const std::string on = " on GPU " + std::to_string(i);
  out.h2d = MeasureOne(
      s, g.ctx,
      {{g.stream, [&] { return cu.copy_htod(g.dst, g.host, s.size_, g.stream); },
        "cuMemcpyHtoDAsync" + on}},
      size, reps);
  out.d2h = MeasureOne(
      s, g.ctx,
      {{g.stream, [&] { return cu.copy_dtoh(g.host, g.src, s.size_, g.stream); },
        "cuMemcpyDtoHAsync" + on}},
      size, reps);
  out.d2d = MeasureOne(
      s, g.ctx,
      {{g.stream, [&] { return cu.copy_dtod(g.dst, g.src, s.size_, g.stream); },
        "cuMemcpyDtoDAsync" + on}},
      size, reps);
  if (known) {
    out.h2d.expected = out.d2h.expected = ExpectedHostGbps(*known, i);
  }
  return out;
}

// GPU a to b, b to a, both at once, and the latency of 4-byte copies.
PairResult MeasurePair(Session& s, const CudaApi& cu, int a, int b,
                       const LinkFacts* facts, const LinkFacts* known,
                       const CommtestOptions& opts) {
  const double size = static_cast<double>(s.size_);
  const int reps = opts.repeats;
  Gpu& ga = s.gpu(a);
  Gpu& gb = s.gpu(b);
  PairResult p;
  p.a = a;
  p.b = b;
  p.link = facts && a < facts->topology.gpu_count() && b < facts->topology.gpu_count()
               ? facts->topology.link(a, b).Label()
               : "?";
  int can = 0;
  p.p2p_ab = cu.can_access_peer(&can, ga.dev, gb.dev) == cuda::kSuccess && can;
  can = 0;
  p.p2p_ba = cu.can_access_peer(&can, gb.dev, ga.dev) == cuda::kSuccess && can;
  // Peer access is per direction and per context; already enabled is fine.
  if (p.p2p_ab) {
    cu.ctx_set_current(ga.ctx);
    cu.enable_peer(gb.ctx, 0);
  }
  if (p.p2p_ba) {
    cu.ctx_set_current(gb.ctx);
    cu.enable_peer(ga.ctx, 0);
  }
  const std::string ab = " " + std::to_string(a) + "->" + std::to_string(b);
  const std::string ba = " " + std::to_string(b) + "->" + std::to_string(a);
  Copy c_ab{
      ga.stream,
      [&] { return cu.copy_peer(gb.dst, gb.ctx, ga.src, ga.ctx, s.size_, ga.stream); },
      "cuMemcpyPeerAsync" + ab};
  // b->a on a second stream of a's context, so both directions share one clock.
  Copy c_ba2{
      ga.stream2,
      [&] { return cu.copy_peer(ga.dst, ga.ctx, gb.src, gb.ctx, s.size_, ga.stream2); },
      "cuMemcpyPeerAsync" + ba};
  Copy c_ba{
      gb.stream,
      [&] { return cu.copy_peer(ga.dst, ga.ctx, gb.src, gb.ctx, s.size_, gb.stream); },
      "cuMemcpyPeerAsync" + ba};
  p.ab = MeasureOne(s, ga.ctx, {c_ab}, size, reps);
  p.ba = MeasureOne(s, gb.ctx, {c_ba}, size, reps);
  p.bidir = MeasureOne(s, ga.ctx, {c_ab, c_ba2}, 2 * size, reps);
  if (known) {
    p.ab.expected = p.ba.expected = ExpectedPairGbps(*known, a, b);
    p.bidir.expected = 2 * p.ab.expected;
  }
  // Small messages: the median of single 4-byte copies.
  std::vector<double> us;
  for (int i = 0; i < opts.latency_iters; ++i) {
    Result<std::vector<double>> ms = TimeGroups(
        s,
        {Group{
            ga.ctx,
            {{ga.stream,
              [&] { return cu.copy_peer(gb.dst, gb.ctx, ga.src, ga.ctx, 4, ga.stream); },
              "cuMemcpyPeerAsync 4 bytes" + ab}}}});
    if (!ms.ok()) {
      us.clear();
      break;
    }
    us.push_back((*ms)[0] * 1e3);
  }
  p.latency_us = Median(us);
  return p;
}

// Contention: every selected GPU sends to all its peers at once, a stream per copy.
Status MeasureAllPairs(Session& s, const CudaApi& cu, int count, const LinkFacts* known,
                       int reps, CommtestReport* r) {
  const double size = static_cast<double>(s.size_);
  std::vector<Group> groups;
  std::vector<double> bytes;
  std::vector<int> senders;
  for (GpuResult& out : r->gpus) {
    Gpu& g = s.gpu(out.index);
    Group group{g.ctx, {}};
    for (int p = 0; p < count; ++p) {
      if (p == out.index) continue;
      Result<cuda::Stream> st = s.NewStream(g);
      if (!st.ok()) return st.status();
      Gpu& peer = s.gpu(p);
      cuda::Stream stream = *st;
      group.copies.push_back({stream,
                              [&cu, &s, &g, &peer, stream] {
                                return cu.copy_peer(peer.dst, peer.ctx, g.src, g.ctx,
                                                    s.size_, stream);
                              },
                              "cuMemcpyPeerAsync " + std::to_string(out.index) + "->" +
                                  std::to_string(p) + " (all pairs)"});
    }
    bytes.push_back(size * static_cast<double>(group.copies.size()));
    groups.push_back(std::move(group));
    senders.push_back(out.index);
  }
  std::vector<Figure> figs = Measure(s, groups, bytes, reps);
  for (size_t k = 0; k < senders.size(); ++k) {
    r->gpus[k].all_pairs = figs[k];
    if (known) {
      std::vector<int> peers;
      for (int p = 0; p < count; ++p) {
        if (p != senders[k]) peers.push_back(p);
      }
      r->gpus[k].all_pairs.expected = ExpectedAllPairsGbps(*known, senders[k], peers);
    }
  }
  return Status::Ok();
}

}  // namespace

Result<CommtestReport> RunCommtest(const CudaApi& cu, const LinkFacts* facts,
                                   const CommtestOptions& opts) {
  HACHI_RETURN_IF_ERROR(CheckOptions(opts));
  CommtestReport r;
  Result<int> count = OpenDriver(cu, facts, opts, &r);
  if (!count.ok()) return count.status();
  const LinkFacts* known = r.expectations_known ? facts : nullptr;

  Session s(cu, opts.size_bytes);
  for (int i = 0; i < *count; ++i) {
    if (Status st = s.Open(i); !st.ok()) return st;
  }
  for (int i = 0; i < *count; ++i) {
    if (Selected(opts, i)) r.gpus.push_back(MeasureGpu(s, cu, i, known, opts.repeats));
  }
  for (int a = 0; a < *count; ++a) {
    for (int b = a + 1; b < *count; ++b) {
      if (!Selected(opts, a) && !Selected(opts, b)) continue;
      r.pairs.push_back(MeasurePair(s, cu, a, b, facts, known, opts));
    }
  }
  if (*count > 1)
    HACHI_RETURN_IF_ERROR(MeasureAllPairs(s, cu, *count, known, opts.repeats, &r));
  r.checks = BuildChecks(r);
  return r;
}

}  // namespace hachi::diag
