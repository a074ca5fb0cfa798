// Public batch scripts read as Slurm reads them: every script in
// testdata/slurm-scripts/ (their provenance: PROVENANCE.md there) goes through the same
// parse as `hachi submit` / `sbatch` (ParseDirectives, BuildSubmitOptions), and the
// request it would send (the API's submit JSON, less the script text and environment)
// is compared with golden/NAME.txt beside it. A script Hachi refuses has its error as the
// golden text. HACHI_UPDATE_GOLDEN=1 rewrites the goldens; review them against what
// Slurm 22.05 does before committing (docs/slurm.md says how each option maps).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/output_paths.h"
#include "api/protocol.h"
#include "api/protocol_json.h"
#include "cli/directives.h"
#include "core/hostlist.h"
#include "core/strings.h"
#include "core/testing/paths.h"

namespace hachi::cli {
namespace {

namespace fs = std::filesystem;

const std::string kDir = SourceDir() + "/testdata/slurm-scripts";

// Flattens `j` to "path = value" lines, leaving out what is at its default (0, "", false,
// [], the -1 of "no array task"), so that a golden shows what the script asked for.
void Flatten(const nlohmann::json& j, const std::string& path, std::string* out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items())
      Flatten(v, path.empty() ? k : path + "." + k, out);
    return;
  }
  const bool is_default = j.is_null() || (j.is_boolean() && !j.get<bool>()) ||
                          (j.is_number() && (j == 0 || j == -1)) ||
                          (j.is_string() && j.get<std::string>().empty()) ||
                          (j.is_array() && j.empty());
  if (!is_default) *out += path + " = " + j.dump() + "\n";
}

// What the CLI would send for this script with no flags, as stable text: the submit
// JSON's fields that are set, the script's text and the environment left out (the script
// is the input; the environment is the caller's), an array as its count and ends, then
// the warnings the submitter would see.
std::string ParsedRequest(const std::string& text, const std::string& name) {
  Result<ParsedOptions> d = ParseDirectives(text, name);
  if (!d.ok()) return "error: " + d.status().message() + "\n";
  Result<SubmitOptions> o = BuildSubmitOptions(*d, ParsedOptions{});
  if (!o.ok()) return "error: " + o.status().message() + "\n";
  api::SubmitRequest r;
  r.req = o->req;
  r.spec = o->spec;
  r.hold = o->hold;
  if (!o->array.empty()) {
    r.array_tasks = ExpandArray(o->array);
    r.array_max_running = o->array.max_running;
  }
  nlohmann::json j = nlohmann::json::parse(api::SubmitRequestToJson(r));
  j["spec"].erase("script");
  j["spec"].erase("env");
  j["spec"].erase("payload");
  if (j.contains("array_tasks")) {
    const auto& t = j["array_tasks"];
    j["array_tasks"] = std::to_string(t.size()) + " tasks, " +
                       std::to_string(t.front().get<int>()) + ".." +
                       std::to_string(t.back().get<int>());
  }
  std::string out;
  Flatten(j, "", &out);
  for (const std::string& w : o->warnings) out += "warning: " + w + "\n";
  return out;
}

