// Libraries the outside world makes us load with dlopen (STYLE.md: NVML, the CUDA
// driver): where to find one, how it is opened, how its symbols are looked up and what a
// failure says. One loader for topo/nvml_library.h and diag/cuda_library.h.
//
// Thread safety: LoadedLibraries::Get may be called from any thread at any time; the
// first call for a path opens the library and binds its symbols under the object's lock,
// later calls return the same object. What it returns is immutable and lives until the
// process exits: the library is never closed (dlclose while another thread may still be
// inside it is not safe, and a closed-then-reopened driver library gains nothing). A
// failed load is not remembered, so a later call tries again.
#pragma once

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "core/mutex.h"
#include "core/status.h"
#include "core/thread_annotations.h"

namespace hachi {

// `library` when set, else $`env_var` when set and not empty, else `fallback`.
std::string ResolveLibraryPath(std::string_view library, const char* env_var,
                               const char* fallback);

// An opened library, while its symbols are bound.
class DynamicLibrary {
 public:
  explicit DynamicLibrary(void* handle) : handle_(handle) {}

  // Sets `slot` to the function `name`, or null when the library lacks it; true when
  // found.
  template <typename Fn>
  bool Find(const char* name, Fn*& slot) const {
    void* p = Symbol(name);
    // dlsym returns functions as void*; POSIX guarantees the round trip.
    static_assert(sizeof(p) == sizeof(slot));
    std::memcpy(&slot, &p, sizeof(slot));
    return p != nullptr;
  }

 private:
  void* Symbol(const char* name) const;
  void* handle_;
};

// What a failed load says, past the path and the loader's reason.
struct LibraryMessages {
  // dlopen failed: the whole message, from the path and dlerror().
  std::string (*cannot_open)(const std::string& path, const std::string& why);
  // After "PATH has no SYMBOL; " when a required symbol is missing.
  const char* missing_hint;
};

// Opens `path` (RTLD_NOW | RTLD_LOCAL) and runs `bind`, which looks the symbols up and
// returns the first required one missing, or null. kUnavailable when dlopen fails or a
// required symbol is missing (the library is then closed again: nothing of it was
// called). On success the library stays open until exit.
Status OpenDynamicLibrary(const std::string& path, const LibraryMessages& messages,
                          const std::function<const char*(const DynamicLibrary&)>& bind);

// The `Api` objects (a struct of function pointers with a `path` member) loaded so far,
// by path; `Bind(const DynamicLibrary&, Api&)` fills one. Entries are never removed, so
// the pointers handed out stay valid until exit. Meant as a function-local static that
// is never destroyed.
template <typename Api>
class LoadedLibraries {
 public:
  using Bind = const char* (*)(const DynamicLibrary&, Api&);
  LoadedLibraries(Bind bind, LibraryMessages messages)
      : bind_(bind), messages_(messages) {}

  Result<const Api*> Get(const std::string& path) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (auto it = loaded_.find(path); it != loaded_.end()) return it->second.get();
    auto api = std::make_unique<Api>();
    api->path = path;
    HACHI_RETURN_IF_ERROR(OpenDynamicLibrary(
        path, messages_, [&](const DynamicLibrary& lib) { return bind_(lib, *api); }));
    const Api* out = api.get();
    loaded_.emplace(path, std::move(api));
    return out;
  }

 private:
  // Constant after construction.
  const Bind bind_;
  const LibraryMessages messages_;

  Mutex mu_;
  std::map<std::string, std::unique_ptr<const Api>> loaded_ GUARDED_BY(mu_);
};

}  // namespace hachi
