// libvpx VP8/VP9 (libvpx-dev). vpx_codec_enc_init/dec_init are ABI-versioned macros and
// vpx_codec_control is variadic: shims below.
#ifndef CMS_VPX_H
#define CMS_VPX_H
#include <vpx/vpx_encoder.h>
#include <vpx/vpx_decoder.h>
#include <vpx/vp8cx.h>
#include <vpx/vp8dx.h>

// vpx_codec_enc_init is a macro that passes VPX_ENCODER_ABI_VERSION to vpx_codec_enc_init_ver.
static inline vpx_codec_err_t cms_vpx_enc_init(vpx_codec_ctx_t *ctx, vpx_codec_iface_t *iface, const vpx_codec_enc_cfg_t *cfg, long flags) { return vpx_codec_enc_init_ver(ctx, iface, cfg, flags, VPX_ENCODER_ABI_VERSION); }

// vpx_codec_dec_init is a macro that passes VPX_DECODER_ABI_VERSION to vpx_codec_dec_init_ver.
static inline vpx_codec_err_t cms_vpx_dec_init(vpx_codec_ctx_t *ctx, vpx_codec_iface_t *iface, const vpx_codec_dec_cfg_t *cfg, long flags) { return vpx_codec_dec_init_ver(ctx, iface, cfg, flags, VPX_DECODER_ABI_VERSION); }

// vpx_codec_control_ is variadic: controls taking an int (or unsigned int) value, e.g. VP8E_SET_CPUUSED.
static inline vpx_codec_err_t cms_vpx_control_int(vpx_codec_ctx_t *ctx, int ctrl_id, int value) { return vpx_codec_control_(ctx, ctrl_id, value); }

// vpx_codec_control_ is variadic: controls taking a pointer, e.g. VP8E_GET_LAST_QUANTIZER_64 (int *),
// VP9E_SET_SVC_PARAMETERS (vpx_svc_extra_cfg_t *), VP9E_GET_SVC_LAYER_ID (vpx_svc_layer_id_t *).
static inline vpx_codec_err_t cms_vpx_control_ptr(vpx_codec_ctx_t *ctx, int ctrl_id, void *value) { return vpx_codec_control_(ctx, ctrl_id, value); }

#endif
