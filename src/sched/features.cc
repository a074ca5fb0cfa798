#include "sched/features.h"

#include <algorithm>
#include <cctype>

#include "core/hostlist.h"
#include "core/strings.h"
#include "topo/analysis.h"

namespace hachi::sched {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool FeatureChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' ||
         c == '.' || c == ':' || c == '/' || c == '+';
}

}  // namespace

std::string GpuShortName(std::string_view model) {
  std::vector<std::string> words;
  for (std::string_view w : Split(model, ' ')) {
    const std::string l = Lower(Trim(w));
    if (l.empty() || l == "nvidia" || l == "tesla" || l == "geforce" || l == "quadro") {
      continue;
    }
    words.push_back(l);
  }
  if (words.empty()) return "";
  std::string first = words[0].substr(0, words[0].find('-'));
  // "RTX A6000" -> "a6000"; "RTX 4090" -> "rtx4090" (a bare number says little).
  if ((first == "rtx" || first == "gtx") && words.size() > 1) {
    const std::string next = words[1].substr(0, words[1].find('-'));
    return std::isdigit(static_cast<unsigned char>(next[0])) != 0 ? first + next : next;
  }
  return first;
}

std::vector<std::string> NodeFeatures(const Node& node) {
  std::vector<std::string> f = node.features;
  if (!node.gpu_model.empty()) {
    const std::string short_name = GpuShortName(node.gpu_model);
    if (!short_name.empty()) f.push_back(short_name);
    // Slurm's AutoDetect=nvml type name: the model, lower case, spaces as '_'.
    std::string type = Lower(Trim(node.gpu_model));
    std::replace(type.begin(), type.end(), ' ', '_');
    f.push_back(type);
  }
  if (node.gpu_memory_mib > 0) {
    f.push_back(std::to_string((node.gpu_memory_mib + 512) / 1024) + "gb");
  }
  switch (node.interconnect) {
    case topo::InterconnectClass::kNvSwitch:
      f.push_back("nvswitch");
      break;
    case topo::InterconnectClass::kNvLinkPairs:
    case topo::InterconnectClass::kNvLinkMesh:
      f.push_back("nvlink");
      f.emplace_back(topo::InterconnectClassName(node.interconnect));
      break;
    case topo::InterconnectClass::kPcieOnly:
      f.push_back("pcie");
      f.emplace_back(topo::InterconnectClassName(node.interconnect));
      break;
    case topo::InterconnectClass::kUnknown:
      break;
  }
  if (!node.gres_type.empty()) f.push_back(node.gres_type);
  std::sort(f.begin(), f.end());
  f.erase(std::unique(f.begin(), f.end()), f.end());
  return f;
}

// ---- Constraint ----

// Recursive descent over Slurm's grammar:
//   expr := term ('|' term)* ; term := factor ('&' factor)*
//   factor := NAME | '(' expr ')' | '[' expr ']'
class ConstraintParser {
 public:
  explicit ConstraintParser(std::string_view text, Constraint* c) : s_(text), c_(c) {}

  Status Run() {
    Result<int> root = Expr();
    if (!root.ok()) return root.status();
    if (pos_ < s_.size()) return Bad("unexpected '" + std::string(1, s_[pos_]) + "'");
    // The root must be last: Matches starts there.
    if (*root != static_cast<int>(c_->ops_.size()) - 1) {
      c_->ops_.push_back(c_->ops_[*root]);
    }
    return Status::Ok();
  }

 private:
  Status Bad(const std::string& why) const {
    return InvalidArgument(
        "invalid constraint '" + std::string(s_) + "': " + why + " at character " +
        std::to_string(pos_ + 1) +
        " (use names joined by & and |, e.g. 'h100&ib', '[rack1|rack2]')");
  }
  int Add(Constraint::Op op) {
    c_->ops_.push_back(std::move(op));
    return static_cast<int>(c_->ops_.size()) - 1;
  }
  bool Peek(char c) const { return pos_ < s_.size() && s_[pos_] == c; }

  Result<int> Expr() {
    Result<int> first = Term();
    if (!first.ok()) return first;
    if (!Peek('|')) return first;
    Constraint::Op op;
    op.kind = Constraint::Op::kOr;
    op.kids.push_back(*first);
    while (Peek('|')) {
      ++pos_;
      Result<int> next = Term();
      if (!next.ok()) return next;
      op.kids.push_back(*next);
    }
    return Add(std::move(op));
  }

  Result<int> Term() {
    Result<int> first = Factor();
    if (!first.ok()) return first;
    if (!Peek('&')) return first;
    Constraint::Op op;
    op.kind = Constraint::Op::kAnd;
    op.kids.push_back(*first);
    while (Peek('&')) {
      ++pos_;
      Result<int> next = Factor();
      if (!next.ok()) return next;
      op.kids.push_back(*next);
    }
    return Add(std::move(op));
  }

  Result<int> Factor() {
    if (++depth_ > 32) return Bad("nested too deeply");
    Result<int> out = FactorBody();
    --depth_;
    return out;
  }

