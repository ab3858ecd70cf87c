// CMediaShims: the one C module MediaCore and RevueSession import (with `internal import`).
// It includes the Debian media libraries' headers and adds one-line `static inline` shims, prefixed
// `cms_`, for what Swift cannot import: variadic *_ctl calls, function-like macros and ABI-versioned
// init macros. Each library has its own header below; each shim says why it exists. The one
// exceptions are the DTLS endpoint (cms_dtls.h, dtls.c), which needs C callbacks OpenSSL calls back,
// the TLS client of TURN over TLS (cms_tls.h, tls.c), which needs a verify callback, and SCTP
// for data channels (cms_sctp.h, sctp.c), which usrsctp calls back.
#ifndef CMEDIASHIMS_H
#define CMEDIASHIMS_H

#include "cms_opus.h"
#include "cms_vpx.h"
#include "cms_yuv.h"
#include "cms_speex.h"
#include "cms_srtp.h"
#include "cms_sodium.h"
#include "cms_net.h"
#include "cms_crypto.h"
#include "cms_dtls.h"
#include "cms_sctp.h"
#include "cms_tls.h"
#include "cms_sframe.h"
#include "cms_heap.h"

#endif
