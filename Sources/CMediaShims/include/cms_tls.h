// A TLS client over a connected nonblocking TCP socket, for TURN over TLS (RFC 8656 §3.1, the
// `turns:` scheme of RFC 7065), over OpenSSL's libssl (libssl-dev). Like cms_dtls.h this is a small
// API over C in tls.c rather than a set of one-line shims: the certificate checks need a verify
// callback. OpenSSL reads and writes the socket itself; the caller polls the descriptor when a call
// answers CMS_TLS_WANT_READ or CMS_TLS_WANT_WRITE and calls again.
// Thread rule: one client is used by one thread at a time (the caller serialises reads and writes
// with a lock). Different clients are independent.
#ifndef CMS_TLS_H
#define CMS_TLS_H
#include <stddef.h>
#include <stdint.h>

typedef struct cms_tls cms_tls;

/// Results of cms_tls_handshake, cms_tls_read and cms_tls_write besides a byte count.
enum {
    /// The handshake finished (cms_tls_handshake only).
    CMS_TLS_DONE = 1,
    /// The peer closed the connection (close_notify or end of stream; cms_tls_read only).
    CMS_TLS_CLOSED = 0,
    /// Call again once the socket is readable.
    CMS_TLS_WANT_READ = -2,
    /// Call again once the socket is writable.
    CMS_TLS_WANT_WRITE = -3,
    /// The connection failed; the reason is in cms_tls_error.
    CMS_TLS_FAILED = -1,
};

/// A client for the connected socket `fd` (not owned: the caller closes it after cms_tls_free).
/// TLS 1.2 or 1.3. The server's certificate is checked as follows:
/// - `ca_file` (a PEM file of one or more CA certificates) set: the chain must end at one of them;
///   NULL and no pin: the system's CA store (SSL_CTX_set_default_verify_paths).
/// - `server_name` (a DNS name or a numeric IPv4/IPv6 address): the certificate must name it in its
///   subjectAltName (a DNS name is also sent as SNI). NULL skips the name check (only with a pin).
/// - `sha256_pin` (32 bytes, or NULL): the SHA-256 digest of the leaf certificate's DER encoding
///   must equal it. A pin alone (no `ca_file`) replaces the chain and name checks.
/// Returns NULL when OpenSSL fails to set up (the reason in `error`, `error_size` bytes,
/// NUL-terminated). Cost: one SSL_CTX (and a CA file read) per client.
cms_tls *cms_tls_new(int fd, const char *server_name, const char *ca_file, const unsigned char *sha256_pin,
                     char *error, size_t error_size);

/// Frees the client (no close_notify is sent). NULL is allowed.
void cms_tls_free(cms_tls *t);

/// Advances the handshake: CMS_TLS_DONE, CMS_TLS_WANT_READ, CMS_TLS_WANT_WRITE or CMS_TLS_FAILED
/// (a refused certificate fails here, with the reason in cms_tls_error).
int cms_tls_handshake(cms_tls *t);

/// Reads up to `size` decrypted bytes: their count (> 0), CMS_TLS_CLOSED, CMS_TLS_WANT_READ,
/// CMS_TLS_WANT_WRITE or CMS_TLS_FAILED.
long cms_tls_read(cms_tls *t, void *out, size_t size);

/// Writes `size` bytes (> 0): `size` once all went into one or more records, or CMS_TLS_WANT_READ,
/// CMS_TLS_WANT_WRITE (call again with the same bytes) or CMS_TLS_FAILED.
long cms_tls_write(cms_tls *t, const void *data, size_t size);

/// Decrypted bytes OpenSSL holds that cms_tls_read returns without reading the socket.
int cms_tls_pending(const cms_tls *t);

/// The SHA-256 digest of the server's leaf certificate into `out` (32 bytes). Returns 1, or 0 when
/// the server has presented none yet.
int cms_tls_peer_fingerprint(const cms_tls *t, unsigned char out[32]);

/// The negotiated protocol ("TLSv1.3", "TLSv1.2").
const char *cms_tls_version(const cms_tls *t);

/// What refused the server's certificate after a failed handshake: CMS_TLS_REFUSED_NAME when the
/// certificate does not name the server (its name or address), CMS_TLS_REFUSED_CERTIFICATE for any
/// other verification failure (unknown CA, expired, pin mismatch), 0 when the certificate was not
/// the reason.
int cms_tls_refusal(const cms_tls *t);

enum {
    CMS_TLS_REFUSED_CERTIFICATE = 1,
    CMS_TLS_REFUSED_NAME = 2,
};

/// Why the last call failed into `out` (NUL-terminated); its length.
size_t cms_tls_error(const cms_tls *t, char *out, size_t size);

#endif
