// CBenchAlloc: heap-allocation counting for revue-bench only (never a dependency of a library).
//
// BenchAlloc.c defines malloc, calloc, realloc, reallocarray, free, posix_memalign, aligned_alloc,
// memalign, valloc and pvalloc in the revue-bench executable. A definition in the executable wins
// symbol resolution over libc's for every object of the process (libvpx, libsrtp and the NSS
// modules it loads, libyuv, libstdc++, the Swift runtime), so every allocation call made through
// the PLT is seen; each wrapper bumps a relaxed C11 atomic and forwards to glibc's own
// implementation (__libc_malloc and friends). glibc-internal calls (inside libc itself) bypass
// the PLT and are not counted, as with AllocationCounter in the tests.
#ifndef CBENCHALLOC_H
#define CBENCHALLOC_H

/// Allocation calls (malloc, calloc, realloc, reallocarray, posix_memalign, aligned_alloc,
/// memalign, valloc, pvalloc) made by every thread of the process since it started. Any thread;
/// one relaxed atomic load.
unsigned long cba_allocations(void);

/// free calls (of non-NULL pointers) made by every thread since the process started. Any thread;
/// one relaxed atomic load.
unsigned long cba_frees(void);

#endif
