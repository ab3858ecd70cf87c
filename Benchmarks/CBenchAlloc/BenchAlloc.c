// Counting wrappers over glibc's allocator for revue-bench (see include/CBenchAlloc.h).
// Rules: no wrapper allocates, takes a lock, calls through the PLT to another wrapper or touches
// errno except where the function it replaces does; the counters are lock-free atomics, so a
// wrapper is safe before main, in signal-unsafe places and on any thread.
#include "CBenchAlloc.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

// glibc's exported implementations (GLIBC_2.2.5; __libc_reallocarray is GLIBC_PRIVATE, so
// reallocarray is rebuilt from __libc_realloc below).
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void __libc_free(void *pointer);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void *__libc_valloc(size_t size);
extern void *__libc_pvalloc(size_t size);

static atomic_ulong allocations;
static atomic_ulong frees;

static inline void count_allocation(void) { atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed); }

unsigned long cba_allocations(void) { return atomic_load_explicit(&allocations, memory_order_relaxed); }
unsigned long cba_frees(void) { return atomic_load_explicit(&frees, memory_order_relaxed); }

void *malloc(size_t size) {
    count_allocation();
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    count_allocation();
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    count_allocation();
    return __libc_realloc(pointer, size);
}

// glibc's reallocarray: ENOMEM on count * size overflow, otherwise realloc.
void *reallocarray(void *pointer, size_t count, size_t size) {
    count_allocation();
    size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_realloc(pointer, bytes);
}

void free(void *pointer) {
    if (pointer != NULL) atomic_fetch_add_explicit(&frees, 1, memory_order_relaxed);
    __libc_free(pointer);
}

static inline int is_power_of_two(size_t n) { return n != 0 && (n & (n - 1)) == 0; }

// POSIX: EINVAL unless alignment is a power of two multiple of sizeof(void *); *out untouched on
// failure; errno not the channel (glibc's __posix_memalign behaves the same).
int posix_memalign(void **out, size_t alignment, size_t size) {
    count_allocation();
    if (alignment % sizeof(void *) != 0 || !is_power_of_two(alignment)) return EINVAL;
    void *p = __libc_memalign(alignment, size);
    if (p == NULL) return ENOMEM;
    *out = p;
    return 0;
}

// C11/C17 aligned_alloc: glibc 2.36 accepts any alignment here (it is memalign, which rounds a
// non-power-of-two up); C17 and glibc >= 2.38 reject one that is not a power of two with EINVAL.
// Follow the stricter rule: no caller on our paths passes such an alignment.
void *aligned_alloc(size_t alignment, size_t size) {
    count_allocation();
    if (!is_power_of_two(alignment)) {
        errno = EINVAL;
        return NULL;
    }
    return __libc_memalign(alignment, size);
}

void *memalign(size_t alignment, size_t size) {
    count_allocation();
    return __libc_memalign(alignment, size);
}

void *valloc(size_t size) {
    count_allocation();
    return __libc_valloc(size);
}

void *pvalloc(size_t size) {
    count_allocation();
    return __libc_pvalloc(size);
}
