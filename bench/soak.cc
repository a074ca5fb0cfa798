// hachi_soak: the soak test's client (docs/soak.md; scripts/soak.sh starts
// the server and samples its memory). Against a running server, C client threads, each
// with its own api::HttpClient, submit N short jobs in bursts (B POSTs back to back,
// then a random pause), mixing 1, 2, 4 and 8 GPUs and a few small arrays. Each job is a
// real process that writes who and when it ran, by its own clock, to OUT/jobs/ID.out:
//
//   ID NODE CUDA_VISIBLE_DEVICES START_NS
//   END_NS
//
// The agents append to output files, so a job that ran twice leaves two pairs. Once
// every job is final (or --timeout-s passes), the checks, each counted with the first
// offending ids: every submitted id exists and ended COMPLETED with no requeue; its
// file holds exactly one pair; the node and GPUs it printed are its allocation; no two
// jobs whose own run intervals overlap shared a GPU of a node. Then the figures: submit
// latency per POST, waits, throughput, GPU busy time. Exit 0: all checks pass; 1: one
// failed or the run timed out; 2: bad flags or no server.
//
// While it runs, OUT/progress holds one line "PHASE ELAPSED_S SUBMITTED DONE", rewritten
// each second (DONE: jobs whose output file is complete), so a sampler can tell how far
// the run is; the phases are submit, drain, drained (all final, before the big GET
// /jobs?all=1 of the checks), verify and end.
//
// Single-threaded apart from the client threads, which share only atomics and a
// mutex-guarded list of new ids.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "api/http_client.h"
#include "api/protocol.h"
#include "api/protocol_json.h"
#include "api/record_json_nlohmann.h"
#include "core/gpu_set.h"
#include "state/records.h"

extern char** environ;

namespace hachi::soak {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string server;
  std::string out;
  int jobs = 2000;
  int clients = 16;
  int burst = 20;     // POSTs back to back
  int pause_ms = 50;  // then a pause of 0..pause_ms
  int array_pct = 2;  // % of POSTs that are arrays of 2-5 tasks
  int time_limit_s = 300;
  int timeout_s = 1200;  // submit to all final
  int seed = 1;
};

int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Nearest-rank percentile of sorted values; 0 for none.
template <typename T>
T Pct(const std::vector<T>& sorted, double p) {
  if (sorted.empty()) return T{};
  size_t rank =
      static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size()) + 0.999999);
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

std::string ReadSmall(const std::string& path) {
  std::string text;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return text;
}

// A submitted job as the client saw it.
struct Submitted {
  int64_t id = 0;
  int gpus = 0;
  int64_t post_ns = 0;  // wall clock when its POST was sent
};

