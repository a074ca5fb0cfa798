#include "core/dynamic_library.h"

#include <dlfcn.h>

#include <cstdlib>

namespace hachi {

std::string ResolveLibraryPath(std::string_view library, const char* env_var,
                               const char* fallback) {
  if (!library.empty()) return std::string(library);
  const char* env = std::getenv(env_var);
  if (env != nullptr && *env != '\0') return env;
  return fallback;
}

void* DynamicLibrary::Symbol(const char* name) const { return dlsym(handle_, name); }

Status OpenDynamicLibrary(const std::string& path, const LibraryMessages& messages,
                          const std::function<const char*(const DynamicLibrary&)>& bind) {
  dlerror();  // dlerror() reports the last error: clear an older one
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Unavailable(
        messages.cannot_open(path, why != nullptr ? why : "unknown error"));
  }
  if (const char* missing = bind(DynamicLibrary(handle))) {
    dlclose(handle);  // nothing of it was called
    return Unavailable(path + " has no " + missing + "; " + messages.missing_hint);
  }
  return Status::Ok();
}

}  // namespace hachi
