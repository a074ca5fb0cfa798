#include "core/dynamic_library.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace hachi {
namespace {

// A stand-in API on the C library, which every process has loaded.
struct LibcApi {
  std::string path;
  size_t (*strlen_fn)(const char*) = nullptr;
  int (*absent_fn)() = nullptr;
};

const char* BindLibc(const DynamicLibrary& lib, LibcApi& a) {
  if (!lib.Find("strlen", a.strlen_fn)) return "strlen";
  lib.Find("hachi_no_such_function", a.absent_fn);  // optional
  return nullptr;
}

const char* BindMissing(const DynamicLibrary& lib, LibcApi& a) {
  if (!lib.Find("hachi_no_such_function", a.absent_fn)) return "hachi_no_such_function";
  return nullptr;
}

std::string CannotOpen(const std::string& path, const std::string& why) {
  return "cannot load " + path + ": " + why;
}

TEST(DynamicLibraryTest, LoadsOnceAndBindsSymbols) {
  LoadedLibraries<LibcApi> loaded(BindLibc, {CannotOpen, "not libc"});
  Result<const LibcApi*> a = loaded.Get("libc.so.6");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ((*a)->path, "libc.so.6");
  ASSERT_NE((*a)->strlen_fn, nullptr);
  EXPECT_EQ((*a)->strlen_fn("hachi"), 5u);
  EXPECT_EQ((*a)->absent_fn, nullptr);  // optional and missing: null
  Result<const LibcApi*> again = loaded.Get("libc.so.6");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *a);  // the same object, not a second load
}

TEST(DynamicLibraryTest, Failures) {
  struct Case {
    const char* name;
    LoadedLibraries<LibcApi>::Bind bind;
    std::string path;
    std::string want;  // the message's start
  };
  const Case cases[] = {
      {"no such library", BindLibc, "libhachi-none.so.9",
       "cannot load libhachi-none.so.9: "},
      {"required symbol missing", BindMissing, "libc.so.6",
       "libc.so.6 has no hachi_no_such_function; not libc"},
  };
  for (const Case& c : cases) {
    LoadedLibraries<LibcApi> loaded(c.bind, {CannotOpen, "not libc"});
    Result<const LibcApi*> a = loaded.Get(c.path);
    ASSERT_FALSE(a.ok()) << c.name;
    EXPECT_EQ(a.status().code(), StatusCode::kUnavailable) << c.name;
    EXPECT_EQ(a.status().message().substr(0, c.want.size()), c.want) << c.name;
  }
}

TEST(DynamicLibraryTest, ResolvePath) {
  setenv("HACHI_TEST_LIBRARY", "/opt/env.so", 1);
  EXPECT_EQ(ResolveLibraryPath("/given.so", "HACHI_TEST_LIBRARY", "fallback.so"),
            "/given.so");
  EXPECT_EQ(ResolveLibraryPath("", "HACHI_TEST_LIBRARY", "fallback.so"), "/opt/env.so");
  setenv("HACHI_TEST_LIBRARY", "", 1);
  EXPECT_EQ(ResolveLibraryPath("", "HACHI_TEST_LIBRARY", "fallback.so"), "fallback.so");
  unsetenv("HACHI_TEST_LIBRARY");
  EXPECT_EQ(ResolveLibraryPath("", "HACHI_TEST_LIBRARY", "fallback.so"), "fallback.so");
}

}  // namespace
}  // namespace hachi
