// libsrtp2 (libsrtp2-dev, built against NSS on Debian). The crypto policy setters are plain
// functions; shims below cover what Swift cannot import.
#ifndef CMS_SRTP_H
#define CMS_SRTP_H
#include <srtp2/srtp.h>
#endif
