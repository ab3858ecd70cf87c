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

// The local address a datagram arrived at (IP_PKTINFO / IPV6_PKTINFO), and sending from a chosen
// local address, so a host with several addresses answers from the one it was asked at. glibc
// hides `struct in6_pktinfo` without _GNU_SOURCE, so both structs are declared here under their
// own names, with the kernel's layout.
struct cms_in_pktinfo { int ifindex; struct in_addr spec_dst; struct in_addr addr; };
struct cms_in6_pktinfo { struct in6_addr addr; unsigned int ifindex; };

// Asks the kernel for each datagram's local address: IP_PKTINFO on an IPv4 socket, IPV6_RECVPKTINFO
// on an IPv6 one (on a dual-stack socket that covers IPv4 datagrams too, as v4-mapped addresses).
// 0 on success.
static inline int cms_enable_destination_info(int fd, int ipv6) {
    int one = 1;
    if (ipv6) return setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one);
    return setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one);
}

// The local address a received message arrived at, from its IP_PKTINFO / IPV6_PKTINFO control
// data, into `destination` (an IPv6 one carries the arrival interface as its scope id). Returns 1
// when the message had one, else 0 (and `destination` has family AF_UNSPEC).
static inline int cms_message_destination(const struct msghdr *m, struct sockaddr_storage *destination) {
    memset(destination, 0, sizeof *destination);
    if (m->msg_control == NULL || m->msg_controllen < sizeof(struct cmsghdr)) return 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO && c->cmsg_len >= CMSG_LEN(sizeof(struct cms_in_pktinfo))) {
            struct cms_in_pktinfo info;
            memcpy(&info, CMSG_DATA(c), sizeof info);
            struct sockaddr_in *d = (struct sockaddr_in *)destination;
            d->sin_family = AF_INET;
            d->sin_addr = info.addr;
            return 1;
        }
        if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO && c->cmsg_len >= CMSG_LEN(sizeof(struct cms_in6_pktinfo))) {
            struct cms_in6_pktinfo info;
            memcpy(&info, CMSG_DATA(c), sizeof info);
            struct sockaddr_in6 *d = (struct sockaddr_in6 *)destination;
            d->sin6_family = AF_INET6;
            d->sin6_addr = info.addr;
            d->sin6_scope_id = info.ifindex;
            return 1;
        }
    }
    return 0;
}

// Bytes of control data one received message needs for its receive timestamp and its local
// destination address together.
static inline size_t cms_receive_control_size(void) {
    return CMSG_SPACE(sizeof(struct timespec)) + CMSG_SPACE(sizeof(struct cms_in6_pktinfo));
}

// Receives one datagram into `buffer` with recvmsg(2) and `flags` (MSG_DONTWAIT, or 0): returns
// its full length (MSG_TRUNC) or -1 (errno). The source goes to `source` (`*source_length` in: its size, out: the address length);
// the local address it arrived at to `destination` (`cms_message_destination`).
static inline long cms_receive_with_destination(int fd, void *buffer, size_t length, int flags, struct sockaddr_storage *source,
                                                socklen_t *source_length, struct sockaddr_storage *destination) {
    struct iovec vector = { buffer, length };
    union { struct cmsghdr align; char bytes[CMSG_SPACE(sizeof(struct cms_in6_pktinfo)) + CMSG_SPACE(sizeof(struct timespec)) + 64]; } control;
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_name = source;
    m.msg_namelen = *source_length;
    m.msg_iov = &vector;
    m.msg_iovlen = 1;
    m.msg_control = control.bytes;
    m.msg_controllen = sizeof control.bytes;
    long rc = (long)recvmsg(fd, &m, MSG_TRUNC | flags);
    if (rc < 0) return rc;
    *source_length = m.msg_namelen;
    cms_message_destination(&m, destination);
    return rc;
}

// Sends one datagram with sendmsg(2) from the local address `from` (IPv4 on an IPv4 socket; on an
// IPv6 socket an IPv6 address, or a v4-mapped one for an IPv4 destination). Returns the bytes sent
// or -1 (errno; EINVAL when `from` is not an address of this host any more).
static inline long cms_send_from(int fd, const void *bytes, size_t length, const struct sockaddr *to, socklen_t to_length,
                                 const struct sockaddr_storage *from) {
    struct iovec vector = { (void *)bytes, length };
    union { struct cmsghdr align; char bytes[CMSG_SPACE(sizeof(struct cms_in6_pktinfo))]; } control;
    memset(&control, 0, sizeof control);
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_name = (void *)to;
    m.msg_namelen = to_length;
    m.msg_iov = &vector;
    m.msg_iovlen = 1;
    m.msg_control = control.bytes;
    struct cmsghdr *c = (struct cmsghdr *)control.bytes;
    if (from->ss_family == AF_INET) {
        struct cms_in_pktinfo info;
        memset(&info, 0, sizeof info);
        info.spec_dst = ((const struct sockaddr_in *)from)->sin_addr;
        c->cmsg_level = IPPROTO_IP;
        c->cmsg_type = IP_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof info);
        memcpy(CMSG_DATA(c), &info, sizeof info);
        m.msg_controllen = CMSG_SPACE(sizeof info);
    } else {
        struct cms_in6_pktinfo info;
        memset(&info, 0, sizeof info);
        info.addr = ((const struct sockaddr_in6 *)from)->sin6_addr;
        info.ifindex = ((const struct sockaddr_in6 *)from)->sin6_scope_id;
        c->cmsg_level = IPPROTO_IPV6;
        c->cmsg_type = IPV6_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof info);
        memcpy(CMSG_DATA(c), &info, sizeof info);
        m.msg_controllen = CMSG_SPACE(sizeof info);
    }
    return (long)sendmsg(fd, &m, MSG_NOSIGNAL);
}

#endif
