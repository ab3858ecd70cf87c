// The SFrame ciphers declared in cms_sframe.h. The AES-CTR + HMAC suites use the low-level SHA-256
// functions (deprecated in OpenSSL 3 but present) because their state is a plain struct: the inner
// and outer keyed states are computed once per key and copied per frame, where HMAC_CTX or EVP_MAC
// would allocate on every reset.
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include "cms_sframe.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct cms_sframe_aead {
    int gcm;
    size_t tag_length;
    EVP_CIPHER_CTX *cipher;
    // HMAC-SHA256 states after the ipad and opad blocks (AES-CTR suites only).
    SHA256_CTX inner, outer;
};

cms_sframe_aead *cms_sframe_aead_new(int suite, const unsigned char *key, size_t key_length) {
    const EVP_CIPHER *cipher;
    size_t expected, tag_length;
    int gcm = 0;
    switch (suite) {
    case 1: cipher = EVP_aes_128_ctr(); expected = 48; tag_length = 10; break;
    case 2: cipher = EVP_aes_128_ctr(); expected = 48; tag_length = 8; break;
    case 3: cipher = EVP_aes_128_ctr(); expected = 48; tag_length = 4; break;
    case 4: cipher = EVP_aes_128_gcm(); expected = 16; tag_length = 16; gcm = 1; break;
    case 5: cipher = EVP_aes_256_gcm(); expected = 32; tag_length = 16; gcm = 1; break;
    default: return NULL;
    }
    if (key == NULL || key_length != expected) return NULL;
    cms_sframe_aead *a = calloc(1, sizeof *a);
    if (a == NULL) return NULL;
    a->gcm = gcm;
    a->tag_length = tag_length;
    a->cipher = EVP_CIPHER_CTX_new();
    if (a->cipher == NULL || EVP_EncryptInit_ex(a->cipher, cipher, NULL, key, NULL) != 1) {
        cms_sframe_aead_free(a);
        return NULL;
    }
    if (!gcm) {
        // HMAC key (32 bytes, shorter than the 64-byte block): pad with zeros, XOR with ipad/opad.
        unsigned char block[64];
        memset(block, 0, sizeof block);
        memcpy(block, key + 16, 32);
        for (int i = 0; i < 64; i++) block[i] ^= 0x36;
        SHA256_Init(&a->inner);
        SHA256_Update(&a->inner, block, 64);
        for (int i = 0; i < 64; i++) block[i] ^= 0x36 ^ 0x5c;
        SHA256_Init(&a->outer);
        SHA256_Update(&a->outer, block, 64);
        OPENSSL_cleanse(block, sizeof block);
    }
    return a;
}

void cms_sframe_aead_free(cms_sframe_aead *a) {
    if (a == NULL) return;
    EVP_CIPHER_CTX_free(a->cipher);
    OPENSSL_cleanse(a, sizeof *a);
    free(a);
}

static void put_be64(unsigned char *p, uint64_t v) {
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)v;
        v >>= 8;
    }
}

// RFC 9605 section 4.5.1 compute_tag: HMAC(auth_key, len(aad) || len(ct) || Nt || nonce || aad || ct),
// truncated to Nt bytes (written to `out`, 32 bytes of room).
static void ctr_tag(const cms_sframe_aead *a, const unsigned char *nonce, const unsigned char *aad1, size_t aad1_length,
                    const unsigned char *aad2, size_t aad2_length, const unsigned char *ct, size_t length,
                    unsigned char *out) {
    unsigned char lengths[24];
    put_be64(lengths, (uint64_t)(aad1_length + aad2_length));
    put_be64(lengths + 8, (uint64_t)length);
    put_be64(lengths + 16, (uint64_t)a->tag_length);
    SHA256_CTX c = a->inner;
    SHA256_Update(&c, lengths, sizeof lengths);
    SHA256_Update(&c, nonce, 12);
    if (aad1_length > 0) SHA256_Update(&c, aad1, aad1_length);
    if (aad2_length > 0) SHA256_Update(&c, aad2, aad2_length);
    if (length > 0) SHA256_Update(&c, ct, length);
    unsigned char inner[32];
    SHA256_Final(inner, &c);
    c = a->outer;
    SHA256_Update(&c, inner, sizeof inner);
    SHA256_Final(out, &c);
    OPENSSL_cleanse(&c, sizeof c);
}

// AES-CTR over `length` bytes with the 16-byte counter block nonce || 00000000.
static int ctr_crypt(cms_sframe_aead *a, const unsigned char *nonce, const unsigned char *input, size_t length,
                     unsigned char *output) {
    unsigned char iv[16];
    memcpy(iv, nonce, 12);
    memset(iv + 12, 0, 4);
    if (EVP_EncryptInit_ex(a->cipher, NULL, NULL, NULL, iv) != 1) return 0;
    size_t done = 0;
    while (done < length) {
        // EVP_EncryptUpdate takes an int length.
        int chunk = (length - done) > (1u << 30) ? (1 << 30) : (int)(length - done);
        int written = 0;
        if (EVP_EncryptUpdate(a->cipher, output + done, &written, input + done, chunk) != 1) return 0;
        done += (size_t)chunk;
    }
    return 1;
}

