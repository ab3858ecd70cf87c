// Tells ThreadSanitizer about Synchronization.Mutex's slow paths on Linux (make test-sanitizers
// LD_PRELOADs this into the TSan test run; docs/robustness.md).
//
// Why: Mutex's fast paths are inlined into our code, so TSan sees their atomic acquire and
// release. Under contention, though, the lock is taken in `_MutexHandle._lockSlow` (a spin loop,
// then FUTEX_LOCK_PI) and given back in `_unlockSlow` (FUTEX_UNLOCK_PI), both compiled into the
// toolchain's uninstrumented libswiftSynchronization.so. TSan then sees no happens-before edge
// between two critical sections and reports a "Swift access race" on data the Mutex protects
// (reproduced with a 3-thread Mutex<[Int]> program: a report on every run; none with this file).
//
// What: these wrappers take the place of the three exported slow-path functions (same mangled
// names, Swift calling convention, `self` = the futex word's address in the swiftself register),
// call the real ones, and add __tsan_acquire after a successful lock and __tsan_release before an
// unlock, on the same address as the inlined atomics. Only synchronization is added; a real race
// is still reported. The TSan entry points are weak, so a process without TSan (swift test
// itself, a tool a test starts) just gets the plain forwarders.
//
// Build: clang -shared -fPIC -O1 -o tsan-mutex.so scripts/tsan-mutex.c -ldl (clang from the Swift
// toolchain: gcc has no swiftcall).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>

__attribute__((weak)) void __tsan_acquire(void *addr);
__attribute__((weak)) void __tsan_release(void *addr);

#define SELF void *__attribute__((swift_context)) self
#define LOCK_SLOW "$s15Synchronization12_MutexHandleV9_lockSlowyys6UInt32VF"
#define UNLOCK_SLOW "$s15Synchronization12_MutexHandleV11_unlockSlowyyF"
#define TRY_LOCK_SLOW "$s15Synchronization12_MutexHandleV12_tryLockSlowSbyF"

typedef __attribute__((swiftcall)) void (*LockSlow)(uint32_t, SELF);
typedef __attribute__((swiftcall)) void (*UnlockSlow)(SELF);
typedef __attribute__((swiftcall)) bool (*TryLockSlow)(SELF);

__attribute__((swiftcall)) void lockSlow(uint32_t selfId, SELF) __asm__(LOCK_SLOW);
__attribute__((swiftcall)) void lockSlow(uint32_t selfId, SELF) {
    static LockSlow real;
    if (!real) real = (LockSlow)dlsym(RTLD_NEXT, LOCK_SLOW);
    real(selfId, self);
    if (__tsan_acquire) __tsan_acquire(self);
}

__attribute__((swiftcall)) void unlockSlow(SELF) __asm__(UNLOCK_SLOW);
__attribute__((swiftcall)) void unlockSlow(SELF) {
    static UnlockSlow real;
    if (!real) real = (UnlockSlow)dlsym(RTLD_NEXT, UNLOCK_SLOW);
    if (__tsan_release) __tsan_release(self);
    real(self);
}

__attribute__((swiftcall)) bool tryLockSlow(SELF) __asm__(TRY_LOCK_SLOW);
__attribute__((swiftcall)) bool tryLockSlow(SELF) {
    static TryLockSlow real;
    if (!real) real = (TryLockSlow)dlsym(RTLD_NEXT, TRY_LOCK_SLOW);
    bool locked = real(self);
    if (locked && __tsan_acquire) __tsan_acquire(self);
    return locked;
}