  Result<int> FactorBody() {
    if (pos_ >= s_.size()) return Bad("a feature name is missing");
    const char c = s_[pos_];
    if (c == '(' || c == '[') {
      const char close = c == '(' ? ')' : ']';
      if (c == '[' && (c_->bracket_ >= 0 || in_bracket_)) {
        return Bad("only one [...] group is supported");
      }
      ++pos_;
      in_bracket_ |= c == '[';
      Result<int> inner = Expr();
      if (c == '[') in_bracket_ = false;
      if (!inner.ok()) return inner;
      if (!Peek(close)) return Bad(std::string("'") + close + "' is missing");
      ++pos_;
      if (Peek('*')) return Bad("counts (*N) are not supported by Hachi");
      if (c == '(') return inner;
      // The alternatives of a matching or: the top-level '|' terms.
      Constraint::Op op;
      op.kind = Constraint::Op::kBracket;
      if (c_->ops_[*inner].kind == Constraint::Op::kOr) {
        op.kids = c_->ops_[*inner].kids;
      } else {
        op.kids.push_back(*inner);
      }
      const int at = Add(std::move(op));
      c_->bracket_ = at;
      return at;
    }
    const size_t start = pos_;
    while (pos_ < s_.size() && FeatureChar(s_[pos_])) ++pos_;
    if (pos_ == start) return Bad("a feature name is missing");
    if (Peek('*')) return Bad("counts (*N) are not supported by Hachi");
    Constraint::Op op;
    op.kind = Constraint::Op::kName;
    op.name = std::string(s_.substr(start, pos_ - start));
    return Add(std::move(op));
  }

  std::string_view s_;
  Constraint* c_;
  size_t pos_ = 0;
  int depth_ = 0;
  bool in_bracket_ = false;
};

Result<Constraint> Constraint::Parse(std::string_view text) {
  Constraint c;
  c.text_ = std::string(text);
  if (text.empty()) return c;
  for (char ch : text) {
    if (ch == ' ' || ch == '\t') {
      return InvalidArgument("invalid constraint '" + std::string(text) +
                             "': no spaces (use names joined by & and |)");
    }
  }
  ConstraintParser p(text, &c);
  HACHI_RETURN_IF_ERROR(p.Run());
  return c;
}

std::vector<std::string> Constraint::Names() const {
  std::vector<std::string> out;
  for (const Op& op : ops_) {
    if (op.kind == Op::kName && std::find(out.begin(), out.end(), op.name) == out.end()) {
      out.push_back(op.name);
    }
  }
  return out;
}

bool Constraint::Matches(const std::vector<std::string>& features, int choice) const {
  if (ops_.empty()) return true;
  return Eval(static_cast<int>(ops_.size()) - 1, features, choice);
}

bool Constraint::Eval(int at, const std::vector<std::string>& features,
                      int choice) const {
  const Op& op = ops_[at];
  switch (op.kind) {
    case Op::kName:
      return std::binary_search(features.begin(), features.end(), op.name);
    case Op::kAnd:
      for (int k : op.kids) {
        if (!Eval(k, features, choice)) return false;
      }
      return true;
    case Op::kBracket:
      if (choice >= 0) {
        return choice < static_cast<int>(op.kids.size()) &&
               Eval(op.kids[choice], features, choice);
      }
      [[fallthrough]];
    case Op::kOr:
      for (int k : op.kids) {
        if (Eval(k, features, choice)) return true;
      }
      return false;
  }
  return false;
}

// ---- Node lists ----

namespace {

Result<std::vector<int>> ResolveHosts(const ClusterState& state, std::string_view text,
                                      std::string_view what) {
  std::vector<int> out;
  if (text.empty()) return out;
  Result<std::vector<std::string>> names = ExpandHostList(text);
  if (!names.ok()) {
    return InvalidArgument(std::string(what) + ": " + names.status().message());
  }
  for (const std::string& name : *names) {
    int found = -1;
    for (size_t i = 0; i < state.nodes.size(); ++i) {
      if (state.nodes[i].name == name) {
        found = static_cast<int>(i);
        break;
      }
    }
    if (found < 0) {
      return InvalidArgument("Invalid node name specified: " + std::string(what) +
                             " names node '" + name +
                             "', which the cluster does not have");
    }
    out.push_back(found);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

Result<NodeSelection> ResolveSelection(const ClusterState& state, const JobRequest& req) {
  NodeSelection sel;
  Result<Constraint> c = Constraint::Parse(req.constraint);
  if (!c.ok()) return c.status();
  sel.constraint = std::move(*c);
  Result<std::vector<int>> req_nodes = ResolveHosts(state, req.nodelist, "--nodelist");
  if (!req_nodes.ok()) return req_nodes.status();
  sel.required = std::move(*req_nodes);
  Result<std::vector<int>> ex = ResolveHosts(state, req.exclude, "--exclude");
  if (!ex.ok()) return ex.status();
  sel.excluded = std::move(*ex);
  return sel;
}

bool SelectionAllows(const ClusterState& state, const NodeSelection& sel, int nodes,
                     int node, int choice) {
  if (std::binary_search(sel.excluded.begin(), sel.excluded.end(), node)) return false;
  if (!sel.required.empty() && static_cast<int>(sel.required.size()) >= nodes &&
      !std::binary_search(sel.required.begin(), sel.required.end(), node)) {
    return false;
  }
  if (sel.constraint.empty()) return true;
  return sel.constraint.Matches(NodeFeatures(state.nodes[node]), choice);
}

}  // namespace hachi::sched
