// sinfo under Slurm's name (docs/cli.md "sinfo"): partitions and their nodes as sinfo
// 22.05 prints them: one line per partition and group of alike nodes (or per node and
// partition with -N), the default partition marked '*', -o codes, -O field names, -s.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "state/records.h"

namespace hachi::cli::slurm {

inline constexpr std::string_view kSinfoDefaultFormat = "%9P %.5a %.10l %.6D %.6t %N";
inline constexpr std::string_view kSinfoNodeFormat = "%N %.6D %P %6t";
inline constexpr std::string_view kSinfoSummaryFormat = "%9P %.5a %.10l %.16F  %N";

// A partition as GET /partitions describes it.
struct PartitionInfo {
  std::string name;
  std::vector<std::string> nodes;
  Duration default_time = 0;
  Duration max_time = 0;    // <= 0: infinite
  bool is_default = false;  // the first partition: where a job without -p goes
  int min_gpus = 0, max_gpus = 0;
  bool whole_node = false;
};
// Parses GET /partitions' body; the first one is the default.
Result<std::vector<PartitionInfo>> PartitionsFromJson(std::string_view body);

struct SinfoOptions {
  bool help = false, usage = false;
  bool noheader = false;                // -h
  bool node_lines = false;              // -N
  bool summarize = false;               // -s
  std::string format;                   // -o
  std::string long_format;              // -O
  std::vector<std::string> partitions;  // -p
  std::vector<std::string> nodes;       // -n
  std::string server;
};
Result<SinfoOptions> ParseSinfoArgs(const std::vector<std::string>& args);

Result<std::string> RenderSinfo(const SinfoOptions& o,
                                const std::vector<PartitionInfo>& partitions,
                                const std::vector<state::NodeStatus>& nodes);

// sinfo's TIMELIMIT: "infinite", "30:00", "4:00:00", "7-00:00:00".
std::string SinfoTimeLimit(Duration d);

}  // namespace hachi::cli::slurm
