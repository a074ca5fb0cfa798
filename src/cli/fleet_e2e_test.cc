// Gangs across real "hosts": `hachi server` on one network namespace, two
// `hachi agent`s on two others (cli/fleet_testing.h), each with its own address and a
// private /tmp, the agents started without --address. A 2-node gang's rank 1 connects
// to MASTER_ADDR:MASTER_PORT and exchanges a message with rank 0: the test fails unless
// the message arrived, so a gang that cannot rendezvous does not pass. Two gangs at once
// on the same two nodes get different MASTER_PORTs and both meet. Needs root and
// iproute2; skipped otherwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "cli/cli_testing.h"
#include "cli/e2e_testing.h"
#include "cli/fleet_testing.h"
#include "core/testing/paths.h"
#include "core/testing/wait_for.h"

namespace hachi::cli {
namespace {

using nlohmann::json;
using testing::Fleet;
using testing::Hachi;
using testing::ReadFile;

// Rank 0 listens on MASTER_PORT (bound as torch's TCPStore binds it: all addresses),
// takes one connection and writes "MASTER_ADDR MASTER_PORT <message>" to DIR/<job>.got,
// then stays (its port held) until DIR/<release> exists. Rank 1 connects to
// MASTER_ADDR:MASTER_PORT, retrying while rank 0 starts, and sends the message; both
// wait for the other's side (an "ack"). Every wait bounded: 20 s.
constexpr char kRendezvous[] = R"py(import os, socket, sys, time
d, release = sys.argv[1], sys.argv[2]
job, rank = os.environ["HACHI_JOB_ID"], int(os.environ["NODE_RANK"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
end = time.time() + 20
if rank == 0:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(1)
    s.settimeout(20)
    c, _ = s.accept()
    c.settimeout(20)
    msg = c.recv(200).decode()
    c.sendall(b"ack")
    with open(f"{d}/{job}.tmp", "w") as f:
        f.write(f"{addr} {port} {msg}")
    os.rename(f"{d}/{job}.tmp", f"{d}/{job}.got")
    while not os.path.exists(f"{d}/{release}") and time.time() < end:
        time.sleep(0.05)
else:
    while True:
        try:
            c = socket.create_connection((addr, port), timeout=2)
            break
        except OSError:
            if time.time() > end:
                raise
            time.sleep(0.1)
    c.settimeout(20)
    c.sendall(f"hello from rank 1 of job {job} on {os.environ['HACHI_NODENAME']}".encode())
    if c.recv(10) != b"ack":
        sys.exit("no ack from rank 0")
)py";

class FleetE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Fleet::Possible()) GTEST_SKIP() << "needs root and `ip netns` with bridges";
    fleet_ = std::make_unique<Fleet>(3);
    ASSERT_TRUE(fleet_->ok()) << "could not build the fleet's namespaces";
    // Shared by every host (their /tmp is their own).
    char tmpl[] = "/var/tmp/hachi-fleet-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/rdv.py") << kRendezvous;
    hachi_ = Fleet::CopyForHosts(BinaryDir() + "/hachi", dir_);
    ASSERT_FALSE(hachi_.empty()) << "could not copy hachi into " << dir_;
    fleet_->Spawn(0,
                  hachi_ + " server --state-dir " + dir_ + "/state --listen " +
                      fleet_->address(0) + ":0",
                  dir_ + "/server.log");
    std::string url;
    ASSERT_TRUE(WaitFor(
        [&] {
          const std::string log = ReadFile(dir_ + "/server.log");
          const size_t at = log.find("listening on http://");
          if (at == std::string::npos) return false;
          url = log.substr(at + 13, log.find_first_of(" \n", at + 13) - (at + 13));
          port_ = url.substr(url.rfind(':') + 1);
          return true;
        },
        std::chrono::seconds(10)))
        << ReadFile(dir_ + "/server.log");
    // The CLI as root on the server's Unix socket (a file: reachable from any netns).
    ::setenv("HACHI_SERVER", ("unix:" + dir_ + "/state/hachi.sock").c_str(), 1);
    // The agents over TCP, without --address: the server must take the address each
    // connects from.
    for (int host = 1; host <= 2; ++host) {
      const std::string name = "h" + std::to_string(host);
      fleet_->Spawn(host,
                    hachi_ + " agent --server " + url + " --name " + name +
                        " --preset hgx-h100 --cgroup none --spool-dir /tmp/spool" +
                        " --cluster-secret-file " + dir_ + "/state/cluster-secret",
                    dir_ + "/agent-" + name + ".log");
    }
    ASSERT_TRUE(WaitFor(
        [&] {
          const std::string nodes = Hachi("nodes -o %n", false).out;
          return nodes.find("h1") != std::string::npos &&
                 nodes.find("h2") != std::string::npos;
        },
        std::chrono::seconds(15)))
        << ReadFile(dir_ + "/agent-h1.log") << ReadFile(dir_ + "/agent-h2.log");
    cwd_ = std::filesystem::current_path();
    std::filesystem::current_path(dir_);  // the jobs' workdir: on every host
  }
  void TearDown() override {
    if (!cwd_.empty()) std::filesystem::current_path(cwd_);
    fleet_.reset();  // stops the server and agents, deletes the namespaces
    ::unsetenv("HACHI_SERVER");
    if (!dir_.empty() && !HasFailure()) std::filesystem::remove_all(dir_);
  }

  // The fleet address of the host running node `name` ("h1" -> host 1).
  std::string AddressOf(const std::string& name) const {
    return fleet_->address(std::atoi(name.c_str() + 1));
  }
  int64_t SubmitGang(const std::string& release) {
    return std::atoll(Hachi("submit --parsable -N 2 --gpus-per-node 1 -t 2:00 -o " +
                                dir_ + "/%j.out -- /usr/bin/python3 " + dir_ +
                                "/rdv.py " + dir_ + " " + release,
                            false)
                          .out.c_str());
  }
  std::string Got(int64_t id) const {
    return ReadFile(dir_ + "/" + std::to_string(id) + ".got");
  }
  std::string Logs(int64_t id) const {
    return "job: " + ShownJob(id).dump() + "\nout:\n" +
           ReadFile(dir_ + "/" + std::to_string(id) + ".out") + "server:\n" +
           ReadFile(dir_ + "/server.log");
  }
  // The gang met: rank 0 got rank 1's message on MASTER_ADDR:MASTER_PORT, where
  // MASTER_ADDR is the rank-0 node's own fleet address and MASTER_PORT the one the
  // record holds. Returns the port.
  int ExpectMet(int64_t id) {
    const json job = ShownJob(id);
    EXPECT_EQ(job["allocations"].size(), 2u) << job.dump();
    if (job["allocations"].size() != 2u) return 0;
    const std::string rank0 = job["allocations"][0]["node"];
    const std::string rank1 = job["allocations"][1]["node"];
    const int port = job["master_port"];
    EXPECT_GE(port, 29500);
    EXPECT_EQ(Got(id), AddressOf(rank0) + " " + std::to_string(port) +
                           " hello from rank 1 of job " + std::to_string(id) + " on " +
                           rank1)
        << Logs(id);
    EXPECT_NE(AddressOf(rank0), "127.0.0.1");
    return port;
  }

  std::unique_ptr<Fleet> fleet_;
  std::string port_;  // the server's, on host 0
  std::string dir_;
  std::string hachi_;  // the binary the hosts run: a copy in dir_ (Fleet::CopyForHosts)
  std::string cwd_;
};

