// `hachi commtest`: what the interconnect of this node really delivers, measured through
// the CUDA driver API (cuda_library.h) and compared with what each link should give
// (link_facts.h). Per GPU pair: P2P availability both ways, unidirectional and
// bidirectional copy bandwidth, small-message latency; per GPU: pinned host-to-device and
// device-to-host bandwidth and same-GPU device-to-device bandwidth; then every GPU
// sending to all its peers at once (contention). Each figure below threshold x expected
// becomes a FAIL check item, which the burn-in gate reads (the first FAIL is its reason).
//
// RunCommtest is single-threaded and owns the CUDA state it creates (contexts retained
// and released, buffers freed) for the duration of the call. The expectation functions
// and BuildChecks are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "diag/check.h"
#include "diag/cuda_library.h"
#include "diag/link_facts.h"

namespace hachi::diag {

struct CommtestOptions {
  int64_t size_bytes = int64_t{256} << 20;  // per copy
  int repeats = 5;          // timed copies after one warm-up; the median is kept
  int latency_iters = 100;  // 4-byte peer copies; the median is kept
  std::vector<int> gpus;    // only GPUs and pairs involving these; empty: all
  double threshold = 0.70;  // a figure below threshold x expected is flagged
};

// One measured figure, with what the link should give.
struct Figure {
  double gbps = 0;      // measured, GB/s (10^9 bytes/s); 0 when the copy failed
  double expected = 0;  // GB/s; 0 when unknown or there is no link expectation
  std::string error;    // why the copy failed; empty when it did not
  bool failed() const { return !error.empty(); }
  // gbps / expected; 0 when expected is unknown.
  double ratio() const { return expected > 0 ? gbps / expected : 0; }
};

struct PairResult {
  int a = 0, b = 0;  // a < b
  std::string link;  // "NV18", "SYS", ... as topo -m names it; "?" unknown
  bool p2p_ab = false, p2p_ba = false;  // cuDeviceCanAccessPeer
  Figure ab, ba, bidir;   // a->b, b->a, both at once (bidir counts both ways)
  double latency_us = 0;  // median 4-byte a->b copy; 0 when it failed
};

struct GpuResult {
  int index = 0;
  std::string name;  // cuDeviceGetName
  Figure h2d, d2h, d2d;
  Figure all_pairs;  // its egress while every GPU sends to all its peers at once
};

struct CommtestReport {
  int driver_version = 0;  // cuDriverGetVersion: 12040 for 12.4
  int64_t size_bytes = 0;
  double threshold = 0;
  bool expectations_known = false;  // link facts were read (NVML)
  std::string expectations_note;    // why not, when not
  std::vector<GpuResult> gpus;      // the selected GPUs, by index
  std::vector<PairResult> pairs;    // pairs with at least one selected GPU
  std::vector<CheckItem> checks;
};

// What a figure should be, in GB/s (0: unknown).
// a pair: n NVLinks -> n x NvLinkGbps(version) (the lower version of the two GPUs);
// without NVLink, the PCIe bottleneck: the lower of the two GPUs' current links.
double ExpectedPairGbps(const LinkFacts& facts, int a, int b);
// A GPU's host link: PcieGbps of its current PCIe generation and width.
double ExpectedHostGbps(const LinkFacts& facts, int gpu);
// A GPU's egress while it sends the same bytes to all its peers at once: the bytes over
// the time of the slowest copy, where NVSwitch peers share the GPU's n links, a mesh
// peer has its own NV<n>, and peers without NVLink share the GPU's PCIe link.
double ExpectedAllPairsGbps(const LinkFacts& facts, int gpu,
                            const std::vector<int>& peers);

// The check items of a measured report (expectations filled in), in order: per pair
// p2p and bandwidth, per GPU host, d2d and all-pairs.
std::vector<CheckItem> BuildChecks(const CommtestReport& r);
// 0 when every item is OK, 1 when the worst is WARN, 2 when one is FAIL
// (ChecksExitCode of its checks).
int CommtestExitCode(const CommtestReport& r);

// Runs the measurements on `cuda` (cuInit is called here) and, when `facts` is set,
// fills the expectations and checks. kUnavailable when cuInit or the device count fails;
// kInvalidArgument for a --gpu the driver does not have or bad options. A copy that
// fails is a FAIL item in the report, not an error.
Result<CommtestReport> RunCommtest(const CudaApi& cuda, const LinkFacts* facts,
                                   const CommtestOptions& opts);

// The report as a table for people, and as one JSON object (with the `checks` array).
std::string RenderCommtestText(const CommtestReport& r);
std::string RenderCommtestJson(const CommtestReport& r);

}  // namespace hachi::diag
