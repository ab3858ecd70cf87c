// The DTLS-SRTP endpoint declared in cms_dtls.h: OpenSSL's DTLS state machine over a datagram BIO
// of our own that keeps every datagram in memory. See docs/dtls.md for the design.
#include "cms_dtls.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/srtp.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Outgoing datagrams waiting for the caller: a bounded FIFO. When the caller does not drain it,
// the newest datagrams are dropped (DTLS retransmits a lost flight).
#define CMS_DTLS_QUEUE_MAX 64

struct cms_datagram {
    unsigned char *bytes;
    size_t length;
};

struct cms_dtls {
    SSL_CTX *ctx;
    SSL *ssl;
    EVP_PKEY *key;
    X509 *cert;
    unsigned char fingerprint[32];
    int mtu;
    unsigned initial_timeout_us, max_timeout_us;
    // The datagram being fed, borrowed for the duration of cms_dtls_feed; NULL once read.
    const unsigned char *in;
    size_t in_length;
    struct cms_datagram queue[CMS_DTLS_QUEUE_MAX];
    int queue_head, queue_count;
    // Application data the peer sent (SCTP packets of data channels), in order, until the
    // caller drains it with cms_dtls_next_application_data; bounded like the outgoing queue.
    struct cms_datagram received[CMS_DTLS_QUEUE_MAX];
    int received_head, received_count;
    long received_dropped;
    // One record's plaintext (at most 2^14 bytes, RFC 6347 section 4.1).
    unsigned char plaintext[16384];
    int done, failed, closed;
    int alert, alert_fatal;
    long retransmissions;
    char error[256];
};

// MARK: the datagram BIO

// Each BIO_write from OpenSSL is one DTLS datagram (OpenSSL writes a record at a time, sized to the
// MTU), kept whole; each BIO_read returns the one datagram being fed. A plain memory BIO would
// join the records into a byte stream and lose the datagram boundaries DTLS depends on.

static int bio_write(BIO *b, const char *data, int length) {
    cms_dtls *d = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (length <= 0) return 0;
    if (d->queue_count == CMS_DTLS_QUEUE_MAX) return length;  // dropped; the flight is resent
    unsigned char *copy = malloc((size_t)length);
    if (copy == NULL) return length;
    memcpy(copy, data, (size_t)length);
    int slot = (d->queue_head + d->queue_count) % CMS_DTLS_QUEUE_MAX;
    d->queue[slot].bytes = copy;
    d->queue[slot].length = (size_t)length;
    d->queue_count += 1;
    return length;
}

static int bio_read(BIO *b, char *out, int size) {
    cms_dtls *d = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (d->in == NULL) {
        BIO_set_retry_read(b);
        return -1;
    }
    size_t n = d->in_length < (size_t)size ? d->in_length : (size_t)size;
    memcpy(out, d->in, n);
    d->in = NULL;
    d->in_length = 0;
    return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr) {
    (void)num;
    (void)ptr;
    cms_dtls *d = BIO_get_data(b);
    switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;
    case BIO_CTRL_PENDING: return d->in != NULL ? (long)d->in_length : 0;
    case BIO_CTRL_WPENDING: return 0;
    case BIO_CTRL_DGRAM_QUERY_MTU:
    case BIO_CTRL_DGRAM_GET_FALLBACK_MTU: return d->mtu;
    case BIO_CTRL_DGRAM_GET_MTU_OVERHEAD: return 0;
    default: return 0;
    }
}

static int bio_create(BIO *b) {
    BIO_set_init(b, 1);
    return 1;
}

static int bio_destroy(BIO *b) {
    (void)b;
    return 1;
}

static BIO_METHOD *datagram_method;
static pthread_once_t datagram_method_once = PTHREAD_ONCE_INIT;

static void make_datagram_method(void) {
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "revue dtls datagrams");
    if (m == NULL) return;
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_read(m, bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    BIO_meth_set_create(m, bio_create);
    BIO_meth_set_destroy(m, bio_destroy);
    datagram_method = m;
}

// MARK: callbacks

// The peer's certificate is self-signed and checked by fingerprint after the handshake (RFC 5763
// section 5), so chain verification is not applied: any certificate is accepted here.
static int accept_any_certificate(int preverified, X509_STORE_CTX *store) {
    (void)preverified;
    (void)store;
    return 1;
}

