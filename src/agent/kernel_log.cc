#include "agent/kernel_log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/mutex.h"

namespace hachi::agent {

struct KernelXidWatcher::Impl {
  int fd = -1;
  std::map<std::string, int> gpu_by_bus;
  GpuHealthCallback cb;
  int poll_ms = 500;
  const Clock* clock = RealClock();
  std::string pending;  // a partial line (a regular file may be read mid-write)

  Mutex mu;
  CondVar cv{&mu};
  bool stop GUARDED_BY(mu) = false;
  std::thread thread;

  void Run() {
    char buf[8192];
    for (;;) {
      // /dev/kmsg gives one record per read (EAGAIN when none, EPIPE when records were
      // overwritten before we read them); a file gives what was appended (0 at its end).
      for (;;) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
          pending.append(buf, static_cast<size_t>(n));
          Lines();
          continue;
        }
        if (n < 0 && (errno == EINTR || errno == EPIPE)) continue;
        break;
      }
      MutexLock lock(&mu);
      const auto until = CondVar::Clock::now() + std::chrono::milliseconds(poll_ms);
      while (!stop && cv.WaitUntil(until)) {
      }
      if (stop) return;
    }
  }

  void Lines() {
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos;
         start = nl + 1) {
      // Only the kernel's own records whose message the driver's text starts: a user
      // can have the kernel quote an Xid line inside another message.
      std::optional<KernelXid> x = ParseNvrmXidLine(
          std::string_view(pending).substr(start, nl - start), KernelLogSource::kKmsg);
      if (!x) continue;
      auto g = gpu_by_bus.find(x->pci_bus_id);
      const XidInfo info = ClassifyXid(x->xid);
      GpuHealthEvent e;
      e.gpu = g == gpu_by_bus.end() ? -1 : g->second;
      e.kind = "xid";
      e.xid = x->xid;
      e.fault = info.fault;
      e.message = "Xid " + std::to_string(x->xid) + ": " + info.meaning + " (kernel log)";
      e.at = clock->Now();
      cb(e);
    }
    pending.erase(0, start);
    if (pending.size() > (1 << 16)) pending.clear();  // a line that never ends
  }
};

Result<std::unique_ptr<KernelXidWatcher>> KernelXidWatcher::Start(
    std::string path, std::map<std::string, int> gpu_by_bus, GpuHealthCallback cb,
    int poll_ms, const Clock* clock) {
  auto impl = std::make_unique<Impl>();
  impl->fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (impl->fd < 0) {
    return Unavailable("cannot read the kernel log " + path + ": " + strerror(errno));
  }
  lseek(impl->fd, 0, SEEK_END);  // only what is logged from now on
  impl->gpu_by_bus = std::move(gpu_by_bus);
  impl->cb = std::move(cb);
  impl->poll_ms = poll_ms > 0 ? poll_ms : 500;
  if (clock != nullptr) impl->clock = clock;
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<KernelXidWatcher>(new KernelXidWatcher(std::move(impl)));
}

KernelXidWatcher::KernelXidWatcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KernelXidWatcher::~KernelXidWatcher() { Stop(); }

void KernelXidWatcher::Stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  {
    MutexLock lock(&impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.SignalAll();
  impl_->thread.join();
  close(impl_->fd);
  impl_->fd = -1;
}

}  // namespace hachi::agent
