// CMediaShims has `static inline` shims in its headers and one C file of its own (dtls.c, the
// DTLS endpoint); this file makes the headers compile on their own.
#include "CMediaShims.h"
