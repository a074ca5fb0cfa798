#include "agent/gpu_health.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/strings.h"
#include "topo/nvml_api.h"
#include "topo/nvml_library.h"

namespace hachi::agent {

namespace nvml = topo::nvml;
using Steady = std::chrono::steady_clock;  // the poll schedule (a wait, in real time)

namespace {

// The event types the monitor registers: Xid and both ECC kinds.
constexpr unsigned long long kWantedEvents = nvml::kEventXidCriticalError |
                                             nvml::kEventDoubleBitEccError |
                                             nvml::kEventSingleBitEccError;
constexpr unsigned long long kEccEvents =
    nvml::kEventDoubleBitEccError | nvml::kEventSingleBitEccError;

// Consecutive failed nvmlEventSetWait_v2 calls after which events are given up and the
// monitor only polls.
constexpr int kMaxWaitErrors = 10;

// The process's NVML, loaded once (topo/nvml_library.h). Without the four event
// functions (has_events) the monitor only polls.
using Api = topo::NvmlApi;

// "Xid, ECC" for an event mask.
std::string EventTypesLabel(unsigned long long mask) {
  std::string s;
  if (mask & nvml::kEventXidCriticalError) s = "Xid";
  if (mask & kEccEvents) s += s.empty() ? "ECC" : ", ECC";
  return s;
}

std::string MillisLabel(int ms) {
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + "s" : std::to_string(ms) + "ms";
}

std::string GpuList(const std::vector<int>& gpus) {
  std::string s;
  for (int g : gpus) s += (s.empty() ? "" : ",") + std::to_string(g);
  return s;
}

// What the monitor knows of one GPU. Owned by the monitor thread once it runs.
struct GpuWatch {
  nvml::Device device = nullptr;  // nullptr: NVML gave no handle
  unsigned long long events = 0;  // the event types registered
  std::string no_events;          // why not, for the summary
  bool lost = false;
  std::string lost_at_start;  // a lost report found while registering, not yet sent
  bool temperature_supported = true;
  bool remap_supported = true;
  bool hot = false;
  bool remap_pending = false;
  bool remap_failure = false;
};

}  // namespace

struct GpuHealthMonitor::Impl {
  ~Impl() { Close(); }

  Status Open();
  void RegisterEvents();  // creates the event set and registers every GPU it can
  // Reports the GPUs Open or RegisterEvents found lost (they run before the callback
  // may).
  void ReportLostWhileRegistering();
  std::string BuildSummary() const;
  // Makes what the monitor thread knows readable from other threads: the summary and
  // which GPUs' Xids come as events.
  void Publish() EXCLUDES(mu);
  void Run();
  void Poll();
  std::vector<GpuProcess> ListProcesses();  // every GPU that answers
  void HandleEvent(const nvml::EventData& data);
  void OnWaitError(nvml::Return rc);
  void FreeEventSet();
  void CheckTemperature(int g, unsigned celsius);
  void CheckRemappedRows(int g, unsigned corrected, unsigned uncorrected, bool pending,
                         bool failure);
  // Sends one event; Repeatable ones are dropped within repeat_after_s of the last.
  void Emit(int g, std::string kind, int xid, GpuFault fault, std::string message);
  void EmitRepeatable(int g, const std::string& kind, int xid, GpuFault fault,
                      std::string message);
  void MarkLost(int g, std::string message);
  // True when a call's answer says the GPU is gone (then reported, once).
  bool Lost(int g, nvml::Return rc, const char* call);
  std::string LostMessage(const char* call, nvml::Return rc) const {
    return std::string("GPU is lost (off the bus or otherwise unreachable): ") + call +
           " answered " + api.ErrorText(rc);
  }
  bool Stopping() const EXCLUDES(mu);
  void SleepUnlessStopped(int ms) EXCLUDES(mu);
  void Close() EXCLUDES(mu, close_mu);

  // Constant after Open.
  GpuHealthOptions options;
  GpuHealthCallback cb;
  std::string path;
  Api api;                   // a copy of the loaded library's functions
  bool initialized = false;  // nvmlInit_v2 succeeded

  mutable Mutex mu;
  CondVar cv{&mu};
  bool stopping GUARDED_BY(mu) = false;
  std::string summary GUARDED_BY(mu);
  std::vector<bool> xid_events GUARDED_BY(mu);  // by GPU

  // Serialises Close.
  Mutex close_mu;
  bool closed GUARDED_BY(close_mu) = false;

