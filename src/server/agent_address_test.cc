// A node's address from its registration: what the agent gave, or the source
// address the server saw; checked. The function on its own, then through Register.
#include "server/agent_address.h"

#include <gtest/gtest.h>

#include <string>

#include "server/testing.h"

namespace hachi::server {
namespace {

using testing::Harness;
using testing::MakeAgent;

struct AddressCase {
  const char* name;
  const char* given;
  const char* peer;
  const char* want;   // the address, or "" when refused
  const char* error;  // when refused: the whole message
};

const AddressCase kAddressCases[] = {
    {"EmptyTakesThePeer", "", "10.79.0.3", "10.79.0.3", ""},
    {"EmptyTakesAMappedPeerAsIpv4", "", "::ffff:10.79.0.3", "10.79.0.3", ""},
    {"EmptyTakesAnIpv6Peer", "", "fd00::3", "fd00::3", ""},
    {"EmptyFromUnixSocketIsLoopback", "", "", "127.0.0.1", ""},
    {"EmptyFromANonAddressPeerIsLoopback", "", "/run/hachi.sock", "127.0.0.1", ""},
    {"EmptyFromLoopbackPeer", "", "127.0.0.1", "127.0.0.1", ""},
    {"GivenIpv4", "10.0.0.7", "10.79.0.3", "10.0.0.7", ""},
    {"GivenIpv6", "fd00::7", "10.79.0.3", "fd00::7", ""},
    {"GivenHostName", "gpu07.cluster.example", "10.79.0.3", "gpu07.cluster.example", ""},
    {"GivenLoopbackFromLoopback", "127.0.0.1", "127.0.0.1", "127.0.0.1", ""},
    {"GivenLoopbackOverUnixSocket", "127.0.0.1", "", "127.0.0.1", ""},
    {"GivenLoopbackFromRemote", "127.0.0.1", "10.79.0.3", "",
     "register: node n2 says its address is 127.0.0.1, but it connects from 10.79.0.3; "
     "other nodes could not reach it there: pass --address"},
    {"GivenLoopbackFromMappedRemote", "127.0.1.1", "::ffff:10.79.0.3", "",
     "register: node n2 says its address is 127.0.1.1, but it connects from 10.79.0.3; "
     "other nodes could not reach it there: pass --address"},
    {"GivenIpv6LoopbackFromRemote", "::1", "10.79.0.3", "",
     "register: node n2 says its address is ::1, but it connects from 10.79.0.3; "
     "other nodes could not reach it there: pass --address"},
    {"GivenLocalhostFromRemote", "localhost", "10.79.0.3", "",
     "register: node n2 says its address is localhost, but it connects from 10.79.0.3; "
     "other nodes could not reach it there: pass --address"},
    {"GivenUnspecified", "0.0.0.0", "10.79.0.3", "",
     "register: node n2 says its address is 0.0.0.0, connecting from 10.79.0.3; that is "
     "no one's address: pass --address with the one the other nodes reach it at, or "
     "none"},
    {"GivenGarbage", "not an address!", "10.79.0.3", "",
     "register: node n2 says its address is \"not an address!\", connecting from "
     "10.79.0.3; that is neither an IP address nor a host name: pass --address with "
     "one, or none to use the address it connects from"},
    {"GivenWithPort", "10.0.0.7:7070", "", "",
     "register: node n2 says its address is \"10.0.0.7:7070\"; that is neither an IP "
     "address nor a host name: pass --address with one, or none to use the address it "
     "connects from"},
    {"GivenTruncatedIpv4", "10.0.0", "10.79.0.3", "",
     "register: node n2 says its address is \"10.0.0\", connecting from 10.79.0.3; that "
     "is neither an IP address nor a host name: pass --address with one, or none to "
     "use the address it connects from"},
    {"GivenLabelWithLeadingHyphen", "-gpu07", "", "",
     "register: node n2 says its address is \"-gpu07\"; that is neither an IP address "
     "nor a host name: pass --address with one, or none to use the address it "
     "connects from"},
};

TEST(AgentAddress, DefaultsToThePeerAndIsChecked) {
  for (const AddressCase& c : kAddressCases) {
    SCOPED_TRACE(c.name);
    Result<std::string> got = AgentAddress("n2", c.given, c.peer);
    if (*c.want != '\0') {
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, c.want);
    } else {
      ASSERT_FALSE(got.ok()) << *got;
      EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(got.status().message(), c.error);
    }
  }
}

// Through Controller::Register, as the register route calls it: the node's record
// (what `hachi show node` and every gang's MASTER_ADDR read) has the resolved address,
// and a refused registration leaves no node behind.
TEST(AgentAddress, RegisterStoresTheResolvedAddressOrRefuses) {
  struct Case {
    const char* name;
    const char* given;
    const char* peer;
    const char* want;  // "" when refused
  };
  const Case cases[] = {
      {"EmptyAndPeer", "", "10.79.0.3", "10.79.0.3"},
      {"GivenOk", "10.0.0.9", "10.79.0.3", "10.0.0.9"},
      {"LoopbackFromRemoteRefused", "127.0.0.1", "10.79.0.3", ""},
      {"GarbageRefused", "bad address", "10.79.0.3", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Harness h;
    AgentRegistration reg = MakeAgent("n2");
    reg.address = c.given;
    Status s = h->nodes().Register(reg, c.peer);
    const std::vector<state::NodeStatus> nodes = h->cluster_views().Nodes();
    if (*c.want != '\0') {
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_EQ(nodes.size(), 1u);
      EXPECT_EQ(nodes[0].record.address, c.want);
    } else {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
      EXPECT_TRUE(nodes.empty());
    }
  }
}

// A gang's MASTER_ADDR is its rank-0 node's address as the server resolved it: with
// agents that gave none, the addresses they connected from.
TEST(AgentAddress, GangGetsTheRank0NodesPeerAddress) {
  Harness h;
  for (const auto& [node, peer] : {std::pair{"n1", "10.79.0.2"}, {"n2", "10.79.0.3"}}) {
    AgentRegistration reg = MakeAgent(node);
    reg.address.clear();
    ASSERT_TRUE(h->nodes().Register(reg, peer).ok());
  }
  const state::JobId id = h.Submit(testing::MakeSubmit().Gang(2, 8));
  h->RunCycle();
  ASSERT_EQ(h.StateOf(id), state::JobState::kRunning);
  const AgentWork w = h.Work("n1");
  ASSERT_EQ(w.launch.size(), 1u);
  const api::LaunchSpec& l = w.launch[0];
  ASSERT_EQ(l.nodelist.size(), 2u);
  const std::string rank0 = l.nodelist[0];
  EXPECT_EQ(l.node_addresses[0], rank0 == "n1" ? "10.79.0.2" : "10.79.0.3");
  EXPECT_EQ(l.node_addresses[1], rank0 == "n1" ? "10.79.0.3" : "10.79.0.2");
}

}  // namespace
}  // namespace hachi::server
