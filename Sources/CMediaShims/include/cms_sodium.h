// libsodium (libsodium-dev): session crypto (X25519, ChaCha20-Poly1305, BLAKE2b) and random bytes.
// sodium_init, randombytes_buf, randombytes_random, randombytes_uniform, sodium_memzero and
// sodium_memcmp are plain functions Swift imports directly: no shims needed so far.
#ifndef CMS_SODIUM_H
#define CMS_SODIUM_H
#include <sodium.h>
#endif
