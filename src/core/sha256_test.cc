#include "core/sha256.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "core/secret.h"

namespace hachi {
namespace {

struct Vector {
  const char* name;
  std::string input;
  const char* digest;
};

// FIPS 180-4 examples and NIST CAVP SHA256ShortMsg lengths around the padding edges
// (55, 56 and 64 bytes: one block, two blocks, a full block then padding).
TEST(Sha256Test, KnownDigests) {
  const Vector cases[] = {
      {"empty", "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"two_blocks", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {"55_a", std::string(55, 'a'),
       "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {"56_a", std::string(56, 'a'),
       "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {"64_a", std::string(64, 'a'),
       "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {"million_a", std::string(1000000, 'a'),
       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
  };
  for (const Vector& v : cases) {
    EXPECT_EQ(Sha256Hex(v.input), v.digest) << v.name;
  }
}

TEST(SecretTest, RandomHexIsFreshAndHex) {
  Result<std::string> a = RandomHex(32);
  Result<std::string> b = RandomHex(32);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_NE(*a, *b);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST(SecretTest, Equals) {
  EXPECT_TRUE(SecretEquals("hachi_abc", "hachi_abc"));
  EXPECT_FALSE(SecretEquals("hachi_abc", "hachi_abd"));
  EXPECT_FALSE(SecretEquals("hachi_abc", "hachi_ab"));
  EXPECT_TRUE(SecretEquals("", ""));
}

TEST(SecretTest, FileRoundTripAndModeCheck) {
  char tmpl[] = "/tmp/hachi-secret-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string path = dir + "/secret";
  ASSERT_TRUE(WriteSecretFile(path, "s3cret").ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Result<std::string> read = ReadSecretFile(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, "s3cret");
  // Never overwritten.
  EXPECT_EQ(WriteSecretFile(path, "other").code(), StatusCode::kUnavailable);
  // Readable by others: refused, naming the fix.
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  Result<std::string> loose = ReadSecretFile(path);
  EXPECT_EQ(loose.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(loose.status().message().find("chmod 600"), std::string::npos);
  EXPECT_EQ(ReadSecretFile(dir + "/missing").status().code(), StatusCode::kNotFound);
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
}

// RFC 4231's test cases 1 and 2, and 6 (a key longer than the block).
TEST(HmacSha256, Rfc4231) {
  EXPECT_EQ(HmacSha256Hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(HmacSha256Hex(std::string(131, '\xaa'),
                          "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

}  // namespace
}  // namespace hachi
