// SFrame (RFC 9605) cipher suites over OpenSSL's libcrypto (libssl-dev): the AES-CTR + HMAC-SHA256
// construction of RFC 9605 section 4.5.1, AES-GCM, and the HKDF of section 4.4.2. Like cms_dtls.h
// this is a small C API in front of sframe.c rather than one-line shims: the AES-CTR suites need
// their own HMAC (built from SHA-256 states precomputed for the key, so no frame allocates) and the
// OpenSSL cipher contexts are kept across frames.
// Thread rule: one cms_sframe_aead is used by one thread at a time. Different ones are independent.
#ifndef CMS_SFRAME_H
#define CMS_SFRAME_H
#include <stddef.h>

typedef struct cms_sframe_aead cms_sframe_aead;

/// A cipher for SFrame suite `suite` (1 to 5, RFC 9605 section 8.1) keyed with `key` (Nk bytes:
/// 48 for suites 1-3, whose first 16 bytes are the AES key and last 32 the HMAC key; 16 for suite
/// 4; 32 for suite 5). Allocates the OpenSSL contexts. Returns NULL for a bad suite or key length,
/// or when OpenSSL fails.
cms_sframe_aead *cms_sframe_aead_new(int suite, const unsigned char *key, size_t key_length);

/// Frees the cipher and zeroes its key material. NULL is ignored.
void cms_sframe_aead_free(cms_sframe_aead *aead);

/// Encrypts `length` bytes of `input` into `output` (which may be `input`: in place) under the
/// 12-byte `nonce`, authenticating `aad1` then `aad2` (either may be NULL with length 0) as the
/// associated data, and writes the suite's tag (Nt bytes) to `tag`. No allocation. Returns 1, or 0
/// when OpenSSL fails.
int cms_sframe_aead_seal(cms_sframe_aead *aead, const unsigned char *nonce, const unsigned char *aad1,
                         size_t aad1_length, const unsigned char *aad2, size_t aad2_length,
                         const unsigned char *input, size_t length, unsigned char *output, unsigned char *tag);

/// Checks the tag (Nt bytes) over `aad1`, `aad2` and the `length` bytes of ciphertext `input`, then
/// decrypts them into `output` (which may be `input`). No allocation. Returns 1 when the tag
/// matches, 0 when it does not (nothing meaningful is in `output` then), -1 when OpenSSL fails.
int cms_sframe_aead_open(cms_sframe_aead *aead, const unsigned char *nonce, const unsigned char *aad1,
                         size_t aad1_length, const unsigned char *aad2, size_t aad2_length,
                         const unsigned char *input, size_t length, const unsigned char *tag,
                         unsigned char *output);

/// HKDF-Extract with an empty salt, then HKDF-Expand of `info` to `out_length` bytes (RFC 5869),
/// with SHA-512 when `sha512` is 1, SHA-256 otherwise. Returns 1, or 0 on failure.
int cms_sframe_hkdf(int sha512, const unsigned char *ikm, size_t ikm_length, const unsigned char *info,
                    size_t info_length, unsigned char *out, size_t out_length);
#endif
