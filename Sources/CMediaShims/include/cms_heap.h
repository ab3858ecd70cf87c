// The allocator's own count of bytes in use, for leak checks that must not depend on how much
// memory the allocator keeps cached (resident size does).
#ifndef CMS_HEAP_H
#define CMS_HEAP_H
#include <malloc.h>
#include <stddef.h>

// mallinfo2(3) returns a struct by value, which Swift cannot call through dlsym; glibc sums every
// arena. In use: bytes in chunks handed out plus bytes in mmap'd blocks.
static inline size_t cms_heap_bytes_in_use(void) {
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

#endif
