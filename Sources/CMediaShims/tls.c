// The TLS client declared in cms_tls.h: OpenSSL on a connected nonblocking socket, with the server
// certificate checked against a CA file (or the system store), the server's name or address, and
// an optional SHA-256 pin. Used by the TURN client's TLS transport (docs/ice.md).
#include "cms_tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cms_tls {
    SSL_CTX *ctx;
    SSL *ssl;
    int pinned;
    unsigned char pin[32];
    char error[320];
};

static void set_error(cms_tls *t, const char *what) {
    unsigned long e = ERR_peek_last_error();
    char reason[200] = "";
    if (e != 0) ERR_error_string_n(e, reason, sizeof reason);
    snprintf(t->error, sizeof t->error, "%s%s%s", what, reason[0] ? ": " : "", reason);
    ERR_clear_error();
}

// With a pin and no CA file the chain and name are not checked: the pin is compared once the
// handshake is done (cms_tls_handshake).
static int accept_any_certificate(int preverified, X509_STORE_CTX *store) {
    (void)preverified;
    (void)store;
    return 1;
}

cms_tls *cms_tls_new(int fd, const char *server_name, const char *ca_file, const unsigned char *sha256_pin,
                     char *error, size_t error_size) {
    cms_tls *t = calloc(1, sizeof *t);
    if (t == NULL) return NULL;
    const char *step = "";
    ERR_clear_error();
    t->ctx = SSL_CTX_new(TLS_client_method());
    if (t->ctx == NULL) { step = "SSL_CTX_new"; goto fail; }
    if (!SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION)) { step = "TLS 1.2 or later"; goto fail; }
    SSL_CTX_set_options(t->ctx, SSL_OP_NO_RENEGOTIATION);
    if (sha256_pin != NULL) {
        t->pinned = 1;
        memcpy(t->pin, sha256_pin, 32);
    }
    if (ca_file != NULL) {
        if (SSL_CTX_load_verify_locations(t->ctx, ca_file, NULL) != 1) { step = "reading the CA file"; goto fail; }
        SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    } else if (t->pinned) {
        SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, accept_any_certificate);
    } else {
        if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) { step = "the system CA store"; goto fail; }
        SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    }
    t->ssl = SSL_new(t->ctx);
    if (t->ssl == NULL) { step = "SSL_new"; goto fail; }
    if (server_name != NULL && (ca_file != NULL || !t->pinned)) {
        unsigned char ip[16];
        int numeric = inet_pton(AF_INET, server_name, ip) == 1 || inet_pton(AF_INET6, server_name, ip) == 1;
        if (numeric) {
            if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), server_name) != 1) {
                step = "the server address to check";
                goto fail;
            }
        } else {
            if (SSL_set1_host(t->ssl, server_name) != 1) { step = "the server name to check"; goto fail; }
            SSL_set_tlsext_host_name(t->ssl, server_name);
        }
    } else if (server_name != NULL) {
        unsigned char ip[16];
        if (inet_pton(AF_INET, server_name, ip) != 1 && inet_pton(AF_INET6, server_name, ip) != 1) {
            SSL_set_tlsext_host_name(t->ssl, server_name);
        }
    }
    if (SSL_set_fd(t->ssl, fd) != 1) { step = "SSL_set_fd"; goto fail; }
    SSL_set_connect_state(t->ssl);
    return t;

fail:
    set_error(t, step);
    if (error != NULL && error_size > 0) snprintf(error, error_size, "%s", t->error);
    cms_tls_free(t);
    return NULL;
}

void cms_tls_free(cms_tls *t) {
    if (t == NULL) return;
    SSL_free(t->ssl);
    SSL_CTX_free(t->ctx);
    free(t);
}

