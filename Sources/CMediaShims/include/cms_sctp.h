// SCTP over DTLS for WebRTC data channels (RFC 8261, RFC 8831) over Debian's libusrsctp
// (libusrsctp-dev), in its AF_CONN mode: usrsctp never sees a socket. Packets the peer sent come in
// through cms_sctp_input (the DTLS application data), and every packet usrsctp wants to send goes
// to the `output` callback (to be sent as DTLS application data). Like dtls.c this is more than
// one-line shims, because usrsctp calls back into it.
//
// The stack runs without threads of its own (usrsctp_init_nothreads): one process-wide timer
// thread of this file drives usrsctp's timers every 10 ms while any association exists. Thread
// rule: one association is used by one thread (or serial queue) at a time; `output` and `upcall`
// are called on that thread inside cms_sctp_* calls, and also on the timer thread (retransmissions,
// acknowledgements), so they must hand their work to the owner and not call cms_sctp_* themselves.
// Different associations are independent.
#ifndef CMS_SCTP_H
#define CMS_SCTP_H
#include <stddef.h>
#include <stdint.h>

typedef struct cms_sctp cms_sctp;

/// A packet usrsctp wants sent; `packet` is only valid during the call.
typedef void (*cms_sctp_output_fn)(void *context, const void *packet, size_t length);
/// The association has something to read or room to write again (see cms_sctp_receive).
typedef void (*cms_sctp_upcall_fn)(void *context);

/// What cms_sctp_receive returned.
enum {
    /// Nothing to read now.
    CMS_SCTP_NONE = 0,
    /// User data of `stream` with `ppid`; `end_of_message` says whether it ends the message.
    CMS_SCTP_DATA = 1,
    /// The association is up (both sides' INIT exchange finished).
    CMS_SCTP_UP = 2,
    /// The association is gone (lost, shut down, or never came up).
    CMS_SCTP_DOWN = 3,
    /// The peer reset incoming streams: their ids (uint16) are in `out`, their count is the result's length.
    CMS_SCTP_STREAMS_RESET = 4,
    /// Another notification, ignored.
    CMS_SCTP_OTHER = 5,
    /// The socket failed or closed.
    CMS_SCTP_ERROR = -1,
};

/// One received piece, as cms_sctp_receive fills it in.
typedef struct {
    int kind;
    uint16_t stream;
    uint32_t ppid;
    int end_of_message;
    size_t length;
} cms_sctp_received;

/// What cms_sctp_send returns when the send buffer has no room now (try again after the upcall).
#define CMS_SCTP_WOULD_BLOCK (-2)

/// A new association endpoint on SCTP port `port`, sending packets of at most `mtu` bytes (path MTU
/// discovery off), with `streams` streams each way offered, send and receive buffers of
/// `buffer_bytes`. `context` is passed to both callbacks until cms_sctp_free returns. Returns NULL
/// when usrsctp refuses (the reason in `error`).
cms_sctp *cms_sctp_new(uint16_t port, int mtu, uint16_t streams, int buffer_bytes, cms_sctp_output_fn output,
                       cms_sctp_upcall_fn upcall, void *context, char *error, size_t error_size);

/// Starts the association to the peer's SCTP port (both WebRTC peers do: a simultaneous open).
/// Returns 0, or -1 (errno) when usrsctp refuses at once.
int cms_sctp_connect(cms_sctp *s, uint16_t remote_port);

/// Hands one SCTP packet the peer sent (a DTLS application data record's payload) to usrsctp.
void cms_sctp_input(cms_sctp *s, const void *packet, size_t length);

/// Sends one whole message on `stream` with `ppid`: ordered or not; `pr_policy` 0 reliable,
/// 1 limited by lifetime (`pr_value` ms), 3 limited by retransmissions (`pr_value` times).
/// Returns the length, CMS_SCTP_WOULD_BLOCK when the send buffer has no room for it now, or -1.
long cms_sctp_send(cms_sctp *s, uint16_t stream, uint32_t ppid, int unordered, int pr_policy, uint32_t pr_value,
                   const void *data, size_t length);

/// Reads the next piece (data or notification) without blocking into `out` (`size` bytes), its
/// description into `info`. Returns the kind (also in `info->kind`).
int cms_sctp_receive(cms_sctp *s, void *out, size_t size, cms_sctp_received *info);

/// Resets our outgoing `stream` (RFC 6525), which closes a data channel (RFC 8831 section 6.7).
/// Returns 0, or -1.
int cms_sctp_reset_stream(cms_sctp *s, uint16_t stream);

/// Aborts the association, stops both callbacks and frees the endpoint. NULL is allowed. Once it
/// returns neither callback runs for this endpoint again.
void cms_sctp_free(cms_sctp *s);

#endif
