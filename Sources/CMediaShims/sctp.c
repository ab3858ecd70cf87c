// SCTP associations for WebRTC data channels over libusrsctp in AF_CONN mode: see cms_sctp.h.
//
// usrsctp is one stack per process. It is started once, without its own threads (no raw sockets,
// no receive threads: packets only come in through cms_sctp_input), and this file's timer thread
// calls usrsctp_handle_timers every 10 ms while at least one association exists. Every callback
// from usrsctp names the association by the address registered for it (the cms_sctp pointer); a
// registry of live associations, under one mutex, turns that into the caller's callbacks, so a
// timer that fires while an association is being freed finds it gone and does nothing.
#include "cms_sctp.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <usrsctp.h>

struct cms_sctp {
    struct socket *sock;
    uint16_t port;
    cms_sctp_output_fn output;
    cms_sctp_upcall_fn upcall;
    void *context;
    cms_sctp *next;  // in the registry
};

static pthread_once_t stack_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t registry_changed = PTHREAD_COND_INITIALIZER;
static cms_sctp *registry;
static int live;

// MARK: callbacks from usrsctp

static int conn_output(void *address, void *buffer, size_t length, uint8_t tos, uint8_t set_df) {
    (void)tos;
    (void)set_df;
    pthread_mutex_lock(&registry_lock);
    for (cms_sctp *s = registry; s != NULL; s = s->next) {
        if (s == address) {
            s->output(s->context, buffer, length);
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return 0;
}

static void socket_upcall(struct socket *sock, void *arg, int flags) {
    (void)sock;
    (void)flags;
    pthread_mutex_lock(&registry_lock);
    for (cms_sctp *s = registry; s != NULL; s = s->next) {
        if (s == arg) {
            s->upcall(s->context);
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
}

// MARK: the stack and its timer thread

static void *timer_thread(void *unused) {
    (void)unused;
    struct timespec last;
    clock_gettime(CLOCK_MONOTONIC, &last);
    for (;;) {
        pthread_mutex_lock(&registry_lock);
        while (live == 0) pthread_cond_wait(&registry_changed, &registry_lock);
        pthread_mutex_unlock(&registry_lock);
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t elapsed = (int64_t)(now.tv_sec - last.tv_sec) * 1000 + (now.tv_nsec - last.tv_nsec) / 1000000;
        if (elapsed <= 0) continue;
        last.tv_sec += (time_t)(elapsed / 1000);
        last.tv_nsec += (long)(elapsed % 1000) * 1000000;
        if (last.tv_nsec >= 1000000000) {
            last.tv_sec += 1;
            last.tv_nsec -= 1000000000;
        }
        usrsctp_handle_timers((uint32_t)(elapsed > 1000 ? 1000 : elapsed));
    }
    return NULL;
}

static void start_stack(void) {
    usrsctp_init_nothreads(0, conn_output, NULL);
    // WebRTC's settings: no ECN (the DTLS layer carries no ECN bits), no ASCONF or AUTH (one
    // address, DTLS authenticates), partial reliability and stream reconfiguration on.
    usrsctp_sysctl_set_sctp_ecn_enable(0);
    usrsctp_sysctl_set_sctp_asconf_enable(0);
    usrsctp_sysctl_set_sctp_auth_enable(0);
    usrsctp_sysctl_set_sctp_pr_enable(1);
    usrsctp_sysctl_set_sctp_reconfig_enable(1);
    usrsctp_sysctl_set_sctp_blackhole(2);
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_create(&thread, &attributes, timer_thread, NULL);
    pthread_attr_destroy(&attributes);
}

// MARK: associations

static struct sockaddr_conn conn_address(cms_sctp *s, uint16_t port) {
    struct sockaddr_conn a;
    memset(&a, 0, sizeof a);
    a.sconn_family = AF_CONN;
    a.sconn_port = htons(port);
    a.sconn_addr = s;
    return a;
}

static void fail_with(char *error, size_t error_size, const char *what) {
    if (error != NULL && error_size > 0) snprintf(error, error_size, "%s: %s", what, strerror(errno));
}

cms_sctp *cms_sctp_new(uint16_t port, int mtu, uint16_t streams, int buffer_bytes, cms_sctp_output_fn output,
                       cms_sctp_upcall_fn upcall, void *context, char *error, size_t error_size) {
    pthread_once(&stack_once, start_stack);
    cms_sctp *s = calloc(1, sizeof *s);
    if (s == NULL) {
        fail_with(error, error_size, "calloc");
        return NULL;
    }
    s->port = port;
    s->output = output;
    s->upcall = upcall;
    s->context = context;
    usrsctp_register_address(s);
    s->sock = usrsctp_socket(AF_CONN, SOCK_STREAM, IPPROTO_SCTP, NULL, NULL, 0, NULL);
    if (s->sock == NULL) {
        fail_with(error, error_size, "usrsctp_socket");
        usrsctp_deregister_address(s);
        free(s);
        return NULL;
    }
    const char *step = NULL;
    if (usrsctp_set_non_blocking(s->sock, 1) < 0) step = "non-blocking";
    // An abort, not a graceful shutdown, when freed: nothing may stay behind the endpoint.
    struct linger linger = {1, 0};
    if (step == NULL && usrsctp_setsockopt(s->sock, SOL_SOCKET, SO_LINGER, &linger, sizeof linger) < 0) step = "SO_LINGER";
    if (step == NULL && usrsctp_setsockopt(s->sock, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes) < 0)
        step = "SO_SNDBUF";
    if (step == NULL && usrsctp_setsockopt(s->sock, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes) < 0)
        step = "SO_RCVBUF";
    struct sctp_assoc_value reset = {SCTP_ALL_ASSOC, SCTP_ENABLE_RESET_STREAM_REQ};
    if (step == NULL && usrsctp_setsockopt(s->sock, IPPROTO_SCTP, SCTP_ENABLE_STREAM_RESET, &reset, sizeof reset) < 0)
        step = "SCTP_ENABLE_STREAM_RESET";
    int on = 1;
    if (step == NULL && usrsctp_setsockopt(s->sock, IPPROTO_SCTP, SCTP_NODELAY, &on, sizeof on) < 0) step = "SCTP_NODELAY";
    if (step == NULL && usrsctp_setsockopt(s->sock, IPPROTO_SCTP, SCTP_RECVRCVINFO, &on, sizeof on) < 0)
        step = "SCTP_RECVRCVINFO";
    struct sctp_initmsg init;
    memset(&init, 0, sizeof init);
    init.sinit_num_ostreams = streams;
    init.sinit_max_instreams = streams;
    if (step == NULL && usrsctp_setsockopt(s->sock, IPPROTO_SCTP, SCTP_INITMSG, &init, sizeof init) < 0) step = "SCTP_INITMSG";
    uint16_t events[] = {SCTP_ASSOC_CHANGE, SCTP_STREAM_RESET_EVENT, SCTP_SEND_FAILED_EVENT, SCTP_SENDER_DRY_EVENT};
    for (size_t i = 0; step == NULL && i < sizeof events / sizeof events[0]; i++) {
        struct sctp_event e;
        memset(&e, 0, sizeof e);
        e.se_assoc_id = SCTP_ALL_ASSOC;
        e.se_type = events[i];
        e.se_on = 1;
        if (usrsctp_setsockopt(s->sock, IPPROTO_SCTP, SCTP_EVENT, &e, sizeof e) < 0) step = "SCTP_EVENT";
    }
    struct sctp_paddrparams params;
    memset(&params, 0, sizeof params);
    params.spp_assoc_id = SCTP_FUTURE_ASSOC;
    params.spp_flags = SPP_PMTUD_DISABLE;
    params.spp_pathmtu = (uint32_t)mtu;
    memcpy(&params.spp_address, &(struct sockaddr_conn){.sconn_family = AF_CONN}, sizeof(struct sockaddr_conn));
    if (step == NULL && usrsctp_setsockopt(s->sock, IPPROTO_SCTP, SCTP_PEER_ADDR_PARAMS, &params, sizeof params) < 0)
        step = "SCTP_PEER_ADDR_PARAMS";
    struct sockaddr_conn local = conn_address(s, port);
    if (step == NULL && usrsctp_bind(s->sock, (struct sockaddr *)&local, sizeof local) < 0) step = "usrsctp_bind";
    if (step != NULL) {
        fail_with(error, error_size, step);
        usrsctp_close(s->sock);
        usrsctp_deregister_address(s);
        free(s);
        return NULL;
    }
    pthread_mutex_lock(&registry_lock);
    s->next = registry;
    registry = s;
    live += 1;
    pthread_cond_broadcast(&registry_changed);
    pthread_mutex_unlock(&registry_lock);
    usrsctp_set_upcall(s->sock, socket_upcall, s);
    return s;
}

int cms_sctp_connect(cms_sctp *s, uint16_t remote_port) {
    struct sockaddr_conn remote = conn_address(s, remote_port);
    int r = usrsctp_connect(s->sock, (struct sockaddr *)&remote, sizeof remote);
    if (r < 0 && errno != EINPROGRESS) return -1;
    return 0;
}

void cms_sctp_input(cms_sctp *s, const void *packet, size_t length) { usrsctp_conninput(s, packet, length, 0); }

long cms_sctp_send(cms_sctp *s, uint16_t stream, uint32_t ppid, int unordered, int pr_policy, uint32_t pr_value,
                   const void *data, size_t length) {
    struct sctp_sendv_spa spa;
    memset(&spa, 0, sizeof spa);
    spa.sendv_flags = SCTP_SEND_SNDINFO_VALID;
    spa.sendv_sndinfo.snd_sid = stream;
    spa.sendv_sndinfo.snd_ppid = htonl(ppid);
    spa.sendv_sndinfo.snd_flags = SCTP_EOR | (unordered ? SCTP_UNORDERED : 0);
    if (pr_policy == SCTP_PR_SCTP_TTL || pr_policy == SCTP_PR_SCTP_RTX) {
        spa.sendv_flags |= SCTP_SEND_PRINFO_VALID;
        spa.sendv_prinfo.pr_policy = (uint16_t)pr_policy;
        spa.sendv_prinfo.pr_value = pr_value;
    }
    ssize_t n = usrsctp_sendv(s->sock, data, length, NULL, 0, &spa, (socklen_t)sizeof spa, SCTP_SENDV_SPA, 0);
    if (n < 0) return (errno == EWOULDBLOCK || errno == EAGAIN) ? CMS_SCTP_WOULD_BLOCK : -1;
    return (long)n;
}

static int notification(const void *bytes, size_t length, void *out, size_t size, cms_sctp_received *info) {
    const union sctp_notification *n = bytes;
    if (length < sizeof n->sn_header) return CMS_SCTP_OTHER;
    switch (n->sn_header.sn_type) {
    case SCTP_ASSOC_CHANGE:
        if (length < sizeof n->sn_assoc_change) return CMS_SCTP_OTHER;
        switch (n->sn_assoc_change.sac_state) {
        case SCTP_COMM_UP: return CMS_SCTP_UP;
        case SCTP_COMM_LOST:
        case SCTP_SHUTDOWN_COMP:
        case SCTP_CANT_STR_ASSOC: return CMS_SCTP_DOWN;
        default: return CMS_SCTP_OTHER;
        }
    case SCTP_STREAM_RESET_EVENT: {
        const struct sctp_stream_reset_event *e = &n->sn_strreset_event;
        if (length < sizeof *e) return CMS_SCTP_OTHER;
        if (!(e->strreset_flags & SCTP_STREAM_RESET_INCOMING_SSN)) return CMS_SCTP_OTHER;
        if (e->strreset_flags & (SCTP_STREAM_RESET_DENIED | SCTP_STREAM_RESET_FAILED)) return CMS_SCTP_OTHER;
        size_t count = (length - sizeof *e) / sizeof(uint16_t);
        if (count * sizeof(uint16_t) > size) count = size / sizeof(uint16_t);
        // The list is moved to the front of `out`, where it already is (the notification was read there).
        memmove(out, e->strreset_stream_list, count * sizeof(uint16_t));
        info->length = count;
        return CMS_SCTP_STREAMS_RESET;
    }
    default: return CMS_SCTP_OTHER;
    }
}

int cms_sctp_receive(cms_sctp *s, void *out, size_t size, cms_sctp_received *info) {
    memset(info, 0, sizeof *info);
    struct sctp_rcvinfo rcv;
    memset(&rcv, 0, sizeof rcv);
    socklen_t rcv_length = sizeof rcv;
    unsigned int info_type = 0;
    int flags = 0;
    ssize_t n = usrsctp_recvv(s->sock, out, size, NULL, NULL, &rcv, &rcv_length, &info_type, &flags);
    if (n < 0) {
        // Not connected yet (the association is still being set up) is nothing to read, not an
        // end: the end comes as an association change notification.
        info->kind = (errno == EWOULDBLOCK || errno == EAGAIN || errno == ENOTCONN) ? CMS_SCTP_NONE : CMS_SCTP_ERROR;
        return info->kind;
    }
    if (n == 0) {
        info->kind = CMS_SCTP_ERROR;  // the socket is shut down
        return info->kind;
    }
    if (flags & MSG_NOTIFICATION) {
        info->kind = notification(out, (size_t)n, out, size, info);
        return info->kind;
    }
    info->kind = CMS_SCTP_DATA;
    info->length = (size_t)n;
    info->end_of_message = (flags & MSG_EOR) ? 1 : 0;
    if (info_type == SCTP_RECVV_RCVINFO) {
        info->stream = rcv.rcv_sid;
        info->ppid = ntohl(rcv.rcv_ppid);
    }
    return info->kind;
}

int cms_sctp_reset_stream(cms_sctp *s, uint16_t stream) {
    size_t length = sizeof(struct sctp_reset_streams) + sizeof(uint16_t);
    struct sctp_reset_streams *r = calloc(1, length);
    if (r == NULL) return -1;
    r->srs_assoc_id = SCTP_ALL_ASSOC;
    r->srs_flags = SCTP_STREAM_RESET_OUTGOING;
    r->srs_number_streams = 1;
    r->srs_stream_list[0] = stream;
    int result = usrsctp_setsockopt(s->sock, IPPROTO_SCTP, SCTP_RESET_STREAMS, r, (socklen_t)length);
    free(r);
    return result < 0 ? -1 : 0;
}

void cms_sctp_free(cms_sctp *s) {
    if (s == NULL) return;
    pthread_mutex_lock(&registry_lock);
    for (cms_sctp **p = &registry; *p != NULL; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            live -= 1;
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    usrsctp_set_upcall(s->sock, NULL, NULL);
    usrsctp_close(s->sock);
    usrsctp_deregister_address(s);
    free(s);
}