std::vector<std::string> Scripts() {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(kDir)) {
    if (e.path().extension() == ".sh") names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(PublicSlurmScripts, AtLeastFifteenWithTheirProvenance) {
  const std::vector<std::string> names = Scripts();
  EXPECT_GE(names.size(), 15u);
  std::string error;
  const std::optional<std::string> provenance = ReadFile(kDir + "/PROVENANCE.md", &error);
  ASSERT_TRUE(provenance.has_value()) << error;
  for (const std::string& n : names) {
    EXPECT_NE(provenance->find("`" + n + "`"), std::string::npos)
        << n << " has no line in PROVENANCE.md";
  }
}

TEST(PublicSlurmScripts, ParseAsTheGoldenSays) {
  const bool update = [] {
    const char* u = std::getenv("HACHI_UPDATE_GOLDEN");
    return u != nullptr && *u == '1';
  }();
  for (const std::string& n : Scripts()) {
    SCOPED_TRACE(n);
    std::string error;
    const std::optional<std::string> text = ReadFile(kDir + "/" + n, &error);
    ASSERT_TRUE(text.has_value()) << error;
    const std::string actual = ParsedRequest(*text, n);
    const std::string golden = kDir + "/golden/" + n.substr(0, n.size() - 3) + ".txt";
    if (update) {
      fs::create_directories(kDir + "/golden");
      std::ofstream(golden) << actual;
      continue;
    }
    const std::optional<std::string> want = ReadFile(golden, &error);
    ASSERT_TRUE(want.has_value()) << error << " (HACHI_UPDATE_GOLDEN=1 writes it)";
    EXPECT_EQ(actual, *want) << "golden " << golden
                             << " differs; HACHI_UPDATE_GOLDEN=1 rewrites it";
  }
}

// ---- Against Slurm 22.05 itself (slurm-22.05/NAME.txt: `scontrol show job` of each
// script submitted held to Debian's Slurm; README.md there says how) ----

std::map<std::string, std::string> SlurmFields(const std::string& text) {
  std::map<std::string, std::string> out;
  for (std::string_view line : SplitLines(text)) {
    const size_t eq = line.find('=');
    if (eq != std::string_view::npos)
      out[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  return out;
}

const std::string kNodePlaceholder = "@NODE@";

// Slurm's TimeLimit text: HH:MM:SS, or D-HH:MM:SS from a day on.
std::string SlurmTime(Duration d) {
  char buf[64];
  const long days = d / 86400, h = d % 86400 / 3600, m = d % 3600 / 60, sec = d % 60;
  if (days > 0) {
    std::snprintf(buf, sizeof buf, "%ld-%02ld:%02ld:%02ld", days, h, m, sec);
  } else {
    std::snprintf(buf, sizeof buf, "%02ld:%02ld:%02ld", h, m, sec);
  }
  return buf;
}

// "65G", "400G", "8192M", "0" as MiB.
int64_t SlurmMib(const std::string& v) {
  if (v.empty()) return -1;
  const int64_t n = std::atoll(v.c_str());
  switch (v.back()) {
    case 'T':
      return n * 1024 * 1024;
    case 'G':
      return n * 1024;
    case 'K':
      return (n + 1023) / 1024;
    default:
      return n;
  }
}

std::set<std::string> Hosts(const std::string& list) {
  std::set<std::string> out;
  if (list.empty() || list == "(null)") return out;
  Result<std::vector<std::string>> hosts = ExpandHostList(list);
  if (!hosts.ok()) return {"unreadable: " + list};
  out.insert(hosts->begin(), hosts->end());
  return out;
}

// Where Hachi's reading of a script differs from Slurm's, field by field ("TimeLimit:
// slurm 2-00:00:00, hachi 1-00:00:00"); empty when they agree.
std::vector<std::string> Differences(const SubmitOptions& o,
                                     const std::map<std::string, std::string>& slurm,
                                     const std::string& script) {
  std::vector<std::string> diffs;
  auto get = [&](const std::string& k) {
    auto it = slurm.find(k);
    return it == slurm.end() ? std::string() : it->second;
  };
  auto differ = [&](const std::string& field, const std::string& want,
                    const std::string& got) {
    if (want != got) diffs.push_back(field + ": slurm " + want + ", hachi " + got);
  };
  const sched::JobRequest& r = o.req;
  const state::JobSpec& s = o.spec;
  if (get("TimeLimit") != "UNLIMITED")
    differ("TimeLimit", get("TimeLimit"), SlurmTime(r.time_limit));
  // "N-N" is what the job asked for; a bare number is Slurm's estimate for a job that
  // gave no -N, left alone.
  const std::string nodes = get("NumNodes");
  if (nodes.find('-') != std::string::npos)
    differ("NumNodes", nodes.substr(0, nodes.find('-')), std::to_string(r.nodes));
  const int tasks = s.ntasks > 0            ? s.ntasks
                    : s.ntasks_per_node > 0 ? s.ntasks_per_node * r.nodes
                                            : r.nodes;
  differ("NumTasks", get("NumTasks"), std::to_string(tasks));
  differ("CPUs/Task", get("CPUs/Task"),
         std::to_string(s.cpus_per_task > 0 ? s.cpus_per_task : 1));
  if (slurm.count("MinMemoryNode")) {
    // --mem=0 is all of the node's memory to both; Slurm shows it as 0.
    differ("MinMemoryNode", std::to_string(SlurmMib(get("MinMemoryNode"))),
           std::to_string(r.memory_mib == sched::kAllOfNodeMemory ? 0 : r.memory_mib));
  }
  if (slurm.count("MemPerTres")) {
    differ("MemPerTres", get("MemPerTres"),
           "gres:gpu:" + std::to_string(r.memory_mib_per_gpu));
  }
  if (slurm.count("CpusPerTres")) {
    differ("CpusPerTres", get("CpusPerTres"),
           "gres:gpu:" + std::to_string(r.cpus_per_gpu));
  }
  if (slurm.count("MinCPUsNode") && script.find("mincpus") != std::string::npos) {
    const int cpus = r.cpus;
    if (cpus < std::atoi(get("MinCPUsNode").c_str()))
      diffs.push_back("MinCPUsNode: slurm " + get("MinCPUsNode") + ", hachi " +
                      std::to_string(cpus));
  }
  {
    std::string want = get("TresPerNode");
    if (want.empty() && slurm.count("TresPerTask")) {
      // --gpus-per-task with one task per node: the same GPUs per node.
      const std::string per_task = get("TresPerTask");
      const int tasks_per_node = s.ntasks_per_node > 0 ? s.ntasks_per_node : 1;
      want = per_task.substr(0, per_task.rfind(':') + 1) +
             std::to_string(std::atoi(per_task.substr(per_task.rfind(':') + 1).c_str()) *
                            tasks_per_node);
    }
    std::string got;
    if (r.GpusPerNode() > 0) {
      got = "gres:gpu:" + (r.gpu_model.empty() ? "" : r.gpu_model + ":") +
            std::to_string(r.GpusPerNode());
    }
    differ("TresPerNode", want, got);
  }
  differ("Features", get("Features") == "(null)" ? "" : get("Features"), r.constraint);
  if (Hosts(get("ReqNodeList")) != Hosts(r.nodelist))
    differ("ReqNodeList", get("ReqNodeList"), r.nodelist);
  if (Hosts(get("ExcNodeList")) != Hosts(r.exclude))
    differ("ExcNodeList", get("ExcNodeList"), r.exclude);
  {
    std::string got = "(null)";
    for (const sched::Dependency& d : r.dependencies) {
      if (d.kind == sched::DependencyKind::kSingleton) got = "singleton(unfulfilled)";
    }
    differ("Dependency", get("Dependency"), got);
  }
  if (!s.name.empty()) differ("JobName", get("JobName"), s.name);
  if (get("Account") != "(null)") differ("Account", get("Account"), r.account);
  if (!s.comment.empty() || slurm.count("Comment"))
    differ("Comment", get("Comment"), s.comment);
  differ("Nice", get("Nice"), std::to_string(r.nice));
  differ("OverSubscribe", get("OverSubscribe") == "NO" ? "exclusive" : "shared",
         r.exclusive ? "exclusive" : "shared");
  if (script.find("requeue") != std::string::npos)
    differ("Requeue", get("Requeue"), s.requeue ? "1" : "0");
  if (slurm.count("ArrayTaskId")) {
    std::string got;
    if (!o.array.empty()) {
      const std::vector<int> t = ExpandArray(o.array);
      got = std::to_string(t.front()) + "-" + std::to_string(t.back()) +
            (o.array.max_running > 0 ? "%" + std::to_string(o.array.max_running) : "");
    }
    differ("ArrayTaskId", get("ArrayTaskId"), got);
  }
  // Output paths: Slurm's are expanded for its job (id, name, its working directory
  // /tmp/sbcmp); ours are patterns, expanded the same way here. Only where the script
  // names them (the default file name is each scheduler's own).
  for (const auto& [field, pattern] :
       {std::pair<std::string, std::string>{"StdOut", s.stdout_path},
        {"StdErr", s.stderr_path.empty() ? s.stdout_path : s.stderr_path}}) {
    if (pattern.empty()) continue;
    api::LaunchSpec l;
    l.job = std::atoll(get("JobId").c_str());
    l.spec = s;
    l.spec.workdir = "/tmp/sbcmp";
    l.spec.array_job_id = o.array.empty() ? 0 : l.job;
    // The array's own record has no task (Slurm prints NO_VAL, 4294967294, for %a).
    l.spec.array_task_id = o.array.empty() ? -1 : 777777;
    if (l.spec.name.empty()) l.spec.name = get("JobName");
    l.node = kNodePlaceholder;
    std::string got = api::ExpandOutputPath(pattern, l);
    // Slurm leaves %N (the node) unexpanded until the job runs.
    for (size_t n; (n = got.find(kNodePlaceholder)) != std::string::npos;)
      got.replace(n, kNodePlaceholder.size(), "%N");
    if (size_t n = got.find("777777"); n != std::string::npos)
      got.replace(n, 6, "4294967294");
    // scontrol leaves %J (jobid.stepid) as written; for the batch step it is the job id
    // (checked on Debian's Slurm: -o t.%J.out made t.22.out).
    std::string want = get(field);
    for (size_t n; (n = want.find("%J")) != std::string::npos;)
      want.replace(n, 2, get("JobId"));
    differ(field, want, got);
  }
  return diffs;
}

// Where Hachi's reading differs from Slurm's on purpose, with the reason (docs/slurm.md,
// "What differs"). Everything else must match field for field.
const std::map<std::string, std::vector<std::string>>& KnownDifferences() {
  static const auto* known = new std::map<std::string, std::vector<std::string>>{
      // Slurm keeps time limits in whole minutes and rounds 29:59 up; Hachi keeps the
      // seconds asked for (a job given 29:59 ends at 29:59).
      {"constraint-and-gpus-per-task", {"TimeLimit: slurm 00:30:00, hachi 00:29:59"}},
  };
  return *known;
}

TEST(PublicSlurmScripts, ReadAsSlurm2205ReadsThem) {
  for (const std::string& n : Scripts()) {
    SCOPED_TRACE(n);
    std::string error;
    const std::optional<std::string> text = ReadFile(kDir + "/" + n, &error);
    ASSERT_TRUE(text.has_value()) << error;
    const std::string stem = n.substr(0, n.size() - 3);
    const std::optional<std::string> slurm =
        ReadFile(kDir + "/slurm-22.05/" + stem + ".txt", &error);
    ASSERT_TRUE(slurm.has_value())
        << error << " (slurm-22.05/README.md says how to make it)";
    Result<ParsedOptions> d = ParseDirectives(*text, n);
    Result<SubmitOptions> o = d.ok() ? BuildSubmitOptions(*d, ParsedOptions{})
                                     : Result<SubmitOptions>(d.status());
    std::vector<std::string> diffs;
    if (!o.ok()) {
      diffs.push_back("refused: " + o.status().message());
    } else {
      diffs = Differences(*o, SlurmFields(*slurm), *text);
    }
    const auto it = KnownDifferences().find(stem);
    EXPECT_EQ(diffs,
              it == KnownDifferences().end() ? std::vector<std::string>{} : it->second);
  }
}

}  // namespace
}  // namespace hachi::cli
