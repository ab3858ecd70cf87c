// A DTLS 1.2 endpoint for DTLS-SRTP (RFC 5763, RFC 5764) over OpenSSL's libssl (libssl-dev).
// Unlike the other headers this is not a set of one-line shims: the certificate generation, the
// verify and info callbacks and the datagram BIO need C callbacks, so they live in dtls.c behind
// this small API. OpenSSL never sees a socket: datagrams come in through cms_dtls_feed and go out
// through a queue the caller drains with cms_dtls_next_datagram, so the endpoint can run over any
// transport (the ICE agent's selected pair, an in-memory link in tests).
// Thread rule: one endpoint is used by one thread at a time. Different endpoints are independent.
#ifndef CMS_DTLS_H
#define CMS_DTLS_H
#include <stddef.h>
#include <stdint.h>

typedef struct cms_dtls cms_dtls;
/// An ECDSA P-256 key and its self-signed certificate, shared read only by any number of
/// endpoints (each takes a reference), so that several connections present one fingerprint.
typedef struct cms_dtls_identity cms_dtls_identity;

/// Handshake progress as cms_dtls_handshake reports it.
enum {
    CMS_DTLS_IN_PROGRESS = 0,
    CMS_DTLS_DONE = 1,
    CMS_DTLS_FAILED = -1,
};

/// SRTP protection profiles of RFC 5764 section 4.1.2 and RFC 7714 section 14.2 (the use_srtp ids).
enum {
    CMS_DTLS_SRTP_AES128_CM_SHA1_80 = 0x0001,
    CMS_DTLS_SRTP_AES128_CM_SHA1_32 = 0x0002,
    CMS_DTLS_SRTP_AEAD_AES_128_GCM = 0x0007,
    CMS_DTLS_SRTP_AEAD_AES_256_GCM = 0x0008,
};

/// A new endpoint with a fresh ECDSA P-256 key and a self-signed certificate (random 64-bit serial,
/// valid from one hour ago for `validity_days`). `is_client` 1 starts the handshake (a=setup:active),
/// 0 answers it. `mtu` is the largest datagram the endpoint writes. `initial_timeout_ms` is the
/// first retransmission timeout; it doubles on each expiry up to `max_timeout_ms`. `srtp_profiles`
/// lists the use_srtp profiles offered, most preferred first, in OpenSSL's colon-separated names
/// ("SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80"). Returns NULL when OpenSSL fails (the reason
/// is then in `error`, `error_size` bytes, NUL-terminated).
cms_dtls *cms_dtls_new(int is_client, int mtu, unsigned initial_timeout_ms, unsigned max_timeout_ms,
                       int validity_days, const char *srtp_profiles, char *error, size_t error_size);

/// As cms_dtls_new, presenting `identity` (its key and certificate; `validity_days` is then
/// unused) instead of a fresh one when it is not NULL. The endpoint holds its own references:
/// `identity` may be freed before it.
cms_dtls *cms_dtls_new_with_identity(int is_client, int mtu, unsigned initial_timeout_ms, unsigned max_timeout_ms,
                                     int validity_days, const cms_dtls_identity *identity, const char *srtp_profiles,
                                     char *error, size_t error_size);

/// A fresh ECDSA P-256 key and a self-signed certificate as cms_dtls_new makes them, for
/// cms_dtls_new_with_identity. Returns NULL when OpenSSL fails (the reason in `error`).
cms_dtls_identity *cms_dtls_identity_new(int validity_days, char *error, size_t error_size);

/// Drops the caller's reference (endpoints made with it keep theirs). NULL is ignored.
void cms_dtls_identity_free(cms_dtls_identity *identity);

/// The SHA-256 digest of the identity's certificate into `out` (32 bytes).
void cms_dtls_identity_fingerprint(const cms_dtls_identity *identity, unsigned char out[32]);

/// Changes the role of an endpoint that has not started a handshake: `is_client` 1 starts it
/// (a=setup:active), 0 answers it. For a peer connection whose offer advertised a certificate
/// before the answer chose the roles.
void cms_dtls_set_client(cms_dtls *d, int is_client);

