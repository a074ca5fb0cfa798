// The fields of a job's request (sched::JobRequest) that the API's job object
// (api/record_json.cc) and the store's job row (state/row_codec.cc) write alike: always
// present, the same names, text as bytes (JsonBytes). One writer for both.
//
// The rest of the request is written apart on purpose. The API writes every later field
// (constraint, nodelist, exclude, begin_time, deadline, nice, mig_profile) always: its
// object is the whole request. The row writes each only when set, so that a row without
// them stays byte for byte what older binaries wrote and can read (docs/storage.md:
// rows are versioned apart from the wire; a row holding mig_profile alone raises its
// `_min_reader`). The readers stay apart too (strict API, tolerant rows). Should the API
// ever rename one of these fields, the row codec takes its own copy of this list: the
// database does not move with the wire.
//
// Includes nlohmann: for codec .cc files only. Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "sched/cluster.h"

namespace hachi::state {

// gpus, nodes, gpus_per_node, cpus_per_gpu, cpus, memory_mib_per_gpu, memory_mib,
// gpu_model, min_gpu_memory_mib, partition, qos, user, account, time_limit, exclusive,
// dependencies, gpu_share_milli, gpu_memory_mib.
nlohmann::json RequestCommonJson(const sched::JobRequest& req);

}  // namespace hachi::state
