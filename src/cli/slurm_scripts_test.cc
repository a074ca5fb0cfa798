// Public batch scripts read as Slurm reads them (issue 17): every script in
// testdata/slurm-scripts/ (their provenance: PROVENANCE.md there) goes through the same
// parse as `hachi submit` / `sbatch` (ParseDirectives, BuildSubmitOptions), and the
// request it would send (the API's submit JSON, less the script text and environment)
// is compared with golden/NAME.txt beside it. A script Hachi refuses has its error as the
// golden text. HACHI_UPDATE_GOLDEN=1 rewrites the goldens; review them against what
// Slurm 22.05 does before committing (docs/slurm.md says how each option maps).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "api/protocol_json.h"
#include "cli/directives.h"
#include "core/strings.h"

namespace hachi::cli {
namespace {

namespace fs = std::filesystem;

const std::string kDir = std::string(HACHI_SOURCE_DIR) + "/testdata/slurm-scripts";

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

}  // namespace
}  // namespace hachi::cli