/// Frees the endpoint, its key, certificate and queued datagrams. NULL is allowed.
void cms_dtls_free(cms_dtls *d);

/// The SHA-256 digest of our certificate's DER encoding into `out` (32 bytes). Returns 1.
int cms_dtls_fingerprint(const cms_dtls *d, unsigned char out[32]);

/// Our certificate in PEM form into `out` (at most `size` bytes, NUL-terminated); its length, or 0.
size_t cms_dtls_certificate_pem(const cms_dtls *d, char *out, size_t size);

/// The SHA-256 digest of the certificate the peer presented into `out` (32 bytes).
/// Returns 1, or 0 when the peer has presented none yet.
int cms_dtls_peer_fingerprint(const cms_dtls *d, unsigned char out[32]);

/// Hands one received datagram to OpenSSL and advances the handshake (or, once done, keeps
/// application data for cms_dtls_next_application_data and notices close_notify). Returns the handshake progress.
int cms_dtls_feed(cms_dtls *d, const void *datagram, size_t length);

/// Advances the handshake without input (the client's first flight). Returns the progress.
int cms_dtls_handshake(cms_dtls *d);

/// Microseconds until OpenSSL's retransmission timer expires (0 when it has), or -1 when no timer
/// runs (no flight is outstanding).
int64_t cms_dtls_timeout_us(cms_dtls *d);

/// Retransmits the outstanding flight if its timer has expired. Returns 1 when a flight was
/// resent, 0 when the timer had not expired or none runs, -1 when OpenSSL gave up.
int cms_dtls_handle_timeout(cms_dtls *d);

/// Moves the oldest queued outgoing datagram into `out` (`size` bytes). Returns its length, 0 when
/// the queue is empty, or -1 when `size` is too small (the datagram stays queued).
long cms_dtls_next_datagram(cms_dtls *d, void *out, size_t size);

/// The negotiated SRTP protection profile id (CMS_DTLS_SRTP_*), or 0 when none was agreed.
int cms_dtls_srtp_profile(const cms_dtls *d);

/// Exports `length` bytes of keying material with the RFC 5764 label "EXTRACTOR-dtls_srtp"
/// (no context) into `out`. Returns 1 on success; only valid once the handshake is done.
int cms_dtls_export_srtp(cms_dtls *d, unsigned char *out, size_t length);

/// The last alert the peer sent: its description code (RFC 5246 section 7.2), or -1 for none.
/// `fatal` is set to 1 when it was a fatal alert.
int cms_dtls_peer_alert(const cms_dtls *d, int *fatal);

/// 1 when the peer closed the connection (close_notify received), else 0.
int cms_dtls_peer_closed(const cms_dtls *d);

/// How many times a flight was resent because its retransmission timer expired.
long cms_dtls_retransmissions(const cms_dtls *d);

/// OpenSSL's reason for the last failure into `out` (NUL-terminated); its length.
size_t cms_dtls_error(const cms_dtls *d, char *out, size_t size);

/// The long name of an alert description code ("bad certificate", "handshake failure"...).
const char *cms_dtls_alert_name(int code);

/// Encrypts `length` bytes (1 to 16384) as one application data record, queued as an outgoing
/// datagram (SCTP over DTLS, RFC 8261). Returns 1, or -1 before the handshake is done, after it
/// failed or closed, or when OpenSSL refuses.
int cms_dtls_write(cms_dtls *d, const void *data, size_t length);

/// Moves the oldest received application data record's plaintext into `out` (`size` bytes).
/// Returns its length, 0 when none is waiting, or -1 when `size` is too small (it stays queued).
/// At most 64 records wait; more are dropped and counted.
long cms_dtls_next_application_data(cms_dtls *d, void *out, size_t size);

/// Application data records dropped because 64 were already waiting.
long cms_dtls_application_data_dropped(const cms_dtls *d);

/// Sends close_notify (queued as an outgoing datagram).
void cms_dtls_close(cms_dtls *d);

#endif