// What the client threads share.
struct Shared {
  std::atomic<int64_t> unclaimed{0};  // jobs not yet given to a POST
  std::atomic<int64_t> submitted{0};
  std::atomic<int> clients_left{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<Submitted> fresh;  // guarded by mu: ids the monitor has not taken yet
};

struct ClientResult {
  std::vector<Submitted> jobs;
  std::vector<std::pair<int64_t, double>> posts;  // (wall ns at send, ms)
  int64_t failed_posts = 0;
  int64_t failed_jobs = 0;          // tasks those POSTs carried
  std::vector<std::string> errors;  // the first few
};

// Takes up to `want` jobs from the budget; how many it got (0: none left).
int64_t Claim(std::atomic<int64_t>& unclaimed, int64_t want) {
  int64_t have = unclaimed.load();
  for (;;) {
    const int64_t take = std::min(have, want);
    if (take <= 0) return 0;
    if (unclaimed.compare_exchange_weak(have, have - take)) return take;
  }
}

api::SubmitRequest BaseRequest(const Options& o) {
  api::SubmitRequest r;
  r.req.time_limit = o.time_limit_s;
  r.spec.name = "soak";
  r.spec.workdir = o.out;
  // As `hachi submit -o OUT/jobs/%j.out` fills it: the path as given, patterns expanded
  // by the agent, and the submitter's environment (job_cmds.cc BuildRequest).
  r.spec.stdout_path = o.out + "/jobs/%j.out";
  // Appended, so that a second run of a job would show as a second pair (the default
  // truncates, as Slurm's).
  r.spec.open_append = true;
  state::EnvList env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  r.spec.set_env(std::move(env));
  return r;
}

void Client(const Options& o, int index, Shared* sh, ClientResult* res) {
  struct Done {
    Shared* sh;
    ~Done() { sh->clients_left.fetch_sub(1); }
  } done{sh};
  Result<std::unique_ptr<api::HttpClient>> http = api::HttpClient::Create(o.server);
  if (!http.ok()) {
    res->errors.push_back(http.status().message());
    return;
  }
  // Over TCP the server believes a token only (docs/api.md "Authentication"); on a
  // unix: address the kernel's word.
  if (const char* token = std::getenv("HACHI_TOKEN");
      token != nullptr && *token != '\0') {
    (*http)->SetHeader("Authorization", std::string("Bearer ") + token);
  }
  std::mt19937 rng(static_cast<unsigned>(o.seed) * 7919u + static_cast<unsigned>(index));
  auto uniform = [&rng](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  api::SubmitRequest r = BaseRequest(o);
  const std::string path = std::string(api::kApiPrefix) + "/jobs";
  while (!sh->stop.load()) {
    for (int b = 0; b < o.burst; ++b) {
      const int64_t tasks =
          Claim(sh->unclaimed, uniform(1, 100) <= o.array_pct ? uniform(2, 5) : 1);
      if (tasks == 0) return;
      // 1 GPU: 40%, 2: 30%, 4: 20%, 8: 10% of POSTs.
      const int roll = uniform(1, 10);
      r.req.gpus = roll <= 4 ? 1 : roll <= 7 ? 2 : roll <= 9 ? 4 : 8;
      r.spec.set_argv(
          {"sh", "-c",
           "echo $HACHI_JOB_ID $HACHI_NODENAME $CUDA_VISIBLE_DEVICES $(date +%s%N); "
           "sleep 0.0" +
               std::to_string(uniform(1, 9)) + "; date +%s%N"});
      r.array_tasks.clear();
      for (int t = 1; tasks > 1 && t <= tasks; ++t) r.array_tasks.push_back(t);
      const std::string body = api::SubmitRequestToJson(r);
      const int64_t post_ns = WallNs();
      const auto t0 = Clock::now();
      Result<std::string> reply = (*http)->Call("POST", path, body);
      res->posts.emplace_back(post_ns, SecondsSince(t0) * 1e3);
      json ids = reply.ok() ? json::parse(*reply, nullptr, false) : json();
      if (!reply.ok() || !ids.is_object() || !ids["job_ids"].is_array() ||
          static_cast<int64_t>(ids["job_ids"].size()) != tasks) {
        ++res->failed_posts;
        res->failed_jobs += tasks;
        if (res->errors.size() < 5) {
          res->errors.push_back(reply.ok() ? "unexpected reply: " + reply->substr(0, 200)
                                           : reply.status().message());
        }
        continue;
      }
      std::vector<Submitted> got;
      for (const json& id : ids["job_ids"])
        got.push_back({id.get<int64_t>(), r.req.gpus, post_ns});
      res->jobs.insert(res->jobs.end(), got.begin(), got.end());
      sh->submitted.fetch_add(static_cast<int64_t>(got.size()));
      std::lock_guard<std::mutex> lock(sh->mu);
      sh->fresh.insert(sh->fresh.end(), got.begin(), got.end());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(uniform(0, o.pause_ms)));
  }
}

void WriteProgress(const Options& o, const char* phase, double elapsed, int64_t submitted,
                   int64_t done) {
  const std::string tmp = o.out + "/progress.tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << phase << " " << static_cast<int64_t>(elapsed) << " " << submitted << " " << done
      << "\n";
  }
  std::rename(tmp.c_str(), (o.out + "/progress").c_str());
}

// What the monitor saw while waiting.
struct WaitResult {
  bool all_final = false;
  double wall_s = 0;          // first POST to all final seen by the server
  double submit_s = 0;        // first POST to the last POST's reply
  int64_t max_in_flight = 0;  // submitted minus complete output files
  int server_polls = 0;
  std::vector<double> poll_ms;  // GET /jobs (active only)
  int64_t last_active = -1;
};

// Waits until every job is final: output files tell progress cheaply each second;
// the server is asked (GET /jobs, pending and running only) once the files say nearly
// everything finished, or when they stop moving (a job that failed writes no end line).
WaitResult WaitAllFinal(const Options& o, Shared* sh, api::HttpClient* http,
                        Clock::time_point start) {
  WaitResult w;
  std::vector<Submitted> watch;
  int64_t done = 0, last_done = -1;
  auto last_move = Clock::now();
  auto last_poll = Clock::now();
  bool submits_over = false;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    {
      std::lock_guard<std::mutex> lock(sh->mu);
      watch.insert(watch.end(), sh->fresh.begin(), sh->fresh.end());
      sh->fresh.clear();
    }
    std::erase_if(watch, [&](const Submitted& s) {
      const std::string path = o.out + "/jobs/" + std::to_string(s.id) + ".out";
      struct stat st;
      if (::stat(path.c_str(), &st) != 0 || st.st_size == 0) return false;
      const std::string text = ReadSmall(path);
      if (std::count(text.begin(), text.end(), '\n') < 2) return false;
      ++done;
      return true;
    });
    const int64_t submitted = sh->submitted.load();
    if (!submits_over && sh->clients_left.load() == 0) {
      submits_over = true;
      w.submit_s = SecondsSince(start);
    }
    if (done != last_done) last_move = Clock::now();
    last_done = done;
    w.max_in_flight = std::max(w.max_in_flight, submitted - done);
    const double elapsed = SecondsSince(start);
    WriteProgress(o, submits_over ? "drain" : "submit", elapsed, submitted, done);
    if (elapsed > o.timeout_s) {
      sh->stop = true;
      w.wall_s = elapsed;
      return w;
    }
    // A GET /jobs builds its whole reply in memory on the server, and the freed memory
    // stays in its RSS: ask only when few jobs are left, or the files stopped moving.
    const bool few = watch.size() <= 20;
    if (!submits_over ||
        (!few && (SecondsSince(last_move) < 10 || SecondsSince(last_poll) < 10))) {
      continue;
    }
    const auto t0 = Clock::now();
    last_poll = t0;
    Result<std::string> body =
        http->Call("GET", std::string(api::kApiPrefix) + "/jobs", "", 120000);
    w.poll_ms.push_back(SecondsSince(t0) * 1e3);
    ++w.server_polls;
    if (!body.ok()) continue;
    json j = json::parse(*body, nullptr, false);
    if (j.is_discarded() || !j["jobs"].is_array()) continue;
    w.last_active = static_cast<int64_t>(j["jobs"].size());
    if (w.last_active == 0) {
      w.all_final = true;
      w.wall_s = SecondsSince(start);
      WriteProgress(o, "drained", w.wall_s, submitted, done);
      return w;
    }
  }
}

