#include "config/slurm_conf.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

namespace hachi::config {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// One logical line: its first physical line number and its Key=Value words, keys
// lower-cased (slurm.conf's keys are case-insensitive; values are kept as written).
struct ConfLine {
  int line = 0;
  std::vector<std::pair<std::string, std::string>> words;
  std::vector<std::string> raw_keys;  // as written, for the notes
  std::string Get(std::string_view key) const {
    for (const auto& [k, v] : words)
      if (k == key) return v;
    return "";
  }
};

// Comments cut at '#' outside double quotes; a line ending in '\' continues.
Result<std::vector<ConfLine>> Lines(std::string_view text, std::string_view origin) {
  std::vector<ConfLine> out;
  std::string pending;
  int pending_line = 0;
  int number = 0;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t nl = std::min(text.find('\n', at), text.size());
    std::string_view raw = text.substr(at, nl - at);
    at = nl + 1;
    ++number;
    std::string cut;
    bool quoted = false;
    for (char c : raw) {
      if (c == '"') quoted = !quoted;
      if (c == '#' && !quoted) break;
      cut += c;
    }
    while (!cut.empty() && std::isspace(static_cast<unsigned char>(cut.back())))
      cut.pop_back();
    if (pending.empty()) pending_line = number;
    if (!cut.empty() && cut.back() == '\\') {
      cut.pop_back();
      pending += cut + " ";
      if (nl == text.size()) break;
      continue;
    }
    pending += cut;
    ConfLine line{pending_line, {}, {}};
    size_t i = 0;
    while (i < pending.size()) {
      while (i < pending.size() && std::isspace(static_cast<unsigned char>(pending[i])))
        ++i;
      if (i >= pending.size()) break;
      std::string word;
      bool q = false;
      while (i < pending.size() &&
             (q || !std::isspace(static_cast<unsigned char>(pending[i])))) {
        if (pending[i] == '"') {
          q = !q;
        } else {
          word += pending[i];
        }
        ++i;
      }
      const size_t eq = word.find('=');
      if (eq == std::string::npos || eq == 0) {
        return InvalidArgument(std::string(origin) + ":" + std::to_string(pending_line) +
                               ": '" + word + "' is not Key=Value (is this slurm.conf?)");
      }
      line.words.emplace_back(Lower(word.substr(0, eq)), word.substr(eq + 1));
      line.raw_keys.push_back(word.substr(0, eq));
    }
    if (!line.words.empty()) out.push_back(std::move(line));
    pending.clear();
    if (nl == text.size()) break;
  }
  return out;
}

// Slurm's time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or INFINITE /
// UNLIMITED. As a Hachi duration ("2d4h30m"); nullopt when unreadable.
std::optional<std::string> Duration(std::string_view v) {
  const std::string l = Lower(v);
  if (l == "infinite" || l == "unlimited") return "3650d";  // Hachi's longest
  long days = 0;
  std::string_view rest = v;
  const size_t dash = v.find('-');
  std::vector<long> parts;
  auto number = [](std::string_view s, long* out) {
    if (s.empty() || s.size() > 9) return false;
    long n = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      n = n * 10 + (c - '0');
    }
    *out = n;
    return true;
  };
  if (dash != std::string_view::npos) {
    if (!number(v.substr(0, dash), &days)) return std::nullopt;
    rest = v.substr(dash + 1);
  }
  size_t start = 0;
  while (true) {
    const size_t colon = rest.find(':', start);
    long n = 0;
    if (!number(rest.substr(start, colon - start), &n)) return std::nullopt;
    parts.push_back(n);
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (parts.size() > 3) return std::nullopt;
  long seconds = 0;
  if (dash != std::string_view::npos) {  // D-HH[:MM[:SS]]
    seconds = parts[0] * 3600 + (parts.size() > 1 ? parts[1] * 60 : 0) +
              (parts.size() > 2 ? parts[2] : 0);
  } else if (parts.size() == 1) {  // minutes
    seconds = parts[0] * 60;
  } else if (parts.size() == 2) {  // MM:SS
    seconds = parts[0] * 60 + parts[1];
  } else {  // HH:MM:SS
    seconds = parts[0] * 3600 + parts[1] * 60 + parts[2];
  }
  seconds += days * 86400;
  if (seconds <= 0) return std::nullopt;
  std::string out;
  if (seconds >= 86400) out += std::to_string(seconds / 86400) + "d";
  if (seconds % 86400 >= 3600) out += std::to_string(seconds % 86400 / 3600) + "h";
  if (seconds % 3600 >= 60) out += std::to_string(seconds % 3600 / 60) + "m";
  if (seconds % 60 > 0) out += std::to_string(seconds % 60) + "s";
  return out;
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::vector<std::string> SplitComma(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t c = std::min(s.find(',', start), s.size());
    if (c > start) out.emplace_back(s.substr(start, c - start));
    start = c + 1;
  }
  return out;
}

