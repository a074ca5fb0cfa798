#include "cli/commands.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "cli/cli_testing.h"

namespace hachi::cli {
namespace {

std::set<std::string> TopLevelNames(const CLI::App& app) {
  std::set<std::string> out;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    out.insert(sub->get_name());
  }
  return out;
}

// The table is the only thing that knows which Add* registers which command: each group
// must register exactly the names it lists, or a command would be built without its tree.
TEST(CommandGroups, EachGroupRegistersExactlyItsNames) {
  std::set<std::string> all;
  for (const CommandGroup& g : CommandGroups()) {
    CLI::App app;
    int exit_code = 0;
    g.add(app, &exit_code);
    std::set<std::string> listed(g.names.begin(), g.names.end());
    EXPECT_EQ(TopLevelNames(app), listed);
    for (const std::string& n : listed) EXPECT_TRUE(all.insert(n).second) << n;
  }
}

std::vector<char*> Args(std::vector<std::string>& words) {
  std::vector<char*> out;
  for (std::string& w : words) out.push_back(w.data());
  return out;
}

TEST(CommandGroups, CommandWord) {
  struct Row {
    const char* name;
    std::vector<std::string> args;
    std::string want;
  };
  const Row rows[] = {
      {"none", {}, ""},
      {"plain", {"queue", "-u", "me"}, "queue"},
      {"after a flag", {"--version", "nodes"}, "nodes"},
      {"cacert's value skipped", {"--cacert", "ca.pem", "queue"}, "queue"},
      {"cacert= form", {"--cacert=ca.pem", "show", "1"}, "show"},
      {"options only", {"--help"}, ""},
  };
  for (Row r : rows) {
    std::vector<char*> a = Args(r.args);
    EXPECT_EQ(CommandWord(a), r.want) << r.name;
  }
}

TEST(CommandGroups, BuildsOnlyTheInvokedGroup) {
  struct Row {
    const char* name;
    std::vector<std::string> args;
    size_t commands;  // top-level commands built
  };
  size_t every = 0;
  for (const CommandGroup& g : CommandGroups()) every += g.names.size();
  const Row rows[] = {
      {"one group", {"queue"}, 10},
      {"version alone", {"--version"}, 0},
      {"help lists all", {"--help"}, every},
      {"version and help", {"--version", "--help"}, every},
      {"unknown word", {"qeueu"}, every},
      {"no arguments", {}, every},
  };
  for (Row r : rows) {
    CLI::App app;
    int exit_code = 0;
    std::vector<char*> a = Args(r.args);
    AddCommandsFor(app, &exit_code, a);
    EXPECT_EQ(TopLevelNames(app).size(), r.commands) << r.name;
  }
}

// main.cc answers `--version` alone before CLI11; with a top-level option first CLI11's
// own flag does. Both print the same line.
TEST(CommandGroups, VersionWithAndWithoutCli11) {
  for (const char* args : {"--version", "--cacert /dev/null --version"}) {
    SCOPED_TRACE(args);
    const testing::CmdResult r = testing::Hachi(args);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.out, "hachi 0.1.0\n");
  }
}

}  // namespace
}  // namespace hachi::cli