static void info_callback(const SSL *ssl, int where, int value) {
    cms_dtls *d = SSL_get_app_data(ssl);
    if (d == NULL) return;
    if ((where & SSL_CB_READ_ALERT) == SSL_CB_READ_ALERT) {
        d->alert = value & 0xff;
        d->alert_fatal = (value >> 8) == SSL3_AL_FATAL;
    }
}

// Retransmission timer: the first timeout, then doubling up to the maximum (RFC 6347 section 4.2.4.1).
static unsigned int timer_callback(SSL *ssl, unsigned int previous_us) {
    cms_dtls *d = SSL_get_app_data(ssl);
    if (previous_us == 0) return d->initial_timeout_us;
    // A running timer expired: OpenSSL resends the flight after this call, wherever the expiry
    // was noticed (DTLSv1_handle_timeout, or a read that found no datagram).
    d->retransmissions += 1;
    unsigned long long next = (unsigned long long)previous_us * 2;
    return next > d->max_timeout_us ? d->max_timeout_us : (unsigned int)next;
}

// MARK: setup

static void set_error(cms_dtls *d, const char *what) {
    unsigned long e = ERR_peek_last_error();
    char reason[160] = "";
    if (e != 0) ERR_error_string_n(e, reason, sizeof reason);
    snprintf(d->error, sizeof d->error, "%s%s%s", what, reason[0] ? ": " : "", reason);
    ERR_clear_error();
}

// A fresh ECDSA P-256 key and a self-signed certificate for it into *key and *cert (each set as
// soon as made, so that the caller frees them on failure), and the certificate's SHA-256 digest.
static int generate_identity(EVP_PKEY **key, X509 **cert, unsigned char fingerprint[32], int validity_days) {
    *key = EVP_EC_gen("P-256");
    if (*key == NULL) return 0;
    *cert = X509_new();
    if (*cert == NULL || !X509_set_version(*cert, 2)) return 0;
    unsigned char serial[8];
    if (RAND_bytes(serial, sizeof serial) != 1) return 0;
    serial[0] &= 0x7f;  // a positive INTEGER
    BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
    int ok = bn != NULL && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(*cert)) != NULL;
    BN_free(bn);
    if (!ok) return 0;
    if (X509_gmtime_adj(X509_getm_notBefore(*cert), -3600) == NULL) return 0;
    if (X509_gmtime_adj(X509_getm_notAfter(*cert), (long)validity_days * 86400) == NULL) return 0;
    if (!X509_set_pubkey(*cert, *key)) return 0;
    char name[32];
    snprintf(name, sizeof name, "revue-%02x%02x%02x%02x", serial[4], serial[5], serial[6], serial[7]);
    X509_NAME *subject = X509_get_subject_name(*cert);
    if (!X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, (const unsigned char *)name, -1, -1, 0)) return 0;
    if (!X509_set_issuer_name(*cert, subject)) return 0;
    if (X509_sign(*cert, *key, EVP_sha256()) <= 0) return 0;
    unsigned int length = 0;
    return X509_digest(*cert, EVP_sha256(), fingerprint, &length) == 1 && length == 32;
}

static int make_certificate(cms_dtls *d, int validity_days) {
    return generate_identity(&d->key, &d->cert, d->fingerprint, validity_days);
}

struct cms_dtls_identity {
    EVP_PKEY *key;
    X509 *cert;
    unsigned char fingerprint[32];
};

cms_dtls_identity *cms_dtls_identity_new(int validity_days, char *error, size_t error_size) {
    cms_dtls_identity *identity = calloc(1, sizeof *identity);
    if (identity == NULL) return NULL;
    ERR_clear_error();
    if (!generate_identity(&identity->key, &identity->cert, identity->fingerprint, validity_days)) {
        unsigned long e = ERR_peek_last_error();
        char reason[160] = "";
        if (e != 0) ERR_error_string_n(e, reason, sizeof reason);
        if (error != NULL && error_size > 0) snprintf(error, error_size, "certificate generation%s%s", reason[0] ? ": " : "", reason);
        ERR_clear_error();
        cms_dtls_identity_free(identity);
        return NULL;
    }
    return identity;
}

void cms_dtls_identity_free(cms_dtls_identity *identity) {
    if (identity == NULL) return;
    X509_free(identity->cert);
    EVP_PKEY_free(identity->key);
    free(identity);
}