// The checks' bookkeeping: a count and the first few cases.
struct Check {
  explicit Check(const char* n) : name(n) {}
  const char* name;
  int64_t failures = 0;
  std::vector<std::string> first;
  void Fail(int64_t id, const std::string& what) {
    ++failures;
    if (first.size() < 5) first.push_back(std::to_string(id) + ": " + what);
  }
};

std::string OneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', '|');
  return s.size() > 160 ? s.substr(0, 160) + "..." : s;
}

std::string Fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c, d);
  return buf;
}

int Run(const Options& o) {
  ::mkdir(o.out.c_str(), 0755);
  ::mkdir((o.out + "/jobs").c_str(), 0755);
  Result<std::unique_ptr<api::HttpClient>> http =
      api::HttpClient::Create(o.server, 300000);
  if (!http.ok()) {
    std::fprintf(stderr, "hachi_soak: %s\n", http.status().message().c_str());
    return 2;
  }
  Result<std::string> nodes_body =
      (*http)->Call("GET", std::string(api::kApiPrefix) + "/nodes");
  const json nodes_json = nodes_body.ok() ? json::parse(*nodes_body, nullptr, false)
                                          : json(json::value_t::discarded);
  if (!nodes_json.is_object() || !nodes_json.contains("nodes") ||
      !nodes_json["nodes"].is_array()) {
    std::fprintf(
        stderr, "hachi_soak: GET /nodes: %s\n",
        nodes_body.ok() ? "not a node list" : nodes_body.status().message().c_str());
    return 2;
  }
  int nodes = 0, gpus_total = 0;
  for (const json& n : nodes_json["nodes"]) {
    state::NodeStatus node;
    if (!api::FromJson(n, &node).ok() || node.record.state != state::NodeState::kUp)
      continue;
    ++nodes;
    gpus_total += node.gpus;
  }
  const size_t env_bytes = [&] {
    size_t b = 0;
    for (const auto& [k, v] : BaseRequest(o).spec.env()) b += k.size() + v.size() + 2;
    return b;
  }();
  std::printf(
      "hachi_soak: %lld jobs, %d clients, bursts of %d, pause 0-%d ms, %d%% arrays; "
      "%d nodes up, %d GPUs; job env %zu bytes\n",
      static_cast<long long>(o.jobs), o.clients, o.burst, o.pause_ms, o.array_pct, nodes,
      gpus_total, env_bytes);
  std::fflush(stdout);

  Shared sh;
  sh.unclaimed = o.jobs;
  sh.clients_left = o.clients;
  std::vector<ClientResult> results(static_cast<size_t>(o.clients));
  const auto start = Clock::now();
  const int64_t start_ns = WallNs();
  std::vector<std::thread> threads;
  for (int i = 0; i < o.clients; ++i) {
    threads.emplace_back(Client, std::cref(o), i, &sh, &results[static_cast<size_t>(i)]);
  }
  WaitResult w = WaitAllFinal(o, &sh, http->get(), start);
  for (std::thread& t : threads) t.join();

  std::vector<Submitted> jobs;
  std::vector<std::pair<int64_t, double>> posts;
  int64_t failed_posts = 0, failed_jobs = 0;
  std::vector<std::string> post_errors;
  for (ClientResult& r : results) {
    jobs.insert(jobs.end(), r.jobs.begin(), r.jobs.end());
    posts.insert(posts.end(), r.posts.begin(), r.posts.end());
    failed_posts += r.failed_posts;
    failed_jobs += r.failed_jobs;
    for (const std::string& e : r.errors) {
      if (post_errors.size() < 5) post_errors.push_back(e);
    }
  }
  std::sort(jobs.begin(), jobs.end(),
            [](const Submitted& a, const Submitted& b) { return a.id < b.id; });

  // Give a once-a-second sampler a look at the drained server before the big read.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  WriteProgress(o, "verify", SecondsSince(start), sh.submitted.load(),
                sh.submitted.load());
  const auto t_all = Clock::now();
  // Page by page (GET /jobs?limit=&after=), as the CLI reads them: one reply of 50,000
  // jobs would be ~125 MB of JSON built in the server's memory at once.
  std::map<int64_t, state::JobRecord> finals;
  size_t all_bytes = 0;
  for (int64_t after = 0;;) {
    Result<std::string> page =
        (*http)->Call("GET",
                      std::string(api::kApiPrefix) +
                          "/jobs?all=1&limit=5000&after=" + std::to_string(after),
                      "", w.all_final ? 120000 : 30000);
    if (!page.ok()) {
      std::fprintf(stderr, "hachi_soak: GET /jobs?all=1: %s\n",
                   page.status().message().c_str());
      return 1;
    }
    all_bytes += page->size();
    json j = json::parse(*page, nullptr, false);
    if (!j.is_object() || !j.contains("jobs") || !j["jobs"].is_array()) {
      std::fprintf(stderr, "hachi_soak: GET /jobs?all=1: not a job list\n");
      return 1;
    }
    for (const json& job : j["jobs"]) {
      state::JobRecord rec;
      if (Status st = api::FromJson(job, &rec); !st.ok()) {
        std::fprintf(stderr, "hachi_soak: GET /jobs?all=1: %s\n", st.message().c_str());
        return 1;
      }
      rec.spec = state::JobSpec();  // what the checks do not read
      finals[rec.id] = std::move(rec);
    }
    if (!j.contains("next_after") || !j["next_after"].is_number_integer()) break;
    after = j["next_after"].get<int64_t>();
  }
  const double all_s = SecondsSince(t_all);

  Check exists{"exists"}, completed{"COMPLETED once, no requeue"},
      output{"one output pair"}, placement{"output = allocation"},
      overlap{"no GPU shared"};
  struct RunSpan {
    std::string node;
    int gpu;
    int64_t start, end, id;
  };
  std::vector<RunSpan> spans;
  std::vector<int64_t> wait_s;    // server: start_time - submit_time, seconds
  std::vector<int64_t> start_ms;  // jobs' clocks: own start - POST sent, ms
  std::map<int, std::vector<int64_t>> wait_by_gpus;
  int64_t first_start = INT64_MAX, last_end = 0;
  double gpu_busy_s = 0;
  for (const Submitted& s : jobs) {
    auto it = finals.find(s.id);
    if (it == finals.end()) {
      exists.Fail(s.id, "acknowledged, not in GET /jobs?all=1");
      continue;
    }
    const state::JobRecord& f = it->second;
    const std::string state_name(state::JobStateName(f.state));
    if (f.state != state::JobState::kCompleted || f.requeues != 0) {
      completed.Fail(s.id, state_name + " requeues " + std::to_string(f.requeues) +
                               " exit " + std::to_string(f.exit_code) + " reason '" +
                               f.reason + "'");
    }
    if (f.start_time > 0) {
      wait_s.push_back(f.start_time - f.submit_time);
      wait_by_gpus[s.gpus].push_back(f.start_time - f.submit_time);
    }
    const std::string text = ReadSmall(o.out + "/jobs/" + std::to_string(s.id) + ".out");
    std::istringstream in(text);
    std::string id, node, cvd;
    int64_t t_start = 0, t_end = 0;
    const long lines = std::count(text.begin(), text.end(), '\n');
    if (!(in >> id >> node >> cvd >> t_start >> t_end) || lines != 2 ||
        id != std::to_string(s.id) || t_end < t_start) {
      output.Fail(s.id, "'" + OneLine(text) + "' (" + state_name + ")");
      continue;
    }
    Result<GpuSet> seen = GpuSet::Parse(cvd);  // CUDA_VISIBLE_DEVICES: "0,1,2,3"
    const bool one = f.allocations.size() == 1;
    if (!one || node != f.allocations[0].node || !seen.ok() ||
        *seen != f.allocations[0].gpus || seen->size() != s.gpus) {
      placement.Fail(
          s.id, "printed " + node + " " + cvd + ", allocated " +
                    (one ? f.allocations[0].node + " " + f.allocations[0].gpus.ToString()
                         : std::to_string(f.allocations.size()) + " allocations") +
                    ", asked " + std::to_string(s.gpus));
    }
    if (seen.ok()) {
      for (int g = 0; g < GpuSet::kMaxGpus; ++g) {
        if (seen->contains(g)) spans.push_back({node, g, t_start, t_end, s.id});
      }
      gpu_busy_s +=
          static_cast<double>(seen->size()) * static_cast<double>(t_end - t_start) / 1e9;
    }
    start_ms.push_back((t_start - s.post_ns) / 1000000);
    first_start = std::min(first_start, t_start);
    last_end = std::max(last_end, t_end);
  }
  // Per node and GPU, by start: a run that starts before the latest end so far overlaps.
  std::sort(spans.begin(), spans.end(), [](const RunSpan& a, const RunSpan& b) {
    return std::tie(a.node, a.gpu, a.start) < std::tie(b.node, b.gpu, b.start);
  });
  for (size_t i = 1, holder = 0; i < spans.size(); ++i) {
    const RunSpan& a = spans[holder];
    const RunSpan& b = spans[i];
    if (a.node != b.node || a.gpu != b.gpu) {
      holder = i;
      continue;
    }
    if (b.start < a.end) {
      overlap.Fail(b.id, "GPU " + std::to_string(b.gpu) + " of " + b.node +
                             " while job " + std::to_string(a.id) + " held it (" +
                             std::to_string((a.end - b.start) / 1000) + " us overlap)");
    }
    if (b.end > a.end) holder = i;
  }
  WriteProgress(o, "end", SecondsSince(start), sh.submitted.load(), sh.submitted.load());

  // Submit latency by tenth of the POSTs in the order they were sent: does a submit slow
  // down as the server's history grows?
  std::sort(posts.begin(), posts.end());
  std::vector<double> post_ms;
  json tenths = json::array();
  std::string tenths_text;
  for (size_t k = 0; k < 10 && !posts.empty(); ++k) {
    std::vector<double> part;
    for (size_t i = k * posts.size() / 10; i < (k + 1) * posts.size() / 10; ++i) {
      part.push_back(posts[i].second);
    }
    std::sort(part.begin(), part.end());
    tenths.push_back({{"p50", Pct(part, 50)}, {"p99", Pct(part, 99)}});
    tenths_text += Fmt(" %.0f/%.0f", Pct(part, 50), Pct(part, 99));
  }
  for (const auto& [at, ms] : posts) post_ms.push_back(ms);
  std::sort(post_ms.begin(), post_ms.end());
  std::sort(wait_s.begin(), wait_s.end());
  std::sort(start_ms.begin(), start_ms.end());
  const int64_t n = static_cast<int64_t>(jobs.size());
  const double span_s =
      last_end > first_start ? static_cast<double>(last_end - start_ns) / 1e9 : 0;
  std::printf(
      "\nsubmitted %lld jobs in %zu POSTs over %.1f s (%.0f jobs/s); failed POSTs %lld "
      "(%lld jobs)\n",
      static_cast<long long>(n), post_ms.size(), w.submit_s,
      w.submit_s > 0 ? static_cast<double>(n) / w.submit_s : 0.0,
      static_cast<long long>(failed_posts), static_cast<long long>(failed_jobs));
  for (const std::string& e : post_errors) std::printf("  POST error: %s\n", e.c_str());
  std::printf("%s\n",
              Fmt("submit latency per POST: p50 %.1f ms, p95 %.1f, p99 %.1f, max %.1f",
                  Pct(post_ms, 50), Pct(post_ms, 95), Pct(post_ms, 99),
                  post_ms.empty() ? 0 : post_ms.back())
                  .c_str());
  std::printf("  p50/p99 ms by tenth of the POSTs, in order:%s\n", tenths_text.c_str());
  std::printf(
      "all final: %s after %.1f s = %.1f jobs/s (first POST to the server's empty "
      "queue); "
      "by the jobs' clocks the last ended %.1f s after the first POST\n",
      w.all_final ? "yes" : "NO (timed out)", w.wall_s,
      w.wall_s > 0 ? static_cast<double>(n) / w.wall_s : 0.0, span_s);
  std::printf(
      "most jobs in flight (submitted, output incomplete): %lld; GET /jobs polls %d "
      "(last %.0f ms); GET /jobs?all=1: %.1f MB in %.2f s\n",
      static_cast<long long>(w.max_in_flight), w.server_polls,
      w.poll_ms.empty() ? 0.0 : w.poll_ms.back(), static_cast<double>(all_bytes) / 1e6,
      all_s);
  std::printf(
      "%s\n",
      Fmt("wait (server: start_time - submit_time, whole seconds): p50 %.0f s, "
          "p95 %.0f, max %.0f",
          static_cast<double>(Pct(wait_s, 50)), static_cast<double>(Pct(wait_s, 95)),
          wait_s.empty() ? 0.0 : static_cast<double>(wait_s.back()))
          .c_str());
  for (auto& [g, v] : wait_by_gpus) {
    std::sort(v.begin(), v.end());
    std::printf("  %d GPU(s): %zu jobs, wait p50 %lld s, p95 %lld, max %lld\n", g,
                v.size(), static_cast<long long>(Pct(v, 50)),
                static_cast<long long>(Pct(v, 95)), static_cast<long long>(v.back()));
  }
  std::printf(
      "%s\n",
      Fmt("POST to the job's own first line (ms): p50 %.0f, p95 %.0f, max %.0f",
          static_cast<double>(Pct(start_ms, 50)), static_cast<double>(Pct(start_ms, 95)),
          start_ms.empty() ? 0.0 : static_cast<double>(start_ms.back()))
          .c_str());
  if (span_s > 0 && gpus_total > 0) {
    std::printf(
        "GPU time inside the jobs: %.0f GPU-s of %.0f (%d GPUs x %.1f s) = %.1f%%\n",
        gpu_busy_s, gpus_total * span_s, gpus_total, span_s,
        100.0 * gpu_busy_s / (gpus_total * span_s));
  }
  bool ok = w.all_final && failed_posts == 0;
  std::printf("\nchecks (%lld jobs):\n", static_cast<long long>(n));
  json checks = json::object();
  for (const Check* c : {&exists, &completed, &output, &placement, &overlap}) {
    std::printf("  %-28s %s (%lld)\n", c->name, c->failures == 0 ? "ok" : "FAILED",
                static_cast<long long>(c->failures));
    for (const std::string& f : c->first) std::printf("    %s\n", f.c_str());
    checks[c->name] = {{"failures", c->failures}, {"first", c->first}};
    ok = ok && c->failures == 0;
  }
  if (!w.all_final)
    std::printf("  all final: FAILED (%lld still active)\n",
                static_cast<long long>(w.last_active));
  std::ofstream(o.out + "/summary.json")
      << json{{"jobs", n},
              {"posts", post_ms.size()},
              {"failed_posts", failed_posts},
              {"post_errors", post_errors},
              {"submit_s", w.submit_s},
              {"wall_s", w.wall_s},
              {"all_final", w.all_final},
              {"post_ms",
               {{"p50", Pct(post_ms, 50)},
                {"p95", Pct(post_ms, 95)},
                {"p99", Pct(post_ms, 99)},
                {"max", post_ms.empty() ? 0 : post_ms.back()},
                {"by_tenth", tenths}}},
              {"wait_s",
               {{"p50", Pct(wait_s, 50)},
                {"p95", Pct(wait_s, 95)},
                {"max", wait_s.empty() ? 0 : wait_s.back()}}},
              {"post_to_start_ms",
               {{"p50", Pct(start_ms, 50)},
                {"p95", Pct(start_ms, 95)},
                {"max", start_ms.empty() ? 0 : start_ms.back()}}},
              {"max_in_flight", w.max_in_flight},
              {"get_all_bytes", all_bytes},
              {"get_all_s", all_s},
              {"gpu_busy_fraction",
               span_s > 0 && gpus_total > 0 ? gpu_busy_s / (gpus_total * span_s) : 0},
              {"checks", checks},
              {"ok", ok}}
             .dump(2)
      << "\n";
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int Usage() {
  std::fprintf(stderr,
               "usage: hachi_soak --server URL --out /ABS/DIR [--jobs N] [--clients C] "
               "[--burst B]\n  [--pause-ms MS] [--array-pct P] [--time-limit-s S] "
               "[--timeout-s T] [--seed S]\n");
  return 2;
}