static int gcm_begin(cms_sframe_aead *a, int encrypt, const unsigned char *nonce, const unsigned char *aad1,
                     size_t aad1_length, const unsigned char *aad2, size_t aad2_length) {
    int written = 0;
    if (EVP_CipherInit_ex(a->cipher, NULL, NULL, NULL, nonce, encrypt) != 1) return 0;
    if (aad1_length > 0 && EVP_CipherUpdate(a->cipher, NULL, &written, aad1, (int)aad1_length) != 1) return 0;
    if (aad2_length > 0 && EVP_CipherUpdate(a->cipher, NULL, &written, aad2, (int)aad2_length) != 1) return 0;
    return 1;
}

int cms_sframe_aead_seal(cms_sframe_aead *a, const unsigned char *nonce, const unsigned char *aad1, size_t aad1_length,
                         const unsigned char *aad2, size_t aad2_length, const unsigned char *input, size_t length,
                         unsigned char *output, unsigned char *tag) {
    if (length > (size_t)INT32_MAX) return 0;
    if (!a->gcm) {
        if (!ctr_crypt(a, nonce, input, length, output)) return 0;
        unsigned char full[32];
        ctr_tag(a, nonce, aad1, aad1_length, aad2, aad2_length, output, length, full);
        memcpy(tag, full, a->tag_length);
        return 1;
    }
    int written = 0;
    if (!gcm_begin(a, 1, nonce, aad1, aad1_length, aad2, aad2_length)) return 0;
    if (length > 0 && EVP_CipherUpdate(a->cipher, output, &written, input, (int)length) != 1) return 0;
    if (EVP_CipherFinal_ex(a->cipher, output + written, &written) != 1) return 0;
    return EVP_CIPHER_CTX_ctrl(a->cipher, EVP_CTRL_GCM_GET_TAG, (int)a->tag_length, tag) == 1;
}

int cms_sframe_aead_open(cms_sframe_aead *a, const unsigned char *nonce, const unsigned char *aad1, size_t aad1_length,
                         const unsigned char *aad2, size_t aad2_length, const unsigned char *input, size_t length,
                         const unsigned char *tag, unsigned char *output) {
    if (length > (size_t)INT32_MAX) return -1;
    if (!a->gcm) {
        unsigned char full[32];
        ctr_tag(a, nonce, aad1, aad1_length, aad2, aad2_length, input, length, full);
        if (CRYPTO_memcmp(full, tag, a->tag_length) != 0) return 0;
        return ctr_crypt(a, nonce, input, length, output) ? 1 : -1;
    }
    int written = 0;
    if (!gcm_begin(a, 0, nonce, aad1, aad1_length, aad2, aad2_length)) return -1;
    if (length > 0 && EVP_CipherUpdate(a->cipher, output, &written, input, (int)length) != 1) return -1;
    if (EVP_CIPHER_CTX_ctrl(a->cipher, EVP_CTRL_GCM_SET_TAG, (int)a->tag_length, (void *)tag) != 1) return -1;
    // The tag is checked here; on a mismatch the plaintext already written must be discarded.
    return EVP_CipherFinal_ex(a->cipher, output + written, &written) == 1 ? 1 : 0;
}

int cms_sframe_hkdf(int sha512, const unsigned char *ikm, size_t ikm_length, const unsigned char *info,
                    size_t info_length, unsigned char *out, size_t out_length) {
    const EVP_MD *md = sha512 ? EVP_sha512() : EVP_sha256();
    size_t hash_length = sha512 ? 64 : 32;
    if (out_length > 255 * hash_length) return 0;
    unsigned char zeros[64], prk[64], t[64];
    unsigned int prk_length = 0, t_length = 0;
    memset(zeros, 0, sizeof zeros);
    // Extract: an empty salt is a hash-length string of zeros (RFC 5869 section 2.2).
    if (HMAC(md, zeros, (int)hash_length, ikm, ikm_length, prk, &prk_length) == NULL) return 0;
    HMAC_CTX *h = HMAC_CTX_new();
    if (h == NULL) return 0;
    int ok = 1;
    size_t done = 0;
    unsigned char counter = 1;
    t_length = 0;
    while (ok && done < out_length) {
        ok = HMAC_Init_ex(h, prk, (int)prk_length, md, NULL) == 1 && HMAC_Update(h, t, t_length) == 1
            && HMAC_Update(h, info, info_length) == 1 && HMAC_Update(h, &counter, 1) == 1
            && HMAC_Final(h, t, &t_length) == 1;
        if (!ok) break;
        size_t take = out_length - done < t_length ? out_length - done : t_length;
        memcpy(out + done, t, take);
        done += take;
        counter++;
    }
    HMAC_CTX_free(h);
    OPENSSL_cleanse(prk, sizeof prk);
    OPENSSL_cleanse(t, sizeof t);
    return ok;
}
