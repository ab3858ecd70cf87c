// OpenSSL's libcrypto (libssl-dev): the digests STUN and TURN are specified with (RFC 8489 §14.5
// HMAC-SHA1 MESSAGE-INTEGRITY, §9.2.2 the MD5 long-term key). HMAC() and EVP_Digest() are plain
// functions; the shims only hide the EVP_MD lookups and the int/size_t conversions.
#ifndef CMS_CRYPTO_H
#define CMS_CRYPTO_H
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stddef.h>

/// HMAC-SHA1 of `data` under `key` into `out` (20 bytes). Returns 1 on success.
static inline int cms_hmac_sha1(const void *key, size_t keyLength, const void *data, size_t length, unsigned char *out) {
    unsigned int outLength = 0;
    return HMAC(EVP_sha1(), key, (int)keyLength, data, length, out, &outLength) != NULL && outLength == 20;
}

/// HMAC-SHA256 of `data` under `key` into `out` (32 bytes). Returns 1 on success.
static inline int cms_hmac_sha256(const void *key, size_t keyLength, const void *data, size_t length, unsigned char *out) {
    unsigned int outLength = 0;
    return HMAC(EVP_sha256(), key, (int)keyLength, data, length, out, &outLength) != NULL && outLength == 32;
}

/// MD5 of `data` into `out` (16 bytes). Returns 1 on success.
static inline int cms_md5(const void *data, size_t length, unsigned char *out) {
    unsigned int outLength = 0;
    return EVP_Digest(data, length, out, &outLength, EVP_md5(), NULL) == 1 && outLength == 16;
}

/// SHA-1 of `data` into `out` (20 bytes; the WebSocket handshake's Sec-WebSocket-Accept, RFC 6455
/// section 4.2.2). Returns 1 on success.
static inline int cms_sha1(const void *data, size_t length, unsigned char *out) {
    unsigned int outLength = 0;
    return EVP_Digest(data, length, out, &outLength, EVP_sha1(), NULL) == 1 && outLength == 20;
}
#endif