  // Written by Open, then owned by the monitor thread.
  std::vector<GpuWatch> gpus;
  nvml::EventSet set = nullptr;
  std::string events_off;  // why there is no event set
  int wait_errors = 0;
  Steady::time_point next_poll;
  // When each (GPU, kind, Xid) was last reported: options.clock's monotonic us.
  std::map<std::tuple<int, std::string, int>, int64_t> last_report;

  std::thread thread;
};

Status GpuHealthMonitor::Impl::Open() {
  path = topo::ResolveNvmlLibrary(options.library);
  Result<const Api*> loaded = topo::LoadNvml(path);
  if (!loaded.ok()) return loaded.status();
  api = **loaded;
  nvml::Return rc = api.init();
  if (rc != nvml::kSuccess) {
    return Unavailable("NVML (" + path + ") failed to initialise: " + api.ErrorText(rc));
  }
  initialized = true;
  unsigned int count = 0;
  rc = api.get_count(&count);
  if (rc != nvml::kSuccess) {
    return Unavailable("NVML (" + path + ") cannot count GPUs: " + api.ErrorText(rc));
  }
  if (count == 0) return Unavailable("NVML (" + path + ") sees no GPUs");
  gpus.resize(count);
  for (unsigned i = 0; i < count; ++i) {
    GpuWatch& w = gpus[i];
    rc = api.get_handle(i, &w.device);
    if (rc == nvml::kSuccess) continue;
    w.device = nullptr;
    if (rc == nvml::kErrorGpuIsLost) {
      w.lost_at_start = LostMessage("nvmlDeviceGetHandleByIndex_v2", rc);
    } else {
      w.no_events = "no handle (" + api.ErrorText(rc) + ")";
    }
  }
  RegisterEvents();
  Publish();  // before the thread starts, but summary() may ask any time
  return Status::Ok();
}

void GpuHealthMonitor::Impl::RegisterEvents() {
  if (!api.has_events()) {
    events_off = path + " lacks the NVML event functions";
    return;
  }
  nvml::Return rc = api.set_create(&set);
  if (rc != nvml::kSuccess) {
    set = nullptr;
    events_off = "nvmlEventSetCreate: " + api.ErrorText(rc);
    return;
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    GpuWatch& w = gpus[i];
    w.events = 0;
    if (!w.device || w.lost || !w.lost_at_start.empty()) continue;
    unsigned long long mask = kWantedEvents;
    if (api.supported_events) {
      unsigned long long supported = 0;
      rc = api.supported_events(w.device, &supported);
      if (rc == nvml::kErrorGpuIsLost) {
        w.lost_at_start = LostMessage("nvmlDeviceGetSupportedEventTypes", rc);
        continue;
      }
      // Without the answer, try them all; registering tells.
      if (rc == nvml::kSuccess) mask &= supported;
    }
    if (mask == 0) {
      w.no_events = "supports neither Xid nor ECC events";
      continue;
    }
    rc = api.register_events(w.device, mask, set);
    // NVML refuses a whole mask for one unsupported type: ECC events need ECC on.
    if (rc == nvml::kErrorNotSupported && mask != nvml::kEventXidCriticalError &&
        (mask & nvml::kEventXidCriticalError)) {
      mask = nvml::kEventXidCriticalError;
      rc = api.register_events(w.device, mask, set);
    }
    if (rc == nvml::kSuccess) {
      w.events = mask;
      w.no_events.clear();
    } else if (rc == nvml::kErrorGpuIsLost) {
      w.lost_at_start = LostMessage("nvmlDeviceRegisterEvents", rc);
    } else {
      w.no_events = "nvmlDeviceRegisterEvents: " + api.ErrorText(rc);
    }
  }
  // An empty set would only be waited on for nothing.
  for (const GpuWatch& w : gpus) {
    if (w.events) return;
  }
  api.set_free(set);
  set = nullptr;
  events_off = "no GPU accepted them";
}

std::string GpuHealthMonitor::Impl::BuildSummary() const {
  const int n = static_cast<int>(gpus.size());
  int with_events = 0;
  unsigned long long types = 0;
  std::vector<int> lost;
  std::map<std::string, std::vector<int>> no_events;  // reason -> GPUs
  for (int g = 0; g < n; ++g) {
    const GpuWatch& w = gpus[g];
    if (w.lost || !w.lost_at_start.empty()) {
      lost.push_back(g);
    } else if (w.events) {
      ++with_events;
      types |= w.events;
    } else if (!w.no_events.empty()) {
      no_events[w.no_events].push_back(g);
    }
  }
  const std::string gpus_word = n == 1 ? " GPU" : " GPUs";
  std::string s;
  if (with_events == 0) {
    s = "no NVML events (" + (events_off.empty() ? "no GPU left to watch" : events_off) +
        ")";
  } else {
    s = "NVML events on " +
        (with_events == n ? std::to_string(n)
                          : std::to_string(with_events) + " of " + std::to_string(n)) +
        gpus_word + " (" + EventTypesLabel(types) + ")";
  }
  s += "; polling every " + MillisLabel(options.poll_interval_ms);
  if (options.temperature_limit_c > 0) {
    s += ", temperature limit " + std::to_string(options.temperature_limit_c) + "C";
  }
  for (const auto& [why, list] : no_events) {
    s += "; no events on GPU " + GpuList(list) + ": " + why;
  }
  if (!lost.empty()) s += "; GPU " + GpuList(lost) + " lost";
  return s;
}

void GpuHealthMonitor::Impl::Publish() {
  std::string s = BuildSummary();
  std::vector<bool> xids(gpus.size());
  for (size_t g = 0; g < gpus.size(); ++g) {
    xids[g] = set != nullptr && !gpus[g].lost &&
              (gpus[g].events & nvml::kEventXidCriticalError) != 0;
  }
  MutexLock lock(&mu);
  summary = std::move(s);
  xid_events = std::move(xids);
}

bool GpuHealthMonitor::Impl::Stopping() const {
  MutexLock lock(&mu);
  return stopping;
}

void GpuHealthMonitor::Impl::SleepUnlessStopped(int ms) {
  MutexLock lock(&mu);
  const auto until = CondVar::Clock::now() + std::chrono::milliseconds(ms);
  while (!stopping && cv.WaitUntil(until)) {
  }
}

void GpuHealthMonitor::Impl::ReportLostWhileRegistering() {
  for (size_t g = 0; g < gpus.size(); ++g) {
    if (!gpus[g].lost_at_start.empty()) {
      MarkLost(static_cast<int>(g), std::move(gpus[g].lost_at_start));
    }
  }
}

void GpuHealthMonitor::Impl::Run() {
  ReportLostWhileRegistering();
  next_poll = Steady::now();
  while (!Stopping()) {
    if (Steady::now() >= next_poll) {
      Poll();
      next_poll = Steady::now() + std::chrono::milliseconds(options.poll_interval_ms);
    }
    // Wake for the next poll even when no event comes.
    const auto until_poll =
        std::chrono::duration_cast<std::chrono::milliseconds>(next_poll - Steady::now())
            .count();
    const int wait_ms =
        static_cast<int>(std::clamp<long long>(until_poll, 0, options.event_wait_ms));
    if (!set) {
      SleepUnlessStopped(wait_ms);
      continue;
    }
    nvml::EventData data = {};
    nvml::Return rc = api.set_wait(set, &data, static_cast<unsigned>(wait_ms));
    if (rc == nvml::kSuccess) {
      wait_errors = 0;
      HandleEvent(data);
    } else if (rc == nvml::kErrorTimeout) {
      wait_errors = 0;
    } else {
      OnWaitError(rc);
    }
  }
}

void GpuHealthMonitor::Impl::Poll() {
  for (size_t i = 0; i < gpus.size(); ++i) {
    const int g = static_cast<int>(i);
    GpuWatch& w = gpus[i];
    if (!w.device || w.lost) continue;
    bool asked = false;  // whether some call reached the GPU, which tells if it is lost
    if (api.get_temperature && w.temperature_supported) {
      asked = true;
      unsigned celsius = 0;
      nvml::Return rc = api.get_temperature(w.device, nvml::kTemperatureGpu, &celsius);
      if (Lost(g, rc, "nvmlDeviceGetTemperature")) continue;
      if (rc == nvml::kErrorNotSupported) w.temperature_supported = false;
      if (rc == nvml::kSuccess) CheckTemperature(g, celsius);
    }
    if (api.get_remapped_rows && w.remap_supported) {
      asked = true;
      unsigned corrected = 0, uncorrected = 0, pending = 0, failure = 0;
      nvml::Return rc =
          api.get_remapped_rows(w.device, &corrected, &uncorrected, &pending, &failure);
      if (Lost(g, rc, "nvmlDeviceGetRemappedRows")) continue;
      // GPUs before Ampere retire pages instead of remapping rows.
      if (rc == nvml::kErrorNotSupported) w.remap_supported = false;
      if (rc == nvml::kSuccess) {
        CheckRemappedRows(g, corrected, uncorrected, pending != 0, failure != 0);
      }
    }
    if (!asked && api.get_uuid) {
      char uuid[nvml::kDeviceUuidBufferSize] = {};
      Lost(g, api.get_uuid(w.device, uuid, sizeof(uuid)), "nvmlDeviceGetUUID");
    }
  }
  if (options.on_processes && api.get_processes) options.on_processes(ListProcesses());
}

std::vector<GpuProcess> GpuHealthMonitor::Impl::ListProcesses() {
  std::vector<GpuProcess> out;
  std::vector<nvml::ProcessInfo> infos(16);
  for (size_t i = 0; i < gpus.size(); ++i) {
    const int g = static_cast<int>(i);
    if (!gpus[i].device || gpus[i].lost) continue;
    unsigned count = 0;
    nvml::Return rc = nvml::kErrorInsufficientSize;
    // The list can grow between the two calls: ask again (a few times) with more room.
    for (int tries = 0; tries < 4 && rc == nvml::kErrorInsufficientSize; ++tries) {
      count = static_cast<unsigned>(infos.size());
      rc = api.get_processes(gpus[i].device, &count, infos.data());
      if (rc == nvml::kErrorInsufficientSize)
        infos.resize(std::max<size_t>(count, infos.size()) * 2);
    }
    if (Lost(g, rc, "nvmlDeviceGetComputeRunningProcesses_v3") || rc != nvml::kSuccess)
      continue;
    for (unsigned k = 0; k < count && k < infos.size(); ++k) {
      GpuProcess p;
      p.gpu = g;
      p.pid = infos[k].pid;
      if (infos[k].used_gpu_memory != nvml::kValueNotAvailable) {
        p.used_mib = static_cast<int64_t>(infos[k].used_gpu_memory >> 20);
      }
      out.push_back(p);
    }
  }
  return out;
}

bool GpuHealthMonitor::Impl::Lost(int g, nvml::Return rc, const char* call) {
  if (rc != nvml::kErrorGpuIsLost) return false;
  MarkLost(g, LostMessage(call, rc));
  return true;
}

void GpuHealthMonitor::Impl::CheckTemperature(int g, unsigned celsius) {
  const int limit = options.temperature_limit_c;
  if (limit <= 0) return;
  GpuWatch& w = gpus[g];
  if (celsius > static_cast<unsigned>(limit)) {
    if (w.hot) return;
    w.hot = true;
    Emit(g, "temperature", 0, GpuFault::kInfo,
         "GPU temperature " + std::to_string(celsius) + "C is above the limit of " +
             std::to_string(limit) + "C");
  } else {
    w.hot = false;
  }
}

void GpuHealthMonitor::Impl::CheckRemappedRows(int g, unsigned corrected,
                                               unsigned uncorrected, bool pending,
                                               bool failure) {
  GpuWatch& w = gpus[g];
  const std::string rows = std::to_string(corrected) + " corrected, " +
                           std::to_string(uncorrected) + " uncorrected rows remapped";
  if (failure && !w.remap_failure) {
    Emit(g, "remap-failure", 0, GpuFault::kFatal,
         "Row remapping failed: no spare memory rows left (" + rows +
             "); the GPU needs service");
  }
  if (pending && !w.remap_pending) {
    Emit(g, "remap-pending", 0, GpuFault::kReset,
         "Row remapping pending: a GPU reset applies it (" + rows + ")");
  }
  // Reported again only after clearing (a reset) and coming back.
  w.remap_failure = failure;
  w.remap_pending = pending;
}

void GpuHealthMonitor::Impl::HandleEvent(const nvml::EventData& data) {
  int g = -1;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].device && gpus[i].device == data.device) g = static_cast<int>(i);
  }
  if (g >= 0 && gpus[g].lost) return;  // reported once; what follows is its echo
  if (data.event_type & nvml::kEventXidCriticalError) {
    const int xid =
        static_cast<int>(std::min<unsigned long long>(data.event_data, INT_MAX));
    if (xid == 79 && g >= 0) {
      MarkLost(g, XidMessage(79));
      return;
    }
    EmitRepeatable(g, "xid", xid, ClassifyXid(xid).fault, XidMessage(xid));
  } else if (data.event_type & nvml::kEventDoubleBitEccError) {
    EmitRepeatable(g, "ecc-dbe", 0, GpuFault::kFatal,
                   "Double-bit ECC error (uncorrectable memory error)");
  } else if (data.event_type & nvml::kEventSingleBitEccError) {
    EmitRepeatable(g, "ecc-sbe", 0, GpuFault::kInfo, "Single-bit ECC error (corrected)");
  }
}

