// KernelXidWatcher on a regular file standing in for /dev/kmsg: lines appended after it
// started are reported (the GPU found by its bus id), earlier ones, other lines and
// forged ones not.
#include "agent/kernel_log.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

namespace hachi::agent {
namespace {

class Events {
 public:
  GpuHealthCallback Callback() {
    return [this](const GpuHealthEvent& e) {
      std::lock_guard<std::mutex> lock(mu_);
      got_.push_back(e);
      cv_.notify_all();
    };
  }
  std::vector<GpuHealthEvent> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return got_.size() >= n; });
    return got_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<GpuHealthEvent> got_;
};

TEST(KernelXidWatcher, ReportsNewXidLinesForTheRightGpu) {
  char tmpl[] = "/tmp/hachi-kmsg-XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string path = tmpl;
  {
    std::ofstream old(path);
    old << "6,100,1000,-;NVRM: Xid (PCI:0000:18:00): 48, logged before the agent "
           "started\n";
  }
  Events events;
  FakeClock clock;
  Result<std::unique_ptr<KernelXidWatcher>> w =
      KernelXidWatcher::Start(path, {{"00000000:18:00.0", 0}, {"00000000:3B:00.0", 3}},
                              events.Callback(), 20, &clock);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  {
    std::ofstream log(path, std::ios::app);
    log << "6,101,2000,-;usb 1-1: new high-speed USB device\n";
    // Not the driver's lines: its text quoted by another message (a path any user can
    // have overlayfs log), a record userspace wrote, a continuation line.
    log << "3,101,2100,-;overlayfs: failed to resolve '/tmp/x/NVRM: Xid "
           "(PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus': -2\n";
    log << "12,101,2200,-;NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus\n";
    log << " NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus\n";
    log << "4,102,3000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', "
           "name=<unknown>, "
           "GPU has fallen off the bus.\n";
    log << "4,103,4000,-;NVRM: Xid (PCI:0000:18:00): 13, pid=4242, name=python, "
           "Graphics SM Warp Exception\n";
    log << "4,104,5000,-;NVRM: Xid (PCI:0000:af:00): 79, ";  // not finished yet
  }
  std::vector<GpuHealthEvent> got = events.WaitFor(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].gpu, 3);
  EXPECT_EQ(got[0].xid, 79);
  EXPECT_EQ(got[0].fault, GpuFault::kFatal);
  EXPECT_EQ(got[0].message, "Xid 79: GPU has fallen off the bus (kernel log)");
  EXPECT_EQ(got[0].at, clock.Now()) << "stamped with the watcher's clock";
  EXPECT_EQ(got[1].gpu, 0);
  EXPECT_EQ(got[1].fault, GpuFault::kJob);
  {
    std::ofstream log(path, std::ios::app);
    log << "GPU has fallen off the bus.\n";  // the rest of the last line
  }
  got = events.WaitFor(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].gpu, -1) << "a device that is not one of this node's GPUs";
  (*w)->Stop();
  unlink(path.c_str());
  EXPECT_EQ(
      KernelXidWatcher::Start("/nonexistent/kmsg", {}, events.Callback()).status().code(),
      StatusCode::kUnavailable);
}

}  // namespace
}  // namespace hachi::agent