void cms_dtls_identity_fingerprint(const cms_dtls_identity *identity, unsigned char out[32]) {
    memcpy(out, identity->fingerprint, 32);
}

void cms_dtls_set_client(cms_dtls *d, int is_client) {
    if (is_client) SSL_set_connect_state(d->ssl);
    else SSL_set_accept_state(d->ssl);
}

cms_dtls *cms_dtls_new(int is_client, int mtu, unsigned initial_timeout_ms, unsigned max_timeout_ms,
                       int validity_days, const char *srtp_profiles, char *error, size_t error_size) {
    return cms_dtls_new_with_identity(is_client, mtu, initial_timeout_ms, max_timeout_ms, validity_days, NULL,
                                      srtp_profiles, error, error_size);
}

cms_dtls *cms_dtls_new_with_identity(int is_client, int mtu, unsigned initial_timeout_ms, unsigned max_timeout_ms,
                                     int validity_days, const cms_dtls_identity *identity, const char *srtp_profiles,
                                     char *error, size_t error_size) {
    cms_dtls *d = calloc(1, sizeof *d);
    if (d == NULL) return NULL;
    d->mtu = mtu;
    d->alert = -1;
    d->initial_timeout_us = initial_timeout_ms * 1000u;
    d->max_timeout_us = max_timeout_ms * 1000u;
    const char *step = "";
    ERR_clear_error();
    pthread_once(&datagram_method_once, make_datagram_method);
    if (datagram_method == NULL) { step = "BIO_meth_new"; goto fail; }
    if (identity != NULL) {
        // Shared, read only: each endpoint holds a reference to the key and the certificate.
        if (!EVP_PKEY_up_ref(identity->key)) { step = "key reference"; goto fail; }
        d->key = identity->key;
        if (!X509_up_ref(identity->cert)) { step = "certificate reference"; goto fail; }
        d->cert = identity->cert;
        memcpy(d->fingerprint, identity->fingerprint, 32);
    } else if (!make_certificate(d, validity_days)) {
        step = "certificate generation";
        goto fail;
    }

    d->ctx = SSL_CTX_new(DTLS_method());
    if (d->ctx == NULL) { step = "SSL_CTX_new"; goto fail; }
    if (!SSL_CTX_set_min_proto_version(d->ctx, DTLS1_2_VERSION) ||
        !SSL_CTX_set_max_proto_version(d->ctx, DTLS1_2_VERSION)) { step = "DTLS 1.2 only"; goto fail; }
    if (SSL_CTX_use_certificate(d->ctx, d->cert) != 1 || SSL_CTX_use_PrivateKey(d->ctx, d->key) != 1 ||
        SSL_CTX_check_private_key(d->ctx) != 1) { step = "certificate and key"; goto fail; }
    // ECDHE only (forward secrecy), ECDSA for our certificate, RSA accepted from the peer.
    if (SSL_CTX_set_cipher_list(d->ctx,
            "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
            "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
            "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
            "ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES128-SHA") != 1) { step = "cipher list"; goto fail; }
    // Note the inverted convention: 0 is success.
    if (SSL_CTX_set_tlsext_use_srtp(d->ctx, srtp_profiles) != 0) {
        step = "use_srtp profiles";
        goto fail;
    }
    SSL_CTX_set_verify(d->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, accept_any_certificate);
    // No renegotiation: the SRTP keys are exported once, and a second handshake would only let a
    // peer make OpenSSL work without changing them.
    SSL_CTX_set_options(d->ctx, SSL_OP_NO_QUERY_MTU | SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);

    d->ssl = SSL_new(d->ctx);
    if (d->ssl == NULL) { step = "SSL_new"; goto fail; }
    SSL_set_app_data(d->ssl, d);
    SSL_set_info_callback(d->ssl, info_callback);
    DTLS_set_timer_cb(d->ssl, timer_callback);
    BIO *bio = BIO_new(datagram_method);
    if (bio == NULL) { step = "BIO_new"; goto fail; }
    BIO_set_data(bio, d);
    SSL_set_bio(d->ssl, bio, bio);  // one reference serves both directions
    if (!SSL_set_mtu(d->ssl, mtu)) { step = "MTU"; goto fail; }
    if (is_client) SSL_set_connect_state(d->ssl);
    else SSL_set_accept_state(d->ssl);
    return d;

fail:
    set_error(d, step);
    if (error != NULL && error_size > 0) snprintf(error, error_size, "%s", d->error);
    cms_dtls_free(d);
    return NULL;
}