// Node lists split at the commas outside brackets ("gpu[01-04],cpu[1,3]").
std::vector<std::string> SplitHostlist(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::string TomlList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + Quote(items[i]);
  return out + "]";
}

// The GPU type names of a node's Gres= ("gpu:a100:4,gpu:a100:4(S:0-1)" -> {"a100"}),
// and whether it has GPUs at all.
void GresTypes(std::string_view gres, std::vector<std::string>* types, bool* has_gpus) {
  for (std::string item : SplitHostlist(gres)) {
    item = item.substr(0, item.find('('));
    if (item.rfind("gpu", 0) != 0) continue;
    *has_gpus = true;
    std::vector<std::string> parts;
    size_t start = 0;
    while (start <= item.size()) {
      const size_t c = std::min(item.find(':', start), item.size());
      parts.emplace_back(item.substr(start, c - start));
      start = c + 1;
    }
    // gpu:N, gpu:TYPE:N, gpu:TYPE
    if (parts.size() >= 3 ||
        (parts.size() == 2 && !std::isdigit(static_cast<unsigned char>(
                                  parts[1].empty() ? 'x' : parts[1][0])))) {
      if (std::find(types->begin(), types->end(), parts[1]) == types->end())
        types->push_back(parts[1]);
    }
  }
}

bool SingleBracketGroup(std::string_view name) {
  return std::count(name.begin(), name.end(), '[') <= 1;
}

// slurm.conf's lines turned into the cluster config's TOML, with a note for each
// thing that is not carried over.
class Importer {
 public:
  explicit Importer(std::string_view origin) : origin_(origin) {}

  // NodeName=...: features and the GPU type name of the nodes it names.
  void NodeLine(const ConfLine& l) {
    static const std::vector<std::string> kDiscovered = {
        "cpus",           "realmemory",     "sockets",      "socketsperboard",
        "corespersocket", "threadspercore", "boards",       "tmpdisk",
        "nodeaddr",       "nodehostname",   "port",         "state",
        "cpuspectype",    "memspeclimit",   "corespeccount"};
    const std::string name = l.words.front().second;
    if (Lower(name) == "default") {
      node_defaults_.assign(l.words.begin() + 1, l.words.end());
      return;
    }
    std::vector<std::pair<std::string, std::string>> words = node_defaults_;
    words.insert(words.end(), l.words.begin() + 1, l.words.end());
    std::vector<std::string> features, types, ignored;
    bool has_gpus = false;
    for (const auto& [k, v] : words) {
      if (k == "feature" || k == "features" || k == "activefeatures" ||
          k == "availablefeatures") {
        for (const std::string& f : SplitComma(v))
          if (std::find(features.begin(), features.end(), f) == features.end())
            features.push_back(f);
      } else if (k == "gres") {
        GresTypes(v, &types, &has_gpus);
      } else if (std::find(kDiscovered.begin(), kDiscovered.end(), k) !=
                 kDiscovered.end()) {
        // What the agent discovers or registers with; not carried over.
      } else {
        ignored.push_back(k + "=" + v);
      }
    }
    for (const std::string& n : SplitHostlist(name)) node_has_gpus_[n] = has_gpus;
    for (const std::string& i : ignored)
      Note(l.line,
           "NodeName=" + name + ": " + i + ": no Hachi equivalent, not carried over");
    if (types.size() > 1) {
      Note(l.line, "NodeName=" + name + ": several GPU types (" + TomlList(types) +
                       "): Hachi gives a node one type name; the first is used");
    }
    if (features.empty() && types.empty()) return;
    for (const std::string& n : SplitHostlist(name)) {
      if (!SingleBracketGroup(n)) {
        Note(l.line, "NodeName=" + n +
                         ": more than one [...] group in a name; write its nodes out in "
                         "the config by hand");
        continue;
      }
      nodes_toml_ += "\n[node." + Quote(n) + "]\n";
      if (!features.empty()) nodes_toml_ += "features = " + TomlList(features) + "\n";
      if (!types.empty()) nodes_toml_ += "gres_type = " + Quote(types.front()) + "\n";
    }
  }

