// `hachi slurm import-conf slurm.conf` (docs/slurm.md): a Slurm shop's node
// and partition lines translated into Hachi's cluster config (docs/config.md), with a
// note for every line or key that has no Hachi equivalent, so nothing is dropped
// silently. The nodes themselves (CPUs, memory, GPUs) are what each agent discovers;
// only what the site adds on top (features, the GPU type name of gres.conf, the network
// block) is carried over.
//
// Pure functions; no I/O. Thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hachi::config {

struct SlurmConfImport {
  std::string toml;                // a cluster config Hachi's parser reads
  std::vector<std::string> notes;  // "slurm.conf:12: AllowGroups=ml: no equivalent ..."
};

// Reads slurm.conf text (`origin` names it in notes and errors): `Key=Value` words, `#`
// comments, `\` continuations, keys in any case. NodeName and PartitionName lines are
// translated; every other line is listed in the notes. Errors only for text that is not
// slurm.conf (a word without '=', a partition without a name).
Result<SlurmConfImport> ImportSlurmConf(std::string_view text, std::string_view origin);

}  // namespace hachi::config