void cms_dtls_free(cms_dtls *d) {
    if (d == NULL) return;
    SSL_free(d->ssl);
    SSL_CTX_free(d->ctx);
    X509_free(d->cert);
    EVP_PKEY_free(d->key);
    for (int i = 0; i < d->queue_count; i++) {
        struct cms_datagram *g = &d->queue[(d->queue_head + i) % CMS_DTLS_QUEUE_MAX];
        free(g->bytes);
    }
    for (int i = 0; i < d->received_count; i++) {
        struct cms_datagram *g = &d->received[(d->received_head + i) % CMS_DTLS_QUEUE_MAX];
        OPENSSL_clear_free(g->bytes, g->length);
    }
    OPENSSL_cleanse(d->plaintext, sizeof d->plaintext);
    free(d);
}

// MARK: identity

int cms_dtls_fingerprint(const cms_dtls *d, unsigned char out[32]) {
    memcpy(out, d->fingerprint, 32);
    return 1;
}

size_t cms_dtls_certificate_pem(const cms_dtls *d, char *out, size_t size) {
    BIO *mem = BIO_new(BIO_s_mem());
    if (mem == NULL) return 0;
    size_t length = 0;
    if (PEM_write_bio_X509(mem, d->cert) == 1) {
        char *data = NULL;
        long n = BIO_get_mem_data(mem, &data);
        if (n > 0 && (size_t)n < size) {
            memcpy(out, data, (size_t)n);
            out[n] = 0;
            length = (size_t)n;
        }
    }
    BIO_free(mem);
    return length;
}

int cms_dtls_peer_fingerprint(const cms_dtls *d, unsigned char out[32]) {
    X509 *peer = SSL_get0_peer_certificate(d->ssl);
    unsigned int length = 0;
    return peer != NULL && X509_digest(peer, EVP_sha256(), out, &length) == 1 && length == 32;
}

// MARK: driving

static void record_failure(cms_dtls *d, int ssl_error) {
    d->failed = 1;
    if (ssl_error == SSL_ERROR_SSL) set_error(d, "DTLS handshake failed");
    else {
        snprintf(d->error, sizeof d->error, "DTLS handshake failed (SSL_get_error %d)", ssl_error);
        ERR_clear_error();
    }
}

// After the handshake: application data (SCTP packets of data channels, RFC 8261) is kept for
// cms_dtls_next_application_data; reading also lets OpenSSL answer a retransmitted final flight of
// the peer and notice close_notify.
static void keep_application_data(cms_dtls *d, int length) {
    if (d->received_count == CMS_DTLS_QUEUE_MAX) {
        d->received_dropped += 1;  // SCTP retransmits what is lost
        return;
    }
    unsigned char *copy = malloc((size_t)length);
    if (copy == NULL) {
        d->received_dropped += 1;
        return;
    }
    memcpy(copy, d->plaintext, (size_t)length);
    int slot = (d->received_head + d->received_count) % CMS_DTLS_QUEUE_MAX;
    d->received[slot].bytes = copy;
    d->received[slot].length = (size_t)length;
    d->received_count += 1;
}

static void read_after_handshake(cms_dtls *d) {
    for (int i = 0; i < 64; i++) {
        ERR_clear_error();
        int n = SSL_read(d->ssl, d->plaintext, sizeof d->plaintext);
        if (n > 0) {
            keep_application_data(d, n);
            continue;
        }
        int e = SSL_get_error(d->ssl, n);
        if (e == SSL_ERROR_ZERO_RETURN) d->closed = 1;
        else if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            // A fatal alert from the peer, or OpenSSL gave up on the connection.
            if (d->alert_fatal || (SSL_get_shutdown(d->ssl) & SSL_RECEIVED_SHUTDOWN)) d->closed = 1;
            ERR_clear_error();
        }
        break;
    }
}