// A wait that fails is most likely a GPU gone from under the set (NVML answers
// GPU_IS_LOST): poll to find it, then rebuild the set without it. Errors that persist
// back off, and after kMaxWaitErrors the monitor only polls.
void GpuHealthMonitor::Impl::OnWaitError(nvml::Return rc) {
  ++wait_errors;
  Poll();
  next_poll = Steady::now() + std::chrono::milliseconds(options.poll_interval_ms);
  if (wait_errors >= kMaxWaitErrors) {
    FreeEventSet();
    events_off = "nvmlEventSetWait_v2 failed " + std::to_string(wait_errors) +
                 " times in a row: " + api.ErrorText(rc) + "; polling only";
  } else if (wait_errors == 1) {
    FreeEventSet();
    RegisterEvents();
    ReportLostWhileRegistering();
  } else {
    SleepUnlessStopped(options.event_wait_ms);
  }
  Publish();
}

void GpuHealthMonitor::Impl::FreeEventSet() {
  if (set) api.set_free(set);
  set = nullptr;
  for (GpuWatch& w : gpus) w.events = 0;
}

void GpuHealthMonitor::Impl::Emit(int g, std::string kind, int xid, GpuFault fault,
                                  std::string message) {
  if (!cb) return;
  GpuHealthEvent e;
  e.gpu = g;
  e.kind = std::move(kind);
  e.xid = xid;
  e.fault = fault;
  e.message = std::move(message);
  e.at = options.clock->Now();
  cb(e);
}

