// Node features and the job's node selection: what `-C/--constraint`,
// `-w/--nodelist`, `-x/--exclude` and `--gres=gpu:TYPE:N` ask of a node, as Slurm 22.05
// reads them.
//
// A node's features are automatic ones (NodeFeatures: the GPU model's short name `h100`
// and Slurm's autodetected type `nvidia_h100_80gb_hbm3`, the GPU memory `80gb`, the
// interconnect class `nvswitch`, `nvlink` + `nvlink-pairs`/`nvlink-mesh`, `pcie` +
// `pcie-only`) plus what the config gives it (Node::features). Names are compared
// exactly (case-sensitive), as Slurm compares them.
//
// A constraint (ParseConstraint) is Slurm's expression: names joined by `&` (and) and
// `|` (or), `&` binding tighter, grouped by `(...)`; one `[a|b|...]` group is Slurm's
// "matching or": every node of a gang has the same one of the alternatives (a single
// node: any). Counts (`a*2`) are refused with a clear message.
//
// Pure functions and values; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sched/cluster.h"

namespace hachi::sched {

// "NVIDIA H100 80GB HBM3" -> "h100", "Tesla V100-SXM2-32GB" -> "v100", "NVIDIA RTX
// A6000" -> "a6000", "NVIDIA GeForce RTX 4090" -> "rtx4090"; "" when nothing is left.
std::string GpuShortName(std::string_view model);

// The node's features, automatic and configured, sorted, without duplicates.
std::vector<std::string> NodeFeatures(const Node& node);

class Constraint {
 public:
  // An empty text is the empty constraint, which every node matches.
  static Result<Constraint> Parse(std::string_view text);

  bool empty() const { return ops_.empty(); }
  const std::string& text() const { return text_; }
  // The number of alternatives of the [...] group (0: none).
  int alternatives() const {
    return bracket_ < 0 ? 0 : static_cast<int>(ops_[bracket_].kids.size());
  }
  // Every feature name the expression mentions, in order of first mention.
  std::vector<std::string> Names() const;

  // Whether a node with `features` (sorted) matches. `choice`: -1, the [...] group as a
  // plain or; k >= 0, only its k-th alternative (a gang's common one).
  bool Matches(const std::vector<std::string>& features, int choice = -1) const;

 private:
  struct Op {
    enum Kind : uint8_t { kName, kAnd, kOr, kBracket } kind = kName;
    std::string name;
    std::vector<int> kids;
  };
  friend class ConstraintParser;
  bool Eval(int op, const std::vector<std::string>& features, int choice) const;

  std::string text_;
  std::vector<Op> ops_;  // ops_.back() is the root
  int bracket_ = -1;     // index of the [...] group, -1: none
};

// What the request's constraint, node list and exclusion (JobRequest) say about
// nodes, resolved against a cluster's node names once (submit, or a cycle's new
// eligible set). Parse errors are kInvalidArgument; a node list naming a node the
// cluster does not have is kInvalidArgument "Invalid node name specified" (Slurm's
// words).
struct NodeSelection {
  Constraint constraint;
  std::vector<int> required;  // -w, node indices, ascending
  std::vector<int> excluded;  // -x, node indices, ascending
  bool empty() const {
    return constraint.empty() && required.empty() && excluded.empty();
  }
};
Result<NodeSelection> ResolveSelection(const ClusterState& state, const JobRequest& req);

// Whether `node` may hold a part of the job as far as the selection goes (the
// constraint with `choice` as Constraint::Matches, not excluded; for a job whose node
// list names all its nodes, in the list).
bool SelectionAllows(const ClusterState& state, const NodeSelection& sel, int nodes,
                     int node, int choice = -1);

}  // namespace hachi::sched