static int advance(cms_dtls *d) {
    if (d->failed) return CMS_DTLS_FAILED;
    if (d->done) {
        if (!d->closed) read_after_handshake(d);
        return CMS_DTLS_DONE;
    }
    ERR_clear_error();
    int r = SSL_do_handshake(d->ssl);
    if (r == 1) {
        d->done = 1;
        // Records that followed the last handshake message in the same datagram.
        read_after_handshake(d);
        return CMS_DTLS_DONE;
    }
    int e = SSL_get_error(d->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return CMS_DTLS_IN_PROGRESS;
    record_failure(d, e);
    return CMS_DTLS_FAILED;
}

int cms_dtls_feed(cms_dtls *d, const void *datagram, size_t length) {
    if (d->failed) return CMS_DTLS_FAILED;
    d->in = datagram;
    d->in_length = length;
    int state = advance(d);
    d->in = NULL;
    d->in_length = 0;
    return state;
}

int cms_dtls_handshake(cms_dtls *d) { return advance(d); }

int64_t cms_dtls_timeout_us(cms_dtls *d) {
    if (d->failed || d->done) return -1;
    struct timeval tv;
    if (!DTLSv1_get_timeout(d->ssl, &tv)) return -1;
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

int cms_dtls_handle_timeout(cms_dtls *d) {
    if (d->failed || d->done) return 0;
    ERR_clear_error();
    int r = (int)DTLSv1_handle_timeout(d->ssl);
    if (r > 0) return 1;
    if (r == 0) return 0;
    record_failure(d, SSL_ERROR_SSL);
    return -1;
}

long cms_dtls_next_datagram(cms_dtls *d, void *out, size_t size) {
    if (d->queue_count == 0) return 0;
    struct cms_datagram *g = &d->queue[d->queue_head];
    if (g->length > size) return -1;
    size_t length = g->length;
    memcpy(out, g->bytes, length);
    free(g->bytes);
    g->bytes = NULL;
    d->queue_head = (d->queue_head + 1) % CMS_DTLS_QUEUE_MAX;
    d->queue_count -= 1;
    return (long)length;
}

// MARK: application data

int cms_dtls_write(cms_dtls *d, const void *data, size_t length) {
    if (!d->done || d->failed || d->closed || length == 0 || length > sizeof d->plaintext) return -1;
    ERR_clear_error();
    int n = SSL_write(d->ssl, data, (int)length);
    if (n != (int)length) {
        ERR_clear_error();
        return -1;
    }
    return 1;
}

long cms_dtls_next_application_data(cms_dtls *d, void *out, size_t size) {
    if (d->received_count == 0) return 0;
    struct cms_datagram *g = &d->received[d->received_head];
    if (g->length > size) return -1;
    size_t length = g->length;
    memcpy(out, g->bytes, length);
    OPENSSL_clear_free(g->bytes, length);
    g->bytes = NULL;
    d->received_head = (d->received_head + 1) % CMS_DTLS_QUEUE_MAX;
    d->received_count -= 1;
    return (long)length;
}

long cms_dtls_application_data_dropped(const cms_dtls *d) { return d->received_dropped; }

// MARK: results

int cms_dtls_srtp_profile(const cms_dtls *d) {
    if (!d->done) return 0;
    SRTP_PROTECTION_PROFILE *p = SSL_get_selected_srtp_profile(d->ssl);
    return p != NULL ? (int)p->id : 0;
}

int cms_dtls_export_srtp(cms_dtls *d, unsigned char *out, size_t length) {
    if (!d->done || d->failed) return 0;
    static const char label[] = "EXTRACTOR-dtls_srtp";
    return SSL_export_keying_material(d->ssl, out, length, label, sizeof label - 1, NULL, 0, 0) == 1;
}

int cms_dtls_peer_alert(const cms_dtls *d, int *fatal) {
    if (fatal != NULL) *fatal = d->alert_fatal;
    return d->alert;
}

int cms_dtls_peer_closed(const cms_dtls *d) { return d->closed; }

long cms_dtls_retransmissions(const cms_dtls *d) { return d->retransmissions; }

size_t cms_dtls_error(const cms_dtls *d, char *out, size_t size) {
    if (size == 0) return 0;
    snprintf(out, size, "%s", d->error);
    return strlen(out);
}

const char *cms_dtls_alert_name(int code) { return SSL_alert_desc_string_long(code); }

void cms_dtls_close(cms_dtls *d) {
    if (d->done && !d->failed && !d->closed) {
        ERR_clear_error();
        SSL_shutdown(d->ssl);
        ERR_clear_error();
    }
}
