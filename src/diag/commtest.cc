#include "diag/commtest.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace hachi::diag {
namespace {

const GpuLinkFacts* FactsOf(const LinkFacts& f, int gpu) {
  for (const GpuLinkFacts& g : f.gpus) {
    if (g.index == gpu) return &g;
  }
  return nullptr;
}

bool InTopology(const LinkFacts& f, int a, int b) {
  return a >= 0 && b >= 0 && a < f.topology.gpu_count() && b < f.topology.gpu_count();
}

// Every pair of the node with the same NV<n>: NVSwitch, where n is a GPU's whole budget.
bool AllPairsSameNvLink(const topo::Topology& t) {
  const int n = t.gpu_count();
  if (n < 2 || t.link(0, 1).nvlinks == 0) return false;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i != j && t.link(i, j).nvlinks != t.link(0, 1).nvlinks) return false;
    }
  }
  return true;
}

}  // namespace

double ExpectedHostGbps(const LinkFacts& facts, int gpu) {
  const GpuLinkFacts* g = FactsOf(facts, gpu);
  return g ? PcieGbps(g->pcie.gen, g->pcie.width) : 0;
}

double ExpectedPairGbps(const LinkFacts& facts, int a, int b) {
  if (!InTopology(facts, a, b)) return 0;
  const GpuLinkFacts* fa = FactsOf(facts, a);
  const GpuLinkFacts* fb = FactsOf(facts, b);
  if (!fa || !fb) return 0;
  if (int n = facts.topology.link(a, b).nvlinks; n > 0) {
    return n * NvLinkGbps(std::min(fa->nvlink_version, fb->nvlink_version));
  }
  double pa = ExpectedHostGbps(facts, a), pb = ExpectedHostGbps(facts, b);
  return pa > 0 && pb > 0 ? std::min(pa, pb) : 0;
}

double ExpectedAllPairsGbps(const LinkFacts& facts, int gpu,
                            const std::vector<int>& peers) {
  const GpuLinkFacts* g = FactsOf(facts, gpu);
  if (!g || peers.empty()) return 0;
  const double link = NvLinkGbps(g->nvlink_version);
  const bool nvswitch = AllPairsSameNvLink(facts.topology);
  // Every peer gets the same bytes at once, so the slowest copy sets the span: in units
  // of one copy's bytes, an NVLink peer on a mesh takes 1 / (its links' rate); NVSwitch
  // peers share the GPU's links (n_nv / budget); PCIe peers share its PCIe link.
  double slowest = 0, budget = 0;
  int on_switch = 0, on_pcie = 0;
  for (int p : peers) {
    if (!InTopology(facts, gpu, p)) return 0;
    const int n = facts.topology.link(gpu, p).nvlinks;
    if (n == 0) {
      ++on_pcie;
    } else if (link == 0) {
      return 0;  // an NVLink of unknown generation
    } else if (nvswitch) {
      ++on_switch;
      budget = n * link;
    } else {
      slowest = std::max(slowest, 1 / (n * link));
    }
  }
  if (on_switch > 0) slowest = std::max(slowest, on_switch / budget);
  if (on_pcie > 0) {
    const double pcie = ExpectedHostGbps(facts, gpu);
    if (pcie == 0) return 0;  // part of the traffic on an unknown link
    slowest = std::max(slowest, on_pcie / pcie);
  }
  return slowest > 0 ? static_cast<double>(peers.size()) / slowest : 0;
}

namespace {

std::string Gbps(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GB/s", v);
  return buf;
}

std::string Percent(double ratio) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%.0f %%", ratio * 100);
  return buf;
}

std::string PairName(int a, int b) { return std::to_string(a) + "-" + std::to_string(b); }

// "4 x 25 GB/s" for an NVLink pair; "PCIe" otherwise.
std::string LinkBasis(const CommtestReport& r, const PairResult& p) {
  if (p.link.rfind("NV", 0) == 0) return p.link.substr(2) + " NVLinks";
  (void)r;
  return "the PCIe bottleneck of the two GPUs";
}

struct Judged {
  CheckStatus status = CheckStatus::kOk;
  std::string evidence;
};

// One figure against its expectation: FAIL below threshold or failed, OK otherwise.
void Judge(const char* what, const Figure& f, double threshold, bool known, Judged* j) {
  std::string line;
  if (f.failed()) {
    line = std::string(what) + " copy failed: " + f.error;
    j->status = CheckStatus::kFail;
  } else if (known && f.expected > 0) {
    line = std::string(what) + " " + Gbps(f.gbps) + " = " + Percent(f.ratio()) + " of " +
           Gbps(f.expected);
    if (f.ratio() < threshold) j->status = CheckStatus::kFail;
  } else {
    line = std::string(what) + " " + Gbps(f.gbps) + " (expected unknown)";
    if (j->status == CheckStatus::kOk) j->status = CheckStatus::kWarn;
  }
  j->evidence += (j->evidence.empty() ? "" : "; ") + line;
}

}  // namespace

