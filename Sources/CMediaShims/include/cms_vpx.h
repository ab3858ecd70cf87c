// libvpx VP8/VP9 (libvpx-dev). vpx_codec_enc_init/dec_init are ABI-versioned macros and
// vpx_codec_control is variadic: shims below.
#ifndef CMS_VPX_H
#define CMS_VPX_H
#include <vpx/vpx_encoder.h>
#include <vpx/vpx_decoder.h>
#include <vpx/vp8cx.h>
#include <vpx/vp8dx.h>
#endif
