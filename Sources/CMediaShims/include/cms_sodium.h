// libsodium (libsodium-dev): session crypto (X25519, ChaCha20-Poly1305, BLAKE2b) and random bytes.
#ifndef CMS_SODIUM_H
#define CMS_SODIUM_H
#include <sodium.h>
#endif
