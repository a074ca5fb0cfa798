// argv[0] dispatch and `hachi slurm install-links`.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <utility>

#include "cli/slurm/slurm_cmds.h"
#include "cli/slurm/slurm_text.h"
#include "config/slurm_conf.h"
#include "core/strings.h"

namespace hachi::cli::slurm {

bool IsSlurmName(std::string_view name) {
  return std::find(std::begin(kSlurmNames), std::end(kSlurmNames), name) !=
         std::end(kSlurmNames);
}

int SlurmFail(std::string_view prog, std::string_view message) {
  std::cerr << prog << ": error: " << message << "\n";
  return 1;
}

int SlurmBadArgs(std::string_view prog, const Status& s) {
  const std::string& m = s.message();
  if (m.rfind("unrecognized option", 0) == 0 || m.rfind("invalid option", 0) == 0 ||
      m.rfind("option ", 0) == 0) {
    std::cerr << prog << ": " << m << "\n" << UsageHint(prog);
    return 1;
  }
  return SlurmFail(prog, m);
}

int SlurmMain(std::string_view name, const std::vector<std::string>& args) {
  using Main = int (*)(const std::vector<std::string>&);
  static constexpr std::pair<std::string_view, Main> kMains[] = {
      {"sbatch", SbatchMain}, {"squeue", SqueueMain},   {"scancel", ScancelMain},
      {"sinfo", SinfoMain},   {"sacct", SacctMain},     {"scontrol", ScontrolMain},
      {"srun", SrunMain},     {"salloc", SallocMain},   {"seff", SeffMain},
      {"sshare", SshareMain}, {"sprio", SprioMain},     {"sacctmgr", SacctmgrMain},
      {"sstat", SstatMain},   {"sreport", SreportMain}, {"sattach", SattachMain},
  };
  for (const auto& [n, main] : kMains) {
    if (n == name) return main(args);
  }
  return SlurmFail("hachi", "not a Slurm command: " + std::string(name));
}

namespace {

// Creates DIR/NAME -> this binary for every Slurm name. Checks them all first: a path
// that exists and is not already our link is refused (named) unless `force`, and then
// nothing is created.
int InstallLinks(const std::string& dir, bool force) {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return SlurmFail("hachi", "cannot read /proc/self/exe");
  const std::string self(buf, static_cast<size_t>(n));
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return SlurmFail("hachi", "install-links: " + dir + " is not a directory");
  }
  std::vector<std::string> to_create, to_replace;
  for (std::string_view name : kSlurmNames) {
    const std::string path = dir + "/" + std::string(name);
    if (::lstat(path.c_str(), &st) != 0) {
      to_create.push_back(path);
      continue;
    }
    if (S_ISLNK(st.st_mode)) {
      const ssize_t m = ::readlink(path.c_str(), buf, sizeof buf - 1);
      if (m > 0 && std::string(buf, static_cast<size_t>(m)) == self) continue;  // ours
    }
    if (!force) {
      return SlurmFail("hachi", "install-links: " + path +
                                    " exists and is not a link to " + self +
                                    " (--force replaces it); nothing installed");
    }
    to_replace.push_back(path);
  }
  for (const std::string& path : to_replace) {
    if (::unlink(path.c_str()) != 0) {
      return SlurmFail("hachi", "install-links: cannot remove " + path);
    }
    to_create.push_back(path);
  }
  for (const std::string& path : to_create) {
    if (::symlink(self.c_str(), path.c_str()) != 0) {
      return SlurmFail("hachi", "install-links: cannot create " + path);
    }
    std::cout << path << " -> " << self << "\n";
  }
  return 0;
}

// `hachi slurm import-conf FILE`: the cluster config on stdout, a note per line or key
// not carried over on stderr (config/slurm_conf.h).
int ImportConf(const std::string& path) {
  std::string error;
  const std::optional<std::string> text = ReadFile(path, &error);
  if (!text) {
    std::cerr << "hachi slurm import-conf: " << error << "\n";
    return 1;
  }
  Result<config::SlurmConfImport> r = config::ImportSlurmConf(*text, BaseName(path));
  if (!r.ok()) {
    std::cerr << "hachi slurm import-conf: " << r.status().message() << "\n";
    return 1;
  }
  std::cout << r->toml;
  for (const std::string& n : r->notes) std::cerr << "note: " << n << "\n";
  return 0;
}

}  // namespace

void AddSlurmCommands(CLI::App& app, int* exit_code) {
  CLI::App* slurm = app.add_subcommand(
      "slurm",
      "Slurm's command names (sbatch, squeue, ...): install-links DIR; import-conf FILE");
  slurm->require_subcommand(1);
  struct Flags {
    std::string dir;
    bool force = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* links = slurm->add_subcommand(
      "install-links",
      "Create sbatch, squeue, scancel, sinfo, sacct, scontrol, srun, salloc, seff, "
      "sshare, sprio, sacctmgr, sstat, sreport, sattach in DIR as links to this binary");
  links->add_option("dir", f->dir, "Directory (on $PATH)")->required();
  links->add_flag("--force", f->force, "Replace files of those names that are not ours");
  links->callback([f, exit_code] { *exit_code = InstallLinks(f->dir, f->force); });
  auto conf = std::make_shared<std::string>();
  CLI::App* import = slurm->add_subcommand(
      "import-conf",
      "Translate slurm.conf's node and partition lines into a cluster config "
      "(stdout; what has no equivalent: notes on stderr)");
  import->add_option("file", *conf, "slurm.conf")->required();
  import->callback([conf, exit_code] { *exit_code = ImportConf(*conf);
});
}  // namespace hachi::cli::slurm

}  // namespace hachi::cli::slurm
