#include "cli/topo_cmd.h"

#include <cstdio>
#include <memory>
#include <string>

#include "alloc/cache.h"
#include "alloc/node_model.h"
#include "alloc/policy.h"
#include "cli/topo_render.h"
#include "topo/analysis.h"
#include "topo/load.h"
#include "topo/presets.h"

namespace hachi::cli {
namespace {

// Exit codes: topo check reports 0 healthy / 1 warnings / 2 errors; other failures are
// 2 (bad input) or 1 (a valid request that cannot be met).
constexpr int kExitOk = 0;
constexpr int kExitNoFit = 1;
constexpr int kExitBadInput = 2;

struct SourceFlags {
  std::vector<std::string> files;
  std::string preset;
  bool json = false;
};

void AddSourceFlags(CLI::App* cmd, SourceFlags* f) {
  cmd->add_option(
      "-f,--file", f->files,
      "read the node from files: `nvidia-smi topo -m` output, optionally with "
      "`nvidia-smi -L` / `--query-gpu` output, or a Hachi topology JSON "
      "(repeat --file to merge)");
  const std::string names = topo::PresetNameList();
  cmd->add_option("-p,--preset", f->preset, "a built-in node: " + names);
  cmd->add_flag("--json", f->json, "print one JSON object");
}

void PrintError(const std::string& cmd, const Status& s) {
  std::fprintf(stderr, "hachi %s: %s\n", cmd.c_str(), s.ToString().c_str());
}

Result<topo::Topology> Load(const SourceFlags& f) {
  topo::LoadOptions opts;
  opts.files = f.files;
  opts.preset = f.preset;
  return topo::LoadTopology(opts);
}

int RunShow(const SourceFlags& f) {
  Result<topo::Topology> t = Load(f);
  if (!t.ok()) {
    PrintError("topo show", t.status());
    return kExitBadInput;
  }
  topo::TopologyFacts facts = topo::Analyze(*t);
  std::vector<topo::Finding> findings = topo::CheckTopology(*t);
  std::string out = f.json ? RenderTopologyJson(*t, facts, findings)
                           : RenderTopologyText(*t, facts, findings);
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

int RunCheck(const SourceFlags& f, int expect_gpus) {
  Result<topo::Topology> t = Load(f);
  if (!t.ok()) {
    PrintError("topo check", t.status());
    return kExitBadInput;
  }
  topo::CheckOptions opts;
  opts.expected_gpus = expect_gpus;
  std::vector<topo::Finding> findings = topo::CheckTopology(*t, opts);
  topo::Severity worst = topo::WorstSeverity(findings);
  if (f.json) {
    std::fputs(RenderCheckJson(*t, findings).c_str(), stdout);
  } else {
    std::printf(
        "%s: %d GPUs, %s\n", t->source().c_str(), t->gpu_count(),
        std::string(topo::InterconnectClassName(topo::Analyze(*t).interconnect)).c_str());
    std::fputs(RenderFindingsText(findings).c_str(), stdout);
  }
  if (findings.empty() || worst == topo::Severity::kInfo) return 0;
  return worst == topo::Severity::kWarning ? 1 : 2;
}

struct AllocFlags {
  int count = 0;
  std::string free;
  bool free_given = false;  // --free "" (none free) is not --free absent (all free)
  std::string require;
  std::string policy = "hachi";
};

int RunAlloc(const SourceFlags& f, const AllocFlags& a) {
  Result<topo::Topology> t = Load(f);
  if (!t.ok()) {
    PrintError("topo alloc", t.status());
    return kExitBadInput;
  }
  Result<alloc::NodeModel> model = alloc::NodeModel::Compile(*t);
  if (!model.ok()) {
    PrintError("topo alloc", model.status());
    return kExitBadInput;
  }
  GpuSet free = model->all_gpus();
  if (a.free_given) {
    Result<GpuSet> parsed = GpuSet::Parse(a.free);
    if (!parsed.ok()) {
      PrintError("topo alloc", InvalidArgument("--free: " + parsed.status().message()));
      return kExitBadInput;
    }
    free = *parsed;
    if (free.empty() && a.count > 0) {
      PrintError("topo alloc",
                 Busy("--free '" + a.free + "': no GPU is free, so " +
                      std::to_string(a.count) + " GPU" + (a.count == 1 ? "" : "s") +
                      " cannot be allocated (leave --free out for all GPUs free)"));
      return kExitNoFit;
    }
  }
  alloc::Request req;
  req.count = a.count;
  Result<GpuSet> required = GpuSet::Parse(a.require);
  if (!required.ok()) {
    PrintError("topo alloc",
               InvalidArgument("--require: " + required.status().message()));
    return kExitBadInput;
  }
  req.required = *required;
  const alloc::Policy* policy = alloc::FindPolicy(a.policy);
  if (policy == nullptr) {
    std::string names;
    for (std::string_view n : alloc::PolicyNames()) {
      names += (names.empty() ? "" : ", ") + std::string(n);
    }
    PrintError("topo alloc", InvalidArgument("--policy: unknown policy '" + a.policy +
                                             "' (known: " + names + ")"));
    return kExitBadInput;
  }
  Result<alloc::Choice> choice = policy->Choose(*model, free, req);
  if (!choice.ok()) {
    PrintError("topo alloc", choice.status());
    return choice.status().code() == StatusCode::kInvalidArgument ? kExitBadInput
                                                                  : kExitNoFit;
  }
  AllocReport r{a.policy, free, req, *choice};
  std::string out = f.json ? RenderAllocJson(r) : RenderAllocText(*t, r);
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

}  // namespace

void AddTopoCommands(CLI::App& app, int* exit_code) {
  CLI::App* topo = app.add_subcommand(
      "topo", "GPU topology of one node: show it, check it, choose GPUs on it");
  topo->require_subcommand(1);

  auto show_flags = std::make_shared<SourceFlags>();
  CLI::App* show = topo->add_subcommand(
      "show",
      "print the link matrix, interconnect class, NUMA/PCIe/NVLink groups, GPUs and "
      "findings (no --file/--preset: discover this machine via NVML, then nvidia-smi)");
  AddSourceFlags(show, show_flags.get());
  show->callback([show_flags, exit_code] { *exit_code = RunShow(*show_flags); });

  auto check_flags = std::make_shared<SourceFlags>();
  auto expect = std::make_shared<int>(0);
  CLI::App* check = topo->add_subcommand(
      "check", "check the node for anomalies; exit 0 healthy, 1 warnings, 2 errors");
  AddSourceFlags(check, check_flags.get());
  check
      ->add_option("--expect-gpus", *expect,
                   "the number of GPUs the node should have (a missing GPU is an error)")
      ->check(CLI::Range(1, 64));
  check->callback(
      [check_flags, expect, exit_code] { *exit_code = RunCheck(*check_flags, *expect); });

  auto alloc_src = std::make_shared<SourceFlags>();
  auto alloc_flags = std::make_shared<AllocFlags>();
  CLI::App* al = topo->add_subcommand(
      "alloc", "choose the GPUs a job of --count GPUs should get on this node");
  AddSourceFlags(al, alloc_src.get());
  al->add_option("-n,--count", alloc_flags->count, "GPUs the job needs")->required();
  CLI::Option* free_opt =
      al->add_option("--free", alloc_flags->free,
                     "GPUs free now, e.g. 0,2,5 or 0-3,6 (default: all; \"\": none)");
  al->add_option("--require", alloc_flags->require,
                 "GPUs that must be part of the choice (a job already holding them)");
  al->add_option("--policy", alloc_flags->policy,
                 "allocation policy: hachi (default) or besteffort (NVIDIA "
                 "go-gpuallocator's, for comparison)");
  al->callback([alloc_src, alloc_flags, free_opt, exit_code] {
    alloc_flags->free_given = free_opt->count() > 0;
    *exit_code = RunAlloc(*alloc_src, *alloc_flags);
  });
}

}  // namespace hachi::cli
