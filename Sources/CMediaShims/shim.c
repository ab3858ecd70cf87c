// CMediaShims has only `static inline` shims in its headers; SwiftPM needs one source file.
#include "CMediaShims.h"
