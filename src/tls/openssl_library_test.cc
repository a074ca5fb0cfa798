#include "tls/openssl_library.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include <cstdio>
#include <string>

namespace hachi::tls {
namespace {

TEST(OpenSslLibraryTest, LoadsAndBindsEveryForwardedFunction) {
  const Status s = LoadOpenSsl();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(LoadOpenSsl().ok());  // once, and the same answer after
  EXPECT_GT(ForwardedFunctions().size(), 50u);
}

// The forwarders reach the library: a digest through EVP and a TLS context, with the
// calls the binary makes.
TEST(OpenSslLibraryTest, ForwardersCallTheLibrary) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ASSERT_NE(ctx, nullptr);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ASSERT_EQ(EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr), 1);
  ASSERT_EQ(EVP_DigestUpdate(ctx, "abc", 3), 1);
  ASSERT_EQ(EVP_DigestFinal_ex(ctx, md, &len), 1);
  EVP_MD_CTX_free(ctx);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    char b[3];
    std::snprintf(b, sizeof(b), "%02x", md[i]);
    hex += b;
  }
  EXPECT_EQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

  SSL_CTX* tls = SSL_CTX_new(TLS_client_method());
  ASSERT_NE(tls, nullptr);
  EXPECT_EQ(SSL_CTX_set_min_proto_version(tls, TLS1_2_VERSION), 1);
  SSL* ssl = SSL_new(tls);
  ASSERT_NE(ssl, nullptr);
  SSL_free(ssl);
  SSL_CTX_free(tls);
}

// Each forwarded name is OpenSSL's own: in the library, and not our forwarder.
TEST(OpenSslLibraryTest, EveryNameIsInTheLibrary) {
  ASSERT_TRUE(LoadOpenSsl().ok());
  void* lib = dlopen("libssl.so.3", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr) << "LoadOpenSsl opened it";
  for (const char* name : ForwardedFunctions()) {
    SCOPED_TRACE(name);
    void* theirs = dlsym(lib, name);
    EXPECT_NE(theirs, nullptr);
  }
}

}  // namespace
}  // namespace hachi::tls
