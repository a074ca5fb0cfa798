#include "api/container_image.h"

#include <gtest/gtest.h>

#include <string>

namespace hachi::api {
namespace {

struct ImageCase {
  const char* name;
  std::string image;
  const char* error;  // "" = accepted; else a part of the message
};

// An image starting with '-' became an option of the runtime.
TEST(CheckContainerImage, AcceptsImagesRefusesOptionsAndOddBytes) {
  const ImageCase cases[] = {
      {"none", "", ""},
      {"short_name", "ubuntu", ""},
      {"tag", "ubuntu:22.04", ""},
      {"registry_port_path_tag", "registry.example.com:5000/team/pytorch:2.3-cuda12", ""},
      {"digest", "nvcr.io/nvidia/pytorch@sha256:" + std::string(64, 'a'), ""},
      {"tag_and_digest", "nvcr.io/nvidia/pytorch:24.01-py3@sha256:0123abcd", ""},
      {"docker_transport", "docker://nvcr.io/nvidia/pytorch:24.01-py3", ""},
      {"library_transport", "library://alice/default/img:latest", ""},
      {"sif_absolute", "/images/pt.sif", ""},
      {"sif_relative", "./pt.sif", ""},
      {"enroot_style", "nvcr.io#nvidia/pytorch:24.01-py3", ""},
      {"user_flag", "--user=0", "starts with '-'"},
      {"short_flag", "-v/:/host", "starts with '-'"},
      {"privileged", "--privileged", "starts with '-'"},
      {"space", "ubuntu --privileged", "' ' at byte 6"},
      {"tab", "ubuntu\t-x", "'\\x09' at byte 6"},
      {"newline", "ubuntu\n", "'\\x0a' at byte 6"},
      {"nul", std::string("ubu\0ntu", 7), "'\\x00' at byte 3"},
      {"semicolon", "ubuntu;id", "';' at byte 6"},
      {"quote", "ubuntu'x", "'\\x27' at byte 6"},
      {"non_ascii", "ub\xc3\xbcntu", "'\\xc3' at byte 2"},
      {"leading_colon", ":tag", "must start with"},
      {"too_long", std::string(1025, 'a'), "longer than 1024"},
  };
  for (const ImageCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Status s = CheckContainerImage(c.image);
    if (std::string(c.error).empty()) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      continue;
    }
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message().rfind("container_image: '", 0), 0u) << s.message();
    EXPECT_NE(s.message().find(c.error), std::string::npos) << s.message();
  }
  // The value is shown, escaped and cut.
  EXPECT_NE(CheckContainerImage("--user=0").message().find("'--user=0'"),
            std::string::npos);
  EXPECT_LT(CheckContainerImage(std::string(5000, '-')).message().size(), 300u);
}

}  // namespace
}  // namespace hachi::api