  // PartitionName=...: one [[partition]] (the Default=YES one first).
  Status PartitionLine(const ConfLine& l) {
    const std::string name = l.words.front().second;
    if (name.empty())
      return InvalidArgument(std::string(origin_) + ":" + std::to_string(l.line) +
                             ": PartitionName= without a name");
    if (Lower(name) == "default") {
      part_defaults_.assign(l.words.begin() + 1, l.words.end());
      return Status::Ok();
    }
    std::vector<std::pair<std::string, std::string>> words = part_defaults_;
    words.insert(words.end(), l.words.begin() + 1, l.words.end());
    std::map<std::string, std::string> kv;
    for (const auto& [k, v] : words) kv[k] = v;  // the line's own win over DEFAULT
    std::string t = "\n[[partition]]\nname = " + Quote(name) + "\n";
    const bool is_default = Lower(kv["default"]) == "yes";
    if (is_default)
      t += "# Default=YES: listed first, so jobs that name no partition come here\n";
    const std::string nodes = kv.count("nodes") ? kv["nodes"] : "";
    if (nodes.empty()) {
      Note(l.line, "PartitionName=" + name + " has no Nodes=: skipped");
      return Status::Ok();
    }
    t += "nodes = " + Quote(Lower(nodes) == "all" ? "all" : nodes) + "\n";
    const std::string over =
        Lower(kv.count("oversubscribe") ? kv["oversubscribe"] : kv["shared"]);
    t += std::string("mode = ") +
         (over.rfind("exclusive", 0) == 0 ? "\"whole-node\"" : "\"shared\"") + "\n";
    if (!over.empty() && over.rfind("exclusive", 0) != 0 && over != "no") {
      Note(l.line, "PartitionName=" + name + ": OverSubscribe=" + kv["oversubscribe"] +
                       ": Hachi never gives one GPU or CPU to two jobs (GPU shares "
                       "are asked for with --gpu-share)");
    }
    t += PartitionFields(kv, name, l.line);
    // Slurm takes CPU-only jobs in every partition.
    t += "allow_cpu_jobs = true\n";
    static const std::vector<std::string> kDone = {
        "nodes",        "default",     "oversubscribe", "shared",
        "maxtime",      "defaulttime", "prioritytier",  "allowaccounts",
        "defmempergpu", "preemptmode", "gracetime",     "defcpupergpu"};
    for (const auto& [k, v] : words) {
      if (std::find(kDone.begin(), kDone.end(), k) != kDone.end()) continue;
      if (k == "state" && Lower(v) == "up") continue;
      Note(l.line, "PartitionName=" + name + ": " + k + "=" + v +
                       ": no Hachi equivalent, not carried over");
    }
    if (is_default) {
      partitions_toml_.insert(partitions_toml_.begin(), t);
    } else {
      partitions_toml_.push_back(t);
    }
    return Status::Ok();
  }

  void Note(int line, const std::string& what) {
    out_.notes.push_back(std::string(origin_) + ":" + std::to_string(line) + ": " + what);
  }

