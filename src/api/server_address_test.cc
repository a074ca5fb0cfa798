// ParseServerAddress (http_client.h): the forms a server address takes, and a clear
// error naming the address for each that is wrong.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/http_client.h"

namespace hachi::api {
namespace {

struct Row {
  std::string name;
  std::string address;
  // What it parses to; `error` non-empty: kInvalidArgument containing it.
  std::string unix_path, host;
  int port;
  bool https;
  std::string error;
};

class ParseServerAddressTest : public testing::TestWithParam<Row> {};

TEST_P(ParseServerAddressTest, Parses) {
  const Row& r = GetParam();
  Result<ServerAddress> a = ParseServerAddress(r.address);
  if (!r.error.empty()) {
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(a.status().message().find(r.error), std::string::npos)
        << a.status().message();
    EXPECT_NE(a.status().message().find(r.address), std::string::npos);
    return;
  }
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->unix_path, r.unix_path);
  EXPECT_EQ(a->host, r.host);
  EXPECT_EQ(a->port, r.port);
  EXPECT_EQ(a->https, r.https);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ParseServerAddressTest,
    testing::Values(
        Row{"http", "http://10.0.0.1:8686", "", "10.0.0.1", 8686, false, ""},
        Row{"bare", "ctl.example:8686/", "", "ctl.example", 8686, false, ""},
        Row{"https", "https://ctl.example:8443", "", "ctl.example", 8443, true, ""},
        Row{"ipv6", "http://[::1]:8686", "", "[::1]", 8686, false, ""},
        Row{"unix", "unix:/run/hachi/hachi.sock", "/run/hachi/hachi.sock", "", 0, false,
            ""},
        Row{"unix_no_path", "unix:", "", "", 0, false, "no socket path"},
        Row{"no_port", "http://ctl.example", "", "", 0, false,
            "expected http://HOST:PORT"},
        Row{"empty_port", "ctl.example:", "", "", 0, false, "expected http://HOST:PORT"},
        Row{"bad_port", "ctl.example:99999", "", "", 0, false, "bad port"},
        Row{"port_not_a_number", "ctl.example:86x", "", "", 0, false, "bad port"}),
    [](const testing::TestParamInfo<Row>& p) { return p.param.name; });

// Several controllers: the list's elements, spaces trimmed; an empty element stays (and
// is then refused by name, as any address that does not parse).
TEST(SplitServerList, Elements) {
  EXPECT_EQ(SplitServerList("http://a:1"), (std::vector<std::string>{"http://a:1"}));
  EXPECT_EQ(SplitServerList("http://a:1, b:2 ,unix:/s"),
            (std::vector<std::string>{"http://a:1", "b:2", "unix:/s"}));
  EXPECT_EQ(SplitServerList("a:1,"), (std::vector<std::string>{"a:1", ""}));
}

}  // namespace
}  // namespace hachi::api
