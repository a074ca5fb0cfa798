// OpenSSL, opened with dlopen the first time a process speaks TLS.
//
// httplib (https:// server addresses) and the server's TLS listener call OpenSSL's
// functions by name. Linked in, statically or not, OpenSSL cost every `hachi` process its
// relocation at start -- 18 k of the binary's 26 k pointers, ~95 copy-on-write page
// faults, a third of `hachi --version` -- though only a process that speaks TLS needs it
// (docs/benchmarks.md, "Process start"). So openssl_library.cc defines, in the binary,
// each OpenSSL function Hachi calls as a forwarder to the same function in the system's
// libssl.so.3 (libcrypto.so.3 comes with it), opened on the first call. A new OpenSSL
// call in Hachi needs its row there: without one the link fails (undefined reference).
//
// When the library cannot be opened the forwarders return OpenSSL's failure values (null,
// 0, -1) and the reason is printed once to stderr: the caller's own error ("TLS context",
// "SSL connection failed") follows it.
//
// Thread safety: any thread may call any forwarder; the library is opened once
// (function-local static) and never closed.
#pragma once

#include <span>

#include "core/status.h"

namespace hachi::tls {

// Opens libssl.so.3 and binds every forwarded function, once per process; kUnavailable
// with dlopen's reason or the first missing function. Later calls return the first one's
// result.
Status LoadOpenSsl();

// The OpenSSL functions the binary forwards, by name (for the test that checks each is
// bound).
std::span<const char* const> ForwardedFunctions();

}  // namespace hachi::tls
