#include "tls/openssl_library.h"

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/dynamic_library.h"

// Every OpenSSL function Hachi calls (httplib.cc, server/http_loop*.cc; `nm -u` of their
// objects lists them): X(return type, name, (parameters), (arguments), value on failure).
// The parameters are the headers' own: a forwarder that does not match its declaration
// does not compile.
#define HACHI_OPENSSL_FUNCTIONS(X)                                                       \
  X(const unsigned char*, ASN1_STRING_get0_data, (const ASN1_STRING* x), (x), nullptr)   \
  X(int, ASN1_STRING_length, (const ASN1_STRING* x), (x), 0)                             \
  X(long, BIO_ctrl, (BIO * b, int cmd, long larg, void* parg), (b, cmd, larg, parg), 0)  \
  X(BIO*, BIO_new_socket, (int sock, int close_flag), (sock, close_flag), nullptr)       \
  X(void, ERR_clear_error, (void), (), )                                                 \
  X(int, EVP_DigestFinal_ex, (EVP_MD_CTX * ctx, unsigned char* md, unsigned int* s),     \
    (ctx, md, s), 0)                                                                     \
  X(int, EVP_DigestInit_ex, (EVP_MD_CTX * ctx, const EVP_MD* type, ENGINE* impl),        \
    (ctx, type, impl), 0)                                                                \
  X(int, EVP_DigestUpdate, (EVP_MD_CTX * ctx, const void* d, size_t cnt), (ctx, d, cnt), \
    0)                                                                                   \
  X(void, EVP_MD_CTX_free, (EVP_MD_CTX * ctx), (ctx), )                                  \
  X(EVP_MD_CTX*, EVP_MD_CTX_new, (void), (), nullptr)                                    \
  X(const EVP_MD*, EVP_md5, (void), (), nullptr)                                         \
  X(const EVP_MD*, EVP_sha256, (void), (), nullptr)                                      \
  X(const EVP_MD*, EVP_sha512, (void), (), nullptr)                                      \
  X(void, GENERAL_NAMES_free, (GENERAL_NAMES * a), (a), )                                \
  X(int, OPENSSL_sk_num, (const OPENSSL_STACK* st), (st), -1)                            \
  X(void*, OPENSSL_sk_value, (const OPENSSL_STACK* st, int i), (st, i), nullptr)         \
  X(int, SSL_CTX_check_private_key, (const SSL_CTX* ctx), (ctx), 0)                      \
  X(long, SSL_CTX_ctrl, (SSL_CTX * ctx, int cmd, long larg, void* parg),                 \
    (ctx, cmd, larg, parg), 0)                                                           \
  X(void, SSL_CTX_free, (SSL_CTX * ctx), (ctx), )                                        \
  X(X509_STORE*, SSL_CTX_get_cert_store, (const SSL_CTX* ctx), (ctx), nullptr)           \
  X(int, SSL_CTX_load_verify_locations,                                                  \
    (SSL_CTX * ctx, const char* file, const char* path), (ctx, file, path), 0)           \
  X(SSL_CTX*, SSL_CTX_new, (const SSL_METHOD* meth), (meth), nullptr)                    \
  X(void, SSL_CTX_set_cert_store, (SSL_CTX * ctx, X509_STORE * store), (ctx, store), )   \
  X(void, SSL_CTX_set_default_passwd_cb_userdata, (SSL_CTX * ctx, void* u), (ctx, u), )  \
  X(int, SSL_CTX_set_default_verify_paths, (SSL_CTX * ctx), (ctx), 0)                    \
  X(uint64_t, SSL_CTX_set_options, (SSL_CTX * ctx, uint64_t op), (ctx, op), 0)           \
  X(void, SSL_CTX_set_verify, (SSL_CTX * ctx, int mode, SSL_verify_cb cb),               \
    (ctx, mode, cb), )                                                                   \
  X(int, SSL_CTX_use_PrivateKey, (SSL_CTX * ctx, EVP_PKEY * pkey), (ctx, pkey), 0)       \
  X(int, SSL_CTX_use_PrivateKey_file, (SSL_CTX * ctx, const char* file, int type),       \
    (ctx, file, type), 0)                                                                \
  X(int, SSL_CTX_use_certificate, (SSL_CTX * ctx, X509 * x), (ctx, x), 0)                \
  X(int, SSL_CTX_use_certificate_chain_file, (SSL_CTX * ctx, const char* file),          \
    (ctx, file), 0)                                                                      \
  X(int, SSL_CTX_use_certificate_file, (SSL_CTX * ctx, const char* file, int type),      \
    (ctx, file, type), 0)                                                                \
  X(int, SSL_accept, (SSL * ssl), (ssl), -1)                                             \
  X(int, SSL_connect, (SSL * ssl), (ssl), -1)                                            \
  X(long, SSL_ctrl, (SSL * ssl, int cmd, long larg, void* parg), (ssl, cmd, larg, parg), \
    0)                                                                                   \
  X(void, SSL_free, (SSL * ssl), (ssl), )                                                \
  X(X509*, SSL_get1_peer_certificate, (const SSL* s), (s), nullptr)                      \
  X(int, SSL_get_error, (const SSL* s, int ret_code), (s, ret_code), SSL_ERROR_SSL)      \
  X(long, SSL_get_verify_result, (const SSL* ssl), (ssl), X509_V_ERR_UNSPECIFIED)        \
  X(SSL*, SSL_new, (SSL_CTX * ctx), (ctx), nullptr)                                      \
  X(int, SSL_pending, (const SSL* s), (s), 0)                                            \
  X(int, SSL_read, (SSL * ssl, void* buf, int num), (ssl, buf, num), -1)                 \
  X(void, SSL_set_accept_state, (SSL * s), (s), )                                        \
  X(void, SSL_set_bio, (SSL * s, BIO * rbio, BIO * wbio), (s, rbio, wbio), )             \
  X(int, SSL_set_fd, (SSL * s, int fd), (s, fd), 0)                                      \
  X(void, SSL_set_verify, (SSL * s, int mode, SSL_verify_cb cb), (s, mode, cb), )        \
  X(int, SSL_shutdown, (SSL * s), (s), -1)                                               \
  X(int, SSL_write, (SSL * ssl, const void* buf, int num), (ssl, buf, num), -1)          \
  X(const SSL_METHOD*, TLS_client_method, (void), (), nullptr)                           \
  X(const SSL_METHOD*, TLS_method, (void), (), nullptr)                                  \
  X(const SSL_METHOD*, TLS_server_method, (void), (), nullptr)                           \
  X(int, X509_NAME_get_text_by_NID,                                                      \
    (const X509_NAME* name, int nid, char* buf, int len), (name, nid, buf, len), -1)     \
  X(void, X509_STORE_free, (X509_STORE * v), (v), )                                      \
  X(void, X509_free, (X509 * a), (a), )                                                  \
  X(void*, X509_get_ext_d2i, (const X509* x, int nid, int* crit, int* idx),              \
    (x, nid, crit, idx), nullptr)                                                        \
  X(X509_NAME*, X509_get_subject_name, (const X509* a), (a), nullptr)

