// speexdsp (libspeexdsp-dev): resampler and preprocessor. speex_preprocess_ctl takes a void *
// argument whose type depends on the request; typed shims below keep Swift from passing untyped
// pointers (int requests take spx_int32_t, the AGC level takes float).
#ifndef CMS_SPEEX_H
#define CMS_SPEEX_H
#include <speex/speex_preprocess.h>
#include <speex/speex_resampler.h>

// speex_preprocess_ctl with an spx_int32_t argument (SET_DENOISE, SET_AGC, SET_VAD, SET_NOISE_SUPPRESS...).
static inline int cms_speex_preprocess_set_int(SpeexPreprocessState *st, int request, spx_int32_t value) { return speex_preprocess_ctl(st, request, &value); }
// speex_preprocess_ctl reading an spx_int32_t (GET_DENOISE, GET_PROB, GET_AGC_GAIN...).
static inline int cms_speex_preprocess_get_int(SpeexPreprocessState *st, int request, spx_int32_t *value) { return speex_preprocess_ctl(st, request, value); }
// speex_preprocess_ctl with a float argument (SET_AGC_LEVEL).
static inline int cms_speex_preprocess_set_float(SpeexPreprocessState *st, int request, float value) { return speex_preprocess_ctl(st, request, &value); }
// speex_preprocess_ctl reading a float (GET_AGC_LEVEL).
static inline int cms_speex_preprocess_get_float(SpeexPreprocessState *st, int request, float *value) { return speex_preprocess_ctl(st, request, value); }
#endif