void GpuHealthMonitor::Impl::EmitRepeatable(int g, const std::string& kind, int xid,
                                            GpuFault fault, std::string message) {
  const int64_t now = options.clock->MonotonicMicros();
  auto [it, fresh] = last_report.try_emplace({g, kind, xid}, now);
  if (!fresh) {
    if (now - it->second < int64_t{options.repeat_after_s} * 1'000'000) return;
    it->second = now;
  }
  Emit(g, kind, xid, fault, std::move(message));
}

void GpuHealthMonitor::Impl::MarkLost(int g, std::string message) {
  GpuWatch& w = gpus[g];
  if (w.lost) return;
  w.lost = true;
  w.lost_at_start.clear();
  Publish();  // first: whoever the event wakes sees the GPU lost
  Emit(g, "gpu-lost", 79, GpuFault::kFatal, std::move(message));
}

void GpuHealthMonitor::Impl::Close() {
  {
    MutexLock lock(&mu);
    stopping = true;
  }
  cv.SignalAll();
  // From the callback (documented as not allowed) the thread cannot join itself; it
  // ends after the callback returns, and a later Stop elsewhere finishes the work.
  if (thread.get_id() == std::this_thread::get_id()) return;
  MutexLock close_lock(&close_mu);
  if (closed) return;
  if (thread.joinable()) thread.join();
  // The library itself stays loaded for the process (topo/nvml_library.h).
  if (set) api.set_free(set);
  set = nullptr;
  if (initialized) api.shutdown();
  initialized = false;
  closed = true;
}

