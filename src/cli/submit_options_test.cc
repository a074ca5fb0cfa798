#include "cli/submit_options.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "api/protocol_json.h"
#include "cli/directives.h"

namespace hachi::cli {
namespace {

// A value each row that sets something takes; "" for flags. A new row needs one here,
// so that the table test below covers it.
const std::map<std::string, std::string, std::less<>>& Samples() {
  static const std::map<std::string, std::string, std::less<>> kSamples = {
      {"gres", "gpu:h100:2"},
      {"gpus", "4"},
      {"gpus-per-node", "2"},
      {"gpus-per-task", "1"},
      {"nodes", "1"},
      {"partition", "gpu8"},
      {"time", "1-02:03:04"},
      {"cpus-per-task", "4"},
      {"cpus-per-gpu", "8"},
      {"mincpus", "16"},
      {"mem", "64G"},
      {"mem-per-gpu", "20G"},
      {"mem-per-cpu", "2G"},
      {"exclusive", ""},
      {"gpu-share", "0.5"},
      {"gpu-mem", "10G"},
      {"ntasks", "4"},
      {"ntasks-per-node", "2"},
      {"overcommit", ""},
      {"job-name", "train"},
      {"qos", "high"},
      {"account", "ml"},
      {"dependency", "afterok:12:13,singleton"},
      {"array", "1-7:2%2"},
      {"hold", ""},
      {"requeue", ""},
      {"no-requeue", ""},
      {"comment", "a note"},
      {"constraint", "h100&nvlink"},
      {"nodelist", "n[1-2]"},
      {"exclude", "n3"},
      {"begin", "now+1hour"},
      {"deadline", "2030-01-01T00:00:00"},
      {"nice", "10"},
      {"output", "out-%j.txt"},
      {"error", "err-%j.txt"},
      {"open-mode", "append"},
      {"chdir", "/scratch/run"},
      {"export", "NONE"},
      {"signal", "B:USR1@90"},
      {"container-image", "nvcr.io/nvidia/pytorch:24.01-py3"},
      {"shm-size", "8G"},
      {"wrap", "python train.py"},
      {"parsable", ""},
      {"batch-nodes", "first"},
  };
  return kSamples;
}

// What a build yields, as one comparable string: the request and spec as the API
// encodes them, and the fields the API does not carry.
std::string Fingerprint(const SubmitOptions& o) {
  api::SubmitRequest r;
  r.req = o.req;
  r.spec = o.spec;
  r.hold = o.hold;
  r.array_tasks = ExpandArray(o.array);
  r.array_max_running = o.array.max_running;
  std::string out = api::SubmitRequestToJson(r);
  out += "|unlimited=" + std::to_string(o.time_unlimited) + "|wrap=" + o.wrap +
         "|parsable=" + std::to_string(o.parsable) + "|begin=" + o.begin_text +
         "|deadline=" + o.deadline_text + "|export=" + std::to_string(o.export_env.all) +
         std::to_string(o.export_env.none) + std::to_string(o.export_env.vars.size()) +
         "|warnings=" + std::to_string(o.warnings.size()) + "|set=";
  for (const std::string& s : o.explicitly_set) out += s + ",";
  return out;
}

Result<SubmitOptions> FromFlags(const std::vector<std::string>& args) {
  Result<ParsedOptions> f = ParseFlags(args);
  if (!f.ok()) return f.status();
  return BuildSubmitOptions({}, *f);
}

Result<SubmitOptions> FromDirective(const std::string& prefix, const std::string& line) {
  Result<ParsedOptions> d =
      ParseDirectives("#!/bin/bash\n" + prefix + " " + line + "\necho hi\n", "job.sh");
  if (!d.ok()) return d.status();
  return BuildSubmitOptions(*d, {});
}

// Every row that sets something, from every spelling a user can write it in: the same
// request from `--name=V`, `--name V`, `-xV`, `-x V`, and the #SBATCH and #HACHI lines.
TEST(SubmitOptionTable, EveryRowParsesAlikeFromFlagsAndDirectives) {
  int rows = 0;
  for (const OptionRow& row : SubmitOptionTable()) {
    if (row.set == nullptr) continue;
    const std::string name(row.name);
    SCOPED_TRACE(name);
    auto sample = Samples().find(name);
    ASSERT_NE(sample, Samples().end()) << "no sample value for --" << name;
    const std::string& v = sample->second;
    const bool flag = row.kind == OptionKind::kFlag;
    std::vector<std::vector<std::string>> spellings;
    spellings.push_back({flag ? "--" + name : "--" + name + "=" + v});
    if (row.kind == OptionKind::kValue) spellings.push_back({"--" + name, v});
    if (!row.alias.empty())
      spellings.push_back({"--" + std::string(row.alias) + "=" + v});
    if (row.short_name != 0) {
      const std::string s = std::string("-") + row.short_name;
      spellings.push_back({flag ? s : s + v});
      if (!flag) spellings.push_back({s, v});
    }
    Result<SubmitOptions> first = FromFlags(spellings[0]);
    ASSERT_TRUE(first.ok()) << first.status().message();
    EXPECT_TRUE(first->IsSet(name));
    const std::string want = Fingerprint(*first);
    for (const auto& args : spellings) {
      Result<SubmitOptions> got = FromFlags(args);
      ASSERT_TRUE(got.ok()) << args[0] << ": " << got.status().message();
      EXPECT_EQ(Fingerprint(*got), want) << args[0];
    }
    std::vector<std::string> lines = {flag ? "--" + name : "--" + name + "='" + v + "'"};
    if (row.kind == OptionKind::kValue) lines.push_back("--" + name + " '" + v + "'");
    for (const char* prefix : {"#SBATCH", "#HACHI"}) {
      for (const std::string& line : lines) {
        Result<SubmitOptions> got = FromDirective(prefix, line);
        ASSERT_TRUE(got.ok()) << prefix << " " << line << ": " << got.status().message();
        EXPECT_EQ(Fingerprint(*got), want) << prefix << " " << line;
      }
    }
    ++rows;
  }
  EXPECT_EQ(rows, static_cast<int>(Samples().size()));
}

// The table's shape: one row per spelling within each command, a set function exactly
// for the options BuildSubmitOptions applies, a note for every ignored one.
TEST(SubmitOptionTable, RowsAreConsistent) {
  for (uint8_t command : {kCmdSbatch, kCmdSrun, kCmdSalloc, kCmdSubmit, kCmdRun}) {
    std::set<std::string_view> names;
    std::set<char> shorts;
    for (const OptionRow& row : SubmitOptionTable()) {
      if ((row.commands & command) == 0) continue;
      EXPECT_TRUE(names.insert(row.name).second) << row.name;
      if (!row.alias.empty()) {
        EXPECT_TRUE(names.insert(row.alias).second) << row.alias;
      }
      if (row.short_name != 0) {
        EXPECT_TRUE(shorts.insert(row.short_name).second) << row.short_name;
      }
    }
  }
  for (const OptionRow& row : SubmitOptionTable()) {
    SCOPED_TRACE(std::string(row.name));
    const bool applied = row.kind == OptionKind::kValue ||
                         row.kind == OptionKind::kFlag ||
                         row.kind == OptionKind::kOptionalValue;
    EXPECT_EQ(row.set != nullptr, applied);
    if (row.kind == OptionKind::kIgnoredValue || row.kind == OptionKind::kIgnoredFlag ||
        row.kind == OptionKind::kRefused) {
      EXPECT_FALSE(row.note.empty());
    }
    if (row.kind != OptionKind::kFrontEnd) {
      EXPECT_FALSE(row.front_end_value);
      EXPECT_NE(row.commands & kCmdBatchLike, 0) << "a request option nobody parses";
    }
    if ((row.commands & kSrunShapesAllocation) != 0) {
      EXPECT_NE(row.commands & kCmdSrun, 0);
    }
  }
}

TEST(SubmitOptionTable, LookupsFollowTheCommands) {
  ASSERT_NE(FindOption("tasks-per-node"), nullptr);
  EXPECT_EQ(FindOption("tasks-per-node")->name, "ntasks-per-node");
  EXPECT_EQ(FindOption("label"), nullptr);  // srun's own
  ASSERT_NE(FindOption("label", kCmdSrun), nullptr);
  EXPECT_EQ(FindShortOption('l', kCmdSrun)->name, "label");
  EXPECT_EQ(FindOption("wait", kCmdSrun), nullptr);  // sbatch's own
  EXPECT_EQ(FindShortOption('W', kCmdSbatch)->name, "wait");
  EXPECT_TRUE(TakesValue(*FindOption("server", kCmdSrun)));
  EXPECT_FALSE(TakesValue(*FindOption("nice")));  // only with '='
  EXPECT_TRUE(TakesValue(*FindOption("mail-user")));
  EXPECT_FALSE(TakesValue(*FindOption("get-user-env")));
}

// A front-end's own option is not one of the request's: the flag and directive parsers
// call it unknown, as they did when each front-end listed its own.
TEST(SubmitOptionTable, FrontEndOptionsAreUnknownToTheRequestParser) {
  for (const char* arg : {"--wait", "--server", "-W", "--label", "--pty"}) {
    Result<ParsedOptions> f = ParseFlags({arg, "x"});
    ASSERT_FALSE(f.ok()) << arg;
    EXPECT_NE(f.status().message().find("unknown option"), std::string::npos)
        << f.status().message();
  }
}

}  // namespace
}  // namespace hachi::cli
