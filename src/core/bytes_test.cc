#include "core/bytes.h"

#include <gtest/gtest.h>

#include <string>

namespace hachi {
namespace {

TEST(Utf8Test, Table) {
  struct Case {
    const char* name;
    std::string text;
    bool valid;
  };
  const Case cases[] = {
      {"empty", "", true},
      {"ascii", "echo hi", true},
      {"nul_is_valid", std::string("a\0b", 3), true},
      {"two_byte", "d\xc3\xa9", true},
      {"three_byte", "\xe2\x82\xac", true},
      {"four_byte", "\xf0\x9f\x98\x80", true},
      {"replacement_char_itself", "d\xef\xbf\xbd", true},
      {"lone_ff", "d\xff", false},
      {"lone_continuation", "\x80", false},
      {"truncated_two", "\xc3", false},
      {"truncated_four", "\xf0\x9f\x98", false},
      {"overlong_c0", "\xc0\xaf", false},
      {"overlong_e0", "\xe0\x80\xaf", false},
      {"overlong_f0", "\xf0\x80\x80\xaf", false},
      {"surrogate", "\xed\xa0\x80", false},
      {"above_10ffff", "\xf4\x90\x80\x80", false},
      {"f5", "\xf5\x80\x80\x80", false},
      {"bad_third_byte", "\xe2\x82\x41", false},
  };
  for (const Case& c : cases) EXPECT_EQ(IsValidUtf8(c.text), c.valid) << c.name;
}

TEST(Base64Test, Rfc4648Vectors) {
  const std::pair<std::string, std::string> vectors[] = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
  };
  for (const auto& [plain, coded] : vectors) {
    EXPECT_EQ(Base64Encode(plain), coded);
    EXPECT_EQ(Base64Decode(coded), plain) << coded;
  }
}

TEST(Base64Test, EveryByteRoundTrips) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t len = 0; len <= all.size(); len += 37) {
    const std::string part = all.substr(0, len);
    EXPECT_EQ(Base64Decode(Base64Encode(part)), part) << len;
  }
}

TEST(Base64Test, RefusesWhatIsNotCanonical) {
  for (const char* bad :
       {"Zg", "Zg=", "Zh==", "Zm9=", "Zm 9v", "Zm9v\n", "Zm-_", "=Zm9", "Zg==Zg=="}) {
    EXPECT_FALSE(Base64Decode(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace hachi
