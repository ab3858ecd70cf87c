// speexdsp (libspeexdsp-dev): resampler and preprocessor. speex_preprocess_ctl takes a void *
// argument; typed shims below keep Swift from passing untyped pointers.
#ifndef CMS_SPEEX_H
#define CMS_SPEEX_H
#include <speex/speex_preprocess.h>
#include <speex/speex_resampler.h>
#endif