bool ParseFlags(int argc, char** argv, Options* o) {
  const std::map<std::string, std::string*> text{{"--server", &o->server},
                                                 {"--out", &o->out}};
  const std::map<std::string, int*> number{
      {"--jobs", &o->jobs},           {"--clients", &o->clients},
      {"--burst", &o->burst},         {"--pause-ms", &o->pause_ms},
      {"--array-pct", &o->array_pct}, {"--time-limit-s", &o->time_limit_s},
      {"--timeout-s", &o->timeout_s}, {"--seed", &o->seed}};
  if (argc % 2 == 0) return false;  // every flag takes a value
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (auto t = text.find(flag); t != text.end()) {
      *t->second = argv[i + 1];
      continue;
    }
    char* end = nullptr;
    const long v = std::strtol(argv[i + 1], &end, 10);
    auto n = number.find(flag);
    if (n == number.end() || *end != '\0' || v < 0 || v > 1'000'000'000) return false;
    *n->second = static_cast<int>(v);
  }
  return !o->server.empty() && !o->out.empty() && o->out[0] == '/' && o->jobs >= 1 &&
         o->clients >= 1 && o->burst >= 1;
}

}  // namespace
}  // namespace hachi::soak

int main(int argc, char** argv) {
  hachi::soak::Options o;
  if (!hachi::soak::ParseFlags(argc, argv, &o)) return hachi::soak::Usage();
  return hachi::soak::Run(o);
}