// The result of an SSL call that returned `rc` <= 0, with the failure's reason recorded.
static int outcome(cms_tls *t, int rc, const char *what) {
    int e = SSL_get_error(t->ssl, rc);
    switch (e) {
    case SSL_ERROR_WANT_READ: return CMS_TLS_WANT_READ;
    case SSL_ERROR_WANT_WRITE: return CMS_TLS_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN: return CMS_TLS_CLOSED;
    default: break;
    }
    long verify = SSL_get_verify_result(t->ssl);
    if (verify != X509_V_OK) {
        snprintf(t->error, sizeof t->error, "the server's certificate was refused: %s",
                 X509_verify_cert_error_string(verify));
        ERR_clear_error();
    } else if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        snprintf(t->error, sizeof t->error, "%s: the connection was closed", what);
    } else {
        set_error(t, what);
    }
    return CMS_TLS_FAILED;
}

// OpenSSL writes the socket with write(2), which raises SIGPIPE when the server has gone; a library
// must not kill its process for that, nor change the process's disposition. Each call that may
// write runs with SIGPIPE blocked in the calling thread, and a SIGPIPE it raised is consumed.
struct sigpipe_guard {
    sigset_t old;
    int was_pending;
};

static void sigpipe_block(struct sigpipe_guard *g) {
    sigset_t block, pending;
    sigemptyset(&block);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &g->old);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE);
}

static void sigpipe_restore(struct sigpipe_guard *g) {
    if (!g->was_pending) {
        sigset_t pending;
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE)) {
            sigset_t only;
            sigemptyset(&only);
            sigaddset(&only, SIGPIPE);
            struct timespec zero = {0, 0};
            sigtimedwait(&only, NULL, &zero);
        }
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

int cms_tls_handshake(cms_tls *t) {
    ERR_clear_error();
    struct sigpipe_guard g;
    sigpipe_block(&g);
    int rc = SSL_do_handshake(t->ssl);
    sigpipe_restore(&g);
    if (rc != 1) {
        int r = outcome(t, rc, "TLS handshake");
        return r == CMS_TLS_CLOSED ? CMS_TLS_FAILED : r;
    }
    if (t->pinned) {
        unsigned char got[32];
        if (!cms_tls_peer_fingerprint(t, got) || memcmp(got, t->pin, 32) != 0) {
            snprintf(t->error, sizeof t->error,
                     "the server's certificate was refused: its SHA-256 fingerprint is not the pinned one");
            return CMS_TLS_FAILED;
        }
    }
    return CMS_TLS_DONE;
}

long cms_tls_read(cms_tls *t, void *out, size_t size) {
    ERR_clear_error();
    size_t got = 0;
    struct sigpipe_guard g;
    sigpipe_block(&g);
    int rc = SSL_read_ex(t->ssl, out, size, &got);
    sigpipe_restore(&g);
    if (rc == 1) return (long)got;
    return outcome(t, 0, "TLS read");
}

long cms_tls_write(cms_tls *t, const void *data, size_t size) {
    ERR_clear_error();
    size_t written = 0;
    struct sigpipe_guard g;
    sigpipe_block(&g);
    int rc = SSL_write_ex(t->ssl, data, size, &written);
    sigpipe_restore(&g);
    if (rc == 1) return (long)written;
    int r = outcome(t, 0, "TLS write");
    return r == CMS_TLS_CLOSED ? CMS_TLS_FAILED : r;
}

int cms_tls_pending(const cms_tls *t) { return SSL_pending(t->ssl); }

int cms_tls_peer_fingerprint(const cms_tls *t, unsigned char out[32]) {
    X509 *peer = SSL_get0_peer_certificate(t->ssl);
    unsigned int length = 0;
    return peer != NULL && X509_digest(peer, EVP_sha256(), out, &length) == 1 && length == 32;
}

int cms_tls_refusal(const cms_tls *t) {
    long verify = SSL_get_verify_result(t->ssl);
    if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) return CMS_TLS_REFUSED_NAME;
    if (verify != X509_V_OK) return CMS_TLS_REFUSED_CERTIFICATE;
    if (strstr(t->error, "certificate was refused") != NULL) return CMS_TLS_REFUSED_CERTIFICATE;
    return 0;
}

const char *cms_tls_version(const cms_tls *t) { return SSL_get_version(t->ssl); }

size_t cms_tls_error(const cms_tls *t, char *out, size_t size) {
    if (size == 0) return 0;
    snprintf(out, size, "%s", t->error);
    return strlen(out);
}