std::vector<CheckItem> BuildChecks(const CommtestReport& r) {
  std::vector<CheckItem> out;
  const bool known = r.expectations_known;
  const double t = r.threshold;
  for (const PairResult& p : r.pairs) {
    const std::string name = PairName(p.a, p.b);
    const bool nvlink = p.link.rfind("NV", 0) == 0;
    CheckItem p2p{"commtest-p2p", CheckStatus::kOk, {p.a, p.b}, "", ""};
    if (p.p2p_ab && p.p2p_ba) {
      p2p.evidence = "peer access " + name + " both ways";
    } else {
      p2p.evidence = std::string("peer access ") + (p.p2p_ab ? "" : "not ") +
                     "available " + std::to_string(p.a) + "->" + std::to_string(p.b) +
                     ", " + (p.p2p_ba ? "" : "not ") + "available " +
                     std::to_string(p.b) + "->" + std::to_string(p.a) + " (link " +
                     p.link + ")";
      // NVLink peers always allow P2P; on PCIe it may be off by design (ACS, IOMMU, VMs).
      p2p.status = nvlink ? CheckStatus::kFail : CheckStatus::kWarn;
      p2p.fix = nvlink ? "an NVLink pair without peer access: check `hachi doctor` "
                         "(fabric manager, NVLink state) and the driver"
                       : "copies go through host memory; check PCIe ACS and the IOMMU "
                         "(`hachi doctor`) if P2P should be on";
    }
    out.push_back(std::move(p2p));

    Judged j;
    Judge("a->b", p.ab, t, known, &j);
    Judge("b->a", p.ba, t, known, &j);
    Judge("bidirectional", p.bidir, t, known, &j);
    CheckItem bw{"commtest-pair-bandwidth",
                 j.status,
                 {p.a, p.b},
                 "pair " + name + ": " + j.evidence,
                 ""};
    if (j.status == CheckStatus::kFail) {
      const Figure& worst = p.ab.ratio() <= p.ba.ratio() ? p.ab : p.ba;
      if (p.ab.failed() || p.ba.failed() || p.bidir.failed()) {
        bw.fix = "a copy failed: check `hachi doctor` (Xid lines, a lost GPU)";
      } else if (nvlink) {
        bw.evidence = "NVLink pair " + name + " at " + Percent(worst.ratio()) + " of " +
                      LinkBasis(r, p) + " (" + Gbps(worst.expected) + "): " + j.evidence;
        bw.fix =
            "a degraded link (downclocked, firmware): check `hachi doctor` and "
            "nvidia-smi nvlink -s";
      } else {
        bw.evidence = "PCIe pair " + name + " at " + Percent(worst.ratio()) + " of " +
                      LinkBasis(r, p) + " (" + Gbps(worst.expected) + "): " + j.evidence;
        bw.fix = std::string("a downtrained PCIe link or P2P ") +
                 (p.link == "SYS" || p.link == "NODE" || p.link == "PHB"
                      ? "through the root complex (path " + p.link + ")"
                      : "off") +
                 ": check `hachi doctor` (PCIe link, ACS)";
      }
    } else if (j.status == CheckStatus::kWarn) {
      bw.fix = "the link facts are incomplete: check `hachi doctor`";
    }
    out.push_back(std::move(bw));
  }
  for (const GpuResult& g : r.gpus) {
    Judged h;
    Judge("host->device", g.h2d, t, known, &h);
    Judge("device->host", g.d2h, t, known, &h);
    CheckItem host{"commtest-host-bandwidth",
                   h.status,
                   {g.index},
                   "GPU " + std::to_string(g.index) + ": " + h.evidence,
                   ""};
    if (h.status == CheckStatus::kFail) {
      host.fix =
          "a downtrained PCIe link, or host memory on the far NUMA node: check "
          "`hachi doctor` (PCIe link) and the GPU's slot";
    } else if (h.status == CheckStatus::kWarn) {
      host.fix = "the PCIe link facts are unknown: check `hachi doctor`";
    }
    out.push_back(std::move(host));
    // Same-GPU copies have no link expectation: reported, flagged only when they fail.
    CheckItem d2d{"commtest-d2d",
                  g.d2d.failed() ? CheckStatus::kFail : CheckStatus::kOk,
                  {g.index},
                  "GPU " + std::to_string(g.index) + ": device->device " +
                      (g.d2d.failed() ? "copy failed: " + g.d2d.error : Gbps(g.d2d.gbps)),
                  g.d2d.failed() ? "check `hachi doctor` (Xid lines, ECC)" : ""};
    out.push_back(std::move(d2d));
    if (r.gpus.size() > 1 || !r.pairs.empty()) {
      Judged a;
      Judge("all peers at once", g.all_pairs, t, known, &a);
      CheckItem all{"commtest-all-pairs",
                    a.status,
                    {g.index},
                    "GPU " + std::to_string(g.index) + ": " + a.evidence,
                    ""};
      if (a.status == CheckStatus::kFail) {
        all.fix =
            "the GPU's links under load fall short (contention or a degraded "
            "link): compare its pairs above, check `hachi doctor`";
      } else if (a.status == CheckStatus::kWarn) {
        all.fix = "the link facts are unknown: check `hachi doctor`";
      }
      out.push_back(std::move(all));
    }
  }
  return out;
}

int CommtestExitCode(const CommtestReport& r) { return ChecksExitCode(r.checks); }

}  // namespace hachi::diag
