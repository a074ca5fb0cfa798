// Clang's thread-safety annotations
// (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html), so that a lock contract is
// written in code, not only in comments (STYLE.md). Model: LevelDB
// port/thread_annotations.h. They expand to nothing for GCC, which builds the shipped
// binary; `make analyze` (scripts/analyze.sh) checks them with clang-14 and
// -Wthread-safety -Werror, and `make test` runs it.
//
// Macros only; no code.
#pragma once

#if defined(__clang__)
#define HACHI_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define HACHI_THREAD_ANNOTATION(x)
#endif

// On a member: only read or written with `mu` held.
#define GUARDED_BY(mu) HACHI_THREAD_ANNOTATION(guarded_by(mu))
// On a pointer member: what it points to is guarded by `mu`.
#define PT_GUARDED_BY(mu) HACHI_THREAD_ANNOTATION(pt_guarded_by(mu))
// On a mutex member: taken after (or before) the others named, never in the other order.
#define ACQUIRED_AFTER(...) HACHI_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) HACHI_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
// On a function: the caller holds the mutexes named (and still holds them on return).
#define REQUIRES(...) HACHI_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// On a function: the caller must not hold them (it takes them itself).
#define EXCLUDES(...) HACHI_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a lock type's methods.
#define ACQUIRE(...) HACHI_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) HACHI_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) HACHI_THREAD_ANNOTATION(assert_capability(x))
#define CAPABILITY(x) HACHI_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY HACHI_THREAD_ANNOTATION(scoped_lockable)
#define RETURN_CAPABILITY(x) HACHI_THREAD_ANNOTATION(lock_returned(x))
// For the rare function the analysis cannot follow; say why beside it.
#define NO_THREAD_SAFETY_ANALYSIS HACHI_THREAD_ANNOTATION(no_thread_safety_analysis)
