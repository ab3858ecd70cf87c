// Batched UDP I/O. glibc declares `struct mmsghdr`, sendmmsg(2) and recvmmsg(2) only under
// _GNU_SOURCE, which Swift's Glibc module does not set (and defining it here is too late: the
// umbrella's earlier headers have already pulled in <features.h>). So this header declares the
// struct under its own name and reaches the two calls through syscall(2), which is variadic.
#ifndef CMS_NET_H
#define CMS_NET_H
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <netinet/in.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// Same layout as glibc's `struct mmsghdr` (<bits/socket.h>), which is hidden without _GNU_SOURCE.
struct cms_mmsghdr {
    struct msghdr msg_hdr;
    unsigned int msg_len;
};

// sendmmsg(2) is hidden without _GNU_SOURCE; syscall(2) is variadic, which Swift cannot call.
static inline int cms_sendmmsg(int fd, struct cms_mmsghdr *vec, unsigned int vlen, int flags) { return (int)syscall(SYS_sendmmsg, fd, vec, vlen, flags); }

// recvmmsg(2) is hidden without _GNU_SOURCE; syscall(2) is variadic, which Swift cannot call.
static inline int cms_recvmmsg(int fd, struct cms_mmsghdr *vec, unsigned int vlen, int flags, struct timespec *timeout) { return (int)syscall(SYS_recvmmsg, fd, vec, vlen, flags, timeout); }

// Kernel receive timestamps (SO_TIMESTAMPNS): the time a datagram reached the socket, as
// CLOCK_REALTIME, in each received message's control data, so the receiving thread's scheduling
// delay does not count as network delay. Turned on per socket; 0 on success.
static inline int cms_enable_receive_timestamps(int fd) {
    int one = 1;
    return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
}

// Bytes of control data one message needs for its receive timestamp.
static inline size_t cms_receive_timestamp_control_size(void) { return CMSG_SPACE(sizeof(struct timespec)); }

// The receive timestamp (CLOCK_REALTIME nanoseconds) in a received message's control data; -1
// when there is none.
static inline long long cms_receive_timestamp_ns(const struct msghdr *m) {
    if (m->msg_control == NULL || m->msg_controllen < sizeof(struct cmsghdr)) return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS && c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(c), sizeof ts);
            return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
        }
    }
    return -1;
}

// setns(2) for a network namespace (CLONE_NEWNET), hidden without _GNU_SOURCE: moves the calling
// thread into the namespace of `fd` (an open /var/run/netns/NAME); sockets it creates afterwards
// live there. Used by tests that place our endpoints behind a NAT they build.
static inline int cms_setns_net(int fd) { return (int)syscall(SYS_setns, fd, 0x40000000 /* CLONE_NEWNET */); }

#endif