TEST_F(FleetE2e, AgentsWithoutAddressAreKnownByTheAddressTheyConnectFrom) {
  const json reply = json::parse(Hachi("nodes --json", false).out, nullptr, false);
  ASSERT_TRUE(reply.is_object() && reply["nodes"].is_array()) << reply.dump();
  int seen = 0;
  for (const json& n : reply["nodes"]) {
    const std::string name = n["name"];
    EXPECT_EQ(n["address"], AddressOf(name)) << n.dump();
    ++seen;
  }
  EXPECT_EQ(seen, 2);
}

// An agent on host 2 that says it is 127.0.0.1 is refused, and the server's log says
// why, naming both addresses.
TEST_F(FleetE2e, ALoopbackAddressFromAnotherHostIsRefused) {
  fleet_->Spawn(2,
                hachi_ + " agent --server http://" + fleet_->address(0) + ":" + port_ +
                    " --name lo --address 127.0.0.1 --preset hgx-h100 --cgroup none " +
                    "--spool-dir /tmp/spool-lo --cluster-secret-file " + dir_ +
                    "/state/cluster-secret",
                dir_ + "/agent-lo.log");
  const std::string want =
      "register: node lo says its address is 127.0.0.1, but it "
      "connects from " +
      fleet_->address(2) + "; other nodes could not reach it there: pass --address";
  EXPECT_TRUE(WaitFor(
      [&] { return ReadFile(dir_ + "/server.log").find(want) != std::string::npos; },
      std::chrono::seconds(10)))
      << ReadFile(dir_ + "/server.log");
  EXPECT_EQ(Hachi("nodes -o %n", false).out.find("lo"), std::string::npos);
}

TEST_F(FleetE2e, GangRank1ReachesRank0AtMasterAddrAndPort) {
  std::ofstream(dir_ + "/go");  // rank 0 need not wait
  const int64_t id = SubmitGang("go");
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitFor([&] { return ShownJob(id)["state"] == "COMPLETED"; },
                      std::chrono::seconds(25)))
      << Logs(id);
  EXPECT_EQ(ExpectMet(id), 29500) << "the lowest of the rank-0 node's range";
  // MASTER_ADDR is host 1's (h1 registered first: the gang's first node).
  EXPECT_EQ(ShownJob(id)["allocations"][0]["node"], "h1");
}

TEST_F(FleetE2e, TwoGangsAtOnceGetDifferentPortsAndBothMeet) {
  const int64_t a = SubmitGang("release");
  const int64_t b = SubmitGang("release");
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  // Both rank 0s hold their ports until released: both met while both ran.
  ASSERT_TRUE(WaitFor([&] { return !Got(a).empty() && !Got(b).empty(); },
                      std::chrono::seconds(25)))
      << Logs(a) << Logs(b);
  EXPECT_EQ(ShownJob(a)["state"], "RUNNING");
  EXPECT_EQ(ShownJob(b)["state"], "RUNNING");
  std::ofstream(dir_ + "/release");
  ASSERT_TRUE(WaitFor(
      [&] {
        return ShownJob(a)["state"] == "COMPLETED" && ShownJob(b)["state"] == "COMPLETED";
      },
      std::chrono::seconds(15)))
      << Logs(a) << Logs(b);
  EXPECT_EQ(ShownJob(a)["allocations"][0]["node"], ShownJob(b)["allocations"][0]["node"])
      << "one rank-0 node for both";
  const int pa = ExpectMet(a), pb = ExpectMet(b);
  EXPECT_NE(pa, pb);
  EXPECT_EQ(std::min(pa, pb), 29500);
  EXPECT_EQ(std::max(pa, pb), 29501);
}

}  // namespace
}  // namespace hachi::cli
