// The dashboard's routes (server/web.h) on a real HttpServer: the embedded files, their
// cache headers, unknown and traversing paths, the history and the log tail.
#include "server/web.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/testing/paths.h"
#include "server/history.h"
#include "server/http_api.h"
#include "server/testing.h"
#include "topo/topology_testing.h"

namespace hachi::server {
namespace {

using nlohmann::json;

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(WebAssetsTest, EveryWebFileIsEmbeddedAsIs) {
  int seen = 0;
  for (const auto& e : std::filesystem::directory_iterator(SourceDir() + "/web")) {
    const std::string name = e.path().filename().string();
    const std::string ext = e.path().extension().string();
    if (ext == ".md" || ext == ".txt") continue;
    SCOPED_TRACE(name);
    const WebAsset* a = FindWebAsset(name);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->body, ReadFile(e.path()));
    EXPECT_EQ(a->etag.size(), 18u) << "16 hex digits, quoted";
    ++seen;
  }
  EXPECT_GE(seen, 5);
  EXPECT_EQ(FindWebAsset("index.html")->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(FindWebAsset("app.js")->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(FindWebAsset("style.css")->content_type, "text/css; charset=utf-8");
  for (const char* bad :
       {"", "../CMakeLists.txt", "/index.html", "./app.js", "APP.JS", "web"}) {
    EXPECT_EQ(FindWebAsset(bad), nullptr) << bad;
  }
}

class WebRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // "far" only: its logs are on another machine. LogTailOfALocalJobOnly adds "n1".
    controller_ = testing::RunningController("far", /*start=*/false);
    ASSERT_TRUE(controller_ != nullptr);
    history_ =
        std::make_unique<HistorySampler>(controller_.get(), HistorySampler::Options{});
    HttpOptions h;
    h.listen = "127.0.0.1:0";
    h.threads = 4;
    h.dashboard.history = history_.get();
    h.dashboard.local_nodes = {"n1"};
    http_ = std::make_unique<HttpServer>(controller_.get(), h);
    ASSERT_TRUE(http_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", http_->port());
  }
  void TearDown() override {
    client_.reset();
    if (controller_) controller_->Stop();
    if (http_) http_->Stop();
  }

  // Submits a job of `gpus` GPUs as this process's user and runs a cycle.
  state::JobId RunJob(int gpus, const std::string& workdir) {
    SubmitRequest r = testing::MakeSubmit().Gpus(gpus);
    r.spec.workdir = workdir;
    r.spec.stdout_path = "out-%j.txt";
    Result<std::vector<state::JobId>> ids =
        controller_->jobs().Submit(r, Caller{"me", ::getuid(), ::getgid(), true, false});
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    controller_->RunCycle();
    return ids.ok() ? ids->front() : 0;
  }

  topo::TempDir dir_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<HistorySampler> history_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(WebRoutesTest, ServesTheDashboardWithCacheHeaders) {
  httplib::Result root = client_->Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 200);
  EXPECT_EQ(root->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(root->body, FindWebAsset("index.html")->body);
  const std::string etag = root->get_header_value("ETag");
  EXPECT_EQ(etag, FindWebAsset("index.html")->etag);
  EXPECT_EQ(root->get_header_value("Cache-Control"), "no-cache");
  EXPECT_EQ(root->get_header_value("X-Frame-Options"), "DENY");
  EXPECT_EQ(root->get_header_value("Content-Security-Policy"), "frame-ancestors 'none'");

  httplib::Result again = client_->Get("/", {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());

  httplib::Result js = client_->Get("/web/app.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(js->get_header_value("X-Content-Type-Options"), "nosniff");
}

TEST_F(WebRoutesTest, UnknownAndTraversingPathsAre404) {
  for (const char* path :
       {"/web/nope.js", "/web/", "/web/../CMakeLists.txt", "/web/%2e%2e/CMakeLists.txt",
        "/web/..%2fCMakeLists.txt", "/web/sub/app.js", "/index.html"}) {
    SCOPED_TRACE(path);
    httplib::Result r = client_->Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404);
    EXPECT_EQ(r->body.find("<html"), std::string::npos);
  }
}

TEST_F(WebRoutesTest, HistoryReportsTheSamples) {
  history_->Sample(RealClock()->Now());
  httplib::Result r = client_->Get("/api/v1/history");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const json j = json::parse(r->body);
  EXPECT_EQ(j["interval_s"], 15);
  ASSERT_EQ(j["samples"].size(), 1u);
  EXPECT_EQ(j["samples"][0]["gpus_healthy"], 8);
  const Time at = j["samples"][0]["at"];
  r = client_->Get("/api/v1/history?since=" + std::to_string(at));
  ASSERT_TRUE(r);
  EXPECT_TRUE(json::parse(r->body)["samples"].empty());
}

TEST_F(WebRoutesTest, LogTailOfALocalJobOnly) {
  const state::JobId there = RunJob(8, dir_.path());  // fills "far"
  ASSERT_TRUE(controller_->nodes().Register(testing::MakeAgent("n1")).ok());
  const state::JobId here = RunJob(1, dir_.path());  // so this one runs on "n1"
  ASSERT_GT(here, 0);
  ASSERT_EQ(controller_->job_views().Job(there)->allocations.at(0).node, "far");
  ASSERT_EQ(controller_->job_views().Job(here)->allocations.at(0).node, "n1");
  const std::string id = std::to_string(here);
  std::ofstream(dir_.path() + "/out-" + id + ".txt") << "one\ntwo\nthree\n";

  // The log is its owner's and the admins': not an anonymous reader's, nor bob's.
  httplib::Result r = client_->Get("/api/v1/jobs/" + id + "/log");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401) << r->body;
  auto token = [&](const std::string& user, int64_t uid) {
    Result<IssuedToken> t =
        controller_->tokens().Issue({user, uid, uid, false}, testing::kRoot);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? "Bearer " + t->token : std::string();
  };
  r = client_->Get("/api/v1/jobs/" + id + "/log",
                   {{"Authorization", token("bob", 4242)}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403) << r->body;
  client_->set_default_headers({{"Authorization", token("me", ::getuid())}});

  r = client_->Get("/api/v1/jobs/" + id + "/log?tail=2");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["text"], "two\nthree\n");
  EXPECT_EQ(j["node"], "n1");
  EXPECT_EQ(j["path"], dir_.path() + "/out-" + id + ".txt");
  EXPECT_EQ(j["size"], 14);

  // Not UTF-8: still a JSON reply.
  std::ofstream(dir_.path() + "/out-" + id + ".txt", std::ios::app) << "\xff\xfe\n";
  r = client_->Get("/api/v1/jobs/" + id + "/log?tail=1&bytes=3");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["text"], "\xEF\xBF\xBD\xEF\xBF\xBD\n");

  r = client_->Get("/api/v1/jobs/" + std::to_string(there) + "/log");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(r->body.find("on node far"), std::string::npos) << r->body;

  r = client_->Get("/api/v1/jobs/999999/log");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
}

}  // namespace
}  // namespace hachi::server
