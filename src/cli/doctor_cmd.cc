#include "cli/doctor_cmd.h"

#include <cstdio>
#include <memory>
#include <string>

#include "api/clock_offset.h"
#include "cli/clock_check.h"
#include "config/values.h"
#include "diag/doctor.h"
#include "diag/host_facts.h"
#include "topo/presets.h"

namespace hachi::cli {
namespace {

struct DoctorFlags {
  bool json = false;
  diag::DoctorOptions opts;
  std::string mig;        // "on", "off" or "" (report only)
  std::string xid_since;  // a duration ("10m"); "" since boot
  std::string server;     // --server: also the clock check against it
  std::string node;       // --node: this node's name there ("" its hostname)
};

// The facts only syscalls give: this machine's under the real root; under another root
// (a test tree, a node's files copied for a look) <root>/hachi-host-facts.json, since
// this machine's would not be that node's. Unknown facts are WARN items, not errors.
Result<diag::HostFacts> FactsFor(const std::string& root) {
  if (root == "/" || root.empty()) return diag::ProbeHostFacts();
  const std::string path =
      (root.back() == '/' ? root : root + "/") + "hachi-host-facts.json";
  Result<diag::HostFacts> f = diag::ReadHostFactsFile(path);
  if (f.ok() || f.status().code() != StatusCode::kNotFound) return f;
  diag::HostFacts none;
  none.source = path;
  none.why_unknown = "--root without " + path;
  return none;
}

int Run(DoctorFlags& f) {
  if (!f.mig.empty()) f.opts.mig = f.mig == "on";
  if (!f.xid_since.empty()) {
    Result<Duration> d = config::ParseDuration(f.xid_since);
    if (!d.ok() || *d <= 0) {
      std::fprintf(stderr, "hachi doctor: --xid-since '%s': %s\n", f.xid_since.c_str(),
                   d.ok() ? "must be longer than 0s" : d.status().message().c_str());
      return 2;
    }
    f.opts.xid_since_s = *d;
  }
  Result<diag::HostFacts> facts = FactsFor(f.opts.root);
  if (!facts.ok()) {
    std::fprintf(stderr, "hachi doctor: %s\n", facts.status().message().c_str());
    return 2;
  }
  Result<diag::DoctorReport> r = diag::RunDoctor(f.opts, *facts);
  if (!r.ok()) {
    std::fprintf(stderr, "hachi doctor: %s\n", r.status().message().c_str());
    return 2;
  }
  if (!f.server.empty())
    r->checks.push_back(ClockCheck(f.server, f.node.empty() ? r->node : f.node));
  const std::string out =
      f.json ? diag::RenderDoctorJson(*r) : diag::RenderDoctorText(*r);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return diag::DoctorExitCode(*r);
}

}  // namespace

void AddDoctorCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<DoctorFlags>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "check this node as the runbooks do: driver and NVML, GPU count, persistence, "
      "NVLinks and the NVSwitch fabric manager, PCIe links and ACS, topology, ECC and "
      "retired memory, kernel-log Xids, clock throttling, MIG, /dev/shm, memlock, "
      "cgroups, pid_max, time sync (and the clock against --server's); each OK/WARN/FAIL "
      "with evidence and a fix; exit 0 all OK, 1 warnings, 2 a failure");
  cmd->add_flag("--json", f->json,
                "print one JSON object: node, driver, gpus, checks "
                "[{check, status, gpu|gpus, evidence, fix}], status");
  cmd->add_option("--gpu", f->opts.gpu,
                  "only this GPU's checks (and its pairs); node-wide checks still run")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--expect-gpus", f->opts.expect_gpus,
                  "the number of GPUs the node should have (overrides the preset's)")
      ->check(CLI::Range(1, 64));
  const std::string names = topo::PresetNameList();
  cmd->add_option(
      "--preset", f->opts.preset,
      "the node this should be (its GPU count and NVLinks per pair): " + names);
  cmd->add_option("--mig", f->mig,
                  "the MIG mode every GPU should be in (default: report)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option(
      "--nvml-library", f->opts.nvml_library,
      "the NVML to load (default $HACHI_NVML_LIBRARY, else libnvidia-ml.so.1)");
  cmd->add_option(
      "--xid-since", f->xid_since,
      "only Xid lines logged in the last DURATION (10m, 1h) count: a GPU back "
      "from repair (default: since boot)");
  cmd->add_option("--kernel-log", f->opts.kernel_log,
                  "read Xid lines from this file (e.g. journalctl -k -b > FILE) instead "
                  "of /dev/kmsg");
  cmd->add_option("--server", f->server,
                  "also check this node's clock against that server's (the offset the "
                  "server measured at this node's agent's last poll; more than " +
                      std::to_string(api::kClockOffsetProblemMs / 1000) + "s: FAIL)");
  cmd->add_option("--node", f->node,
                  "this node's name at --server (default: its hostname)");
  cmd->add_option(
      "--root", f->opts.root,
      "read /proc, /sys and /dev under DIR (tests; default /); the facts only "
      "syscalls give then come from DIR/hachi-host-facts.json");
  cmd->callback([f, exit_code] { *exit_code = Run(*f); });
}

}  // namespace hachi::cli