  SlurmConfImport Take() {
    out_.toml =
        "# Translated from " + std::string(origin_) +
        " by `hachi slurm import-conf` (docs/slurm.md).\n"
        "# Each node's CPUs, memory and GPUs are what its agent discovers; slurm.conf's\n"
        "# are not carried over. Lines with no Hachi equivalent are listed on stderr.\n";
    for (const std::string& p : partitions_toml_) out_.toml += p;
    out_.toml += nodes_toml_;
    return std::move(out_);
  }

 private:
  // A partition's limits, tier, accounts, memory and preemption, as TOML lines.
  std::string PartitionFields(std::map<std::string, std::string>& kv,
                              const std::string& name, int line) {
    std::string t;
    for (const auto& [slurm_key, hachi_key] :
         std::vector<std::pair<std::string, std::string>>{
             {"maxtime", "max_time"}, {"defaulttime", "default_time"}}) {
      if (!kv.count(slurm_key)) continue;
      const std::optional<std::string> d = Duration(kv[slurm_key]);
      if (!d) {
        Note(line, "PartitionName=" + name + ": " + slurm_key + "=" + kv[slurm_key] +
                       ": not a Slurm time; left out");
        continue;
      }
      t += hachi_key + " = " + Quote(*d) + "\n";
    }
    if (kv.count("prioritytier")) {
      long tier = std::atol(kv["prioritytier"].c_str());
      if (tier > 1000) {
        Note(line, "PartitionName=" + name + ": PriorityTier=" + kv["prioritytier"] +
                       ": Hachi's tiers go to 1000; 1000 used (keep their order by hand "
                       "if several are above it)");
        tier = 1000;
      }
      t += "tier = " + std::to_string(std::max(0L, tier)) + "\n";
    }
    if (kv.count("allowaccounts") && Lower(kv["allowaccounts"]) != "all") {
      t += "allowed_accounts = " + TomlList(SplitComma(kv["allowaccounts"])) + "\n";
    }
    if (kv.count("defcpupergpu")) {
      t += "default_cpus_per_gpu = " +
           std::to_string(std::atol(kv["defcpupergpu"].c_str())) + "\n";
    }
    if (kv.count("defmempergpu")) {
      t += "default_mem_per_gpu = " +
           std::to_string(std::atol(kv["defmempergpu"].c_str())) + "  # MiB\n";
    }
    if (kv.count("preemptmode")) {
      const std::string m = Lower(kv["preemptmode"]);
      if (m == "requeue" || m == "cancel") {
        t += "preempt_mode = " + Quote(m) + "\n";
      } else if (m != "off") {
        Note(line, "PartitionName=" + name + ": PreemptMode=" + kv["preemptmode"] +
                       ": Hachi preempts by requeue or cancel only");
      }
    }
    if (kv.count("gracetime")) {
      const long g = std::atol(kv["gracetime"].c_str());
      if (g > 0) t += "grace = \"" + std::to_string(g) + "s\"\n";
    }
    return t;
  }

  const std::string_view origin_;
  SlurmConfImport out_;
  std::string nodes_toml_;
  std::vector<std::string> partitions_toml_;   // the default partition first
  std::map<std::string, bool> node_has_gpus_;  // by NodeName word, as written
  std::vector<std::pair<std::string, std::string>> node_defaults_, part_defaults_;
};

}  // namespace

Result<SlurmConfImport> ImportSlurmConf(std::string_view text, std::string_view origin) {
  Result<std::vector<ConfLine>> lines = Lines(text, origin);
  if (!lines.ok()) return lines.status();
  Importer in(origin);
  for (const ConfLine& l : *lines) {
    const std::string& key = l.words.front().first;
    if (key == "nodename") {
      in.NodeLine(l);
    } else if (key == "partitionname") {
      HACHI_RETURN_IF_ERROR(in.PartitionLine(l));
    } else {
      in.Note(l.line,
              l.raw_keys.front() + "=" + l.words.front().second +
                  (l.words.size() > 1 ? " ..." : "") +
                  ": a daemon or plugin setting, not part of Hachi's cluster config");
    }
  }
  return in.Take();
}

}  // namespace hachi::config