GpuHealthMonitor::GpuHealthMonitor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GpuHealthMonitor::~GpuHealthMonitor() { Stop(); }

Result<std::unique_ptr<GpuHealthMonitor>> GpuHealthMonitor::Start(
    GpuHealthOptions options, GpuHealthCallback cb) {
  auto impl = std::make_unique<Impl>();
  // A zero wait would spin; a zero interval would poll without pause.
  options.event_wait_ms = std::clamp(options.event_wait_ms, 1, 60'000);
  options.poll_interval_ms = std::max(options.poll_interval_ms, 10);
  options.repeat_after_s = std::max(options.repeat_after_s, 0);
  impl->options = std::move(options);
  if (impl->options.clock == nullptr) impl->options.clock = RealClock();
  impl->cb = std::move(cb);
  HACHI_RETURN_IF_ERROR(impl->Open());  // on failure ~Impl closes what was opened
  try {
    impl->thread = std::thread([p = impl.get()] { p->Run(); });
  } catch (const std::system_error& e) {
    return Internal(std::string("cannot start the GPU health thread: ") + e.what());
  }
  return std::unique_ptr<GpuHealthMonitor>(new GpuHealthMonitor(std::move(impl)));
}

void GpuHealthMonitor::Stop() { impl_->Close(); }

int GpuHealthMonitor::gpu_count() const { return static_cast<int>(impl_->gpus.size()); }

bool GpuHealthMonitor::WatchesXids(int gpu) const {
  if (gpu < 0) return false;
  MutexLock lock(&impl_->mu);
  return static_cast<size_t>(gpu) < impl_->xid_events.size() && impl_->xid_events[gpu];
}

std::string GpuHealthMonitor::summary() const {
  MutexLock lock(&impl_->mu);
  return impl_->summary;
}

}  // namespace hachi::agent