namespace hachi::tls {
namespace {

#define HACHI_OPENSSL_INDEX(ret, name, params, args, fail) k_##name,
enum Function : int { HACHI_OPENSSL_FUNCTIONS(HACHI_OPENSSL_INDEX) kFunctionCount };
#undef HACHI_OPENSSL_INDEX

#define HACHI_OPENSSL_NAME(ret, name, params, args, fail) #name,
constexpr const char* kNames[] = {HACHI_OPENSSL_FUNCTIONS(HACHI_OPENSSL_NAME)};
#undef HACHI_OPENSSL_NAME

// The soname of the OpenSSL whose headers this was compiled against.
#define HACHI_STR2(x) #x
#define HACHI_STR(x) HACHI_STR2(x)
constexpr const char kLibrary[] = "libssl.so." HACHI_STR(OPENSSL_SHLIB_VERSION);

struct Loaded {
  Status status;
  std::array<void*, kFunctionCount> functions{};
};

std::string CannotOpen(const std::string& path, const std::string& why) {
  return "TLS needs OpenSSL's " + path + " (Debian: libssl3): " + why;
}

const Loaded& Library() {
  // Never destroyed: a forwarder may run in a thread still going at exit.
  static const Loaded* loaded = [] {
    auto* l = new Loaded;
    l->status =
        OpenDynamicLibrary(kLibrary, {CannotOpen, "not the OpenSSL Hachi was built with"},
                           [&](const DynamicLibrary& lib) -> const char* {
                             for (int i = 0; i < kFunctionCount; ++i) {
                               if (!lib.Find(kNames[i], l->functions[i]))
                                 return kNames[i];
                             }
                             return nullptr;
                           });
    if (!l->status.ok()) {
      l->functions.fill(nullptr);
      std::fprintf(stderr, "hachi: %s\n", l->status.message().c_str());
    }
    return l;
  }();
  return *loaded;
}

// The library's `name`, as a pointer of its declared type; null when not loaded.
template <typename Fn>
Fn* Bound(Function f) {
  void* p = Library().functions[f];
  Fn* fn = nullptr;
  static_assert(sizeof(p) == sizeof(fn));
  std::memcpy(&fn, &p, sizeof(fn));  // dlsym's void* to a function: POSIX's round trip
  return fn;
}

}  // namespace

Status LoadOpenSsl() { return Library().status; }

std::span<const char* const> ForwardedFunctions() { return kNames; }

}  // namespace hachi::tls

// The forwarders: OpenSSL's names, defined here with OpenSSL's declarations.
#define HACHI_OPENSSL_FORWARD(ret, name, params, args, fail)              \
  extern "C" ret name params {                                            \
    auto* fn = hachi::tls::Bound<decltype(::name)>(hachi::tls::k_##name); \
    if (fn == nullptr) return fail;                                       \
    return fn args;                                                       \
  }
HACHI_OPENSSL_FUNCTIONS(HACHI_OPENSSL_FORWARD)
#undef HACHI_OPENSSL_FORWARD
