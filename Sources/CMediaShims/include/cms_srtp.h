// libsrtp2 (libsrtp2-dev, built against NSS on Debian). The crypto policy setters are plain
// functions Swift imports directly; shims below cover what Swift cannot import.
#ifndef CMS_SRTP_H
#define CMS_SRTP_H
#include <srtp2/srtp.h>

// srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80 is a function-like macro (an alias of
// srtp_crypto_policy_set_rtp_default), which Swift cannot call.
static inline void cms_srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(srtp_crypto_policy_t *p) { srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(p); }

#endif
