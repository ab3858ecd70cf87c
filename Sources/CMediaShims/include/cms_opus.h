// Opus (libopus-dev). opus_encoder_ctl/opus_decoder_ctl are variadic, which Swift cannot call: one
// typed shim per request MediaCore uses (the OPUS_SET_x/OPUS_GET_x macros expand to request, value).
#ifndef CMS_OPUS_H
#define CMS_OPUS_H
#include <stddef.h>
#include <opus/opus.h>

// Variadic opus_encoder_ctl(OPUS_SET_BITRATE(x)): x in bits/s, OPUS_AUTO or OPUS_BITRATE_MAX.
static inline int cms_opus_encoder_set_bitrate(OpusEncoder *st, opus_int32 x) { return opus_encoder_ctl(st, OPUS_SET_BITRATE(x)); }
// Variadic opus_encoder_ctl(OPUS_GET_BITRATE(x)).
static inline int cms_opus_encoder_get_bitrate(OpusEncoder *st, opus_int32 *x) { return opus_encoder_ctl(st, OPUS_GET_BITRATE(x)); }
// Variadic opus_encoder_ctl(OPUS_SET_COMPLEXITY(x)): 0-10.
static inline int cms_opus_encoder_set_complexity(OpusEncoder *st, opus_int32 x) { return opus_encoder_ctl(st, OPUS_SET_COMPLEXITY(x)); }
// Variadic opus_encoder_ctl(OPUS_GET_COMPLEXITY(x)).
static inline int cms_opus_encoder_get_complexity(OpusEncoder *st, opus_int32 *x) { return opus_encoder_ctl(st, OPUS_GET_COMPLEXITY(x)); }
// Variadic opus_encoder_ctl(OPUS_SET_VBR(x)): 0 = CBR, 1 = VBR.
static inline int cms_opus_encoder_set_vbr(OpusEncoder *st, opus_int32 x) { return opus_encoder_ctl(st, OPUS_SET_VBR(x)); }
// Variadic opus_encoder_ctl(OPUS_GET_VBR(x)).
static inline int cms_opus_encoder_get_vbr(OpusEncoder *st, opus_int32 *x) { return opus_encoder_ctl(st, OPUS_GET_VBR(x)); }
// Variadic opus_encoder_ctl(OPUS_SET_VBR_CONSTRAINT(x)): 1 = constrained VBR.
static inline int cms_opus_encoder_set_vbr_constraint(OpusEncoder *st, opus_int32 x) { return opus_encoder_ctl(st, OPUS_SET_VBR_CONSTRAINT(x)); }
// Variadic opus_encoder_ctl(OPUS_GET_VBR_CONSTRAINT(x)).
static inline int cms_opus_encoder_get_vbr_constraint(OpusEncoder *st, opus_int32 *x) { return opus_encoder_ctl(st, OPUS_GET_VBR_CONSTRAINT(x)); }
// Variadic opus_encoder_ctl(OPUS_SET_INBAND_FEC(x)): 0 off, 1 on.
static inline int cms_opus_encoder_set_inband_fec(OpusEncoder *st, opus_int32 x) { return opus_encoder_ctl(st, OPUS_SET_INBAND_FEC(x)); }
// Variadic opus_encoder_ctl(OPUS_GET_INBAND_FEC(x)).
static inline int cms_opus_encoder_get_inband_fec(OpusEncoder *st, opus_int32 *x) { return opus_encoder_ctl(st, OPUS_GET_INBAND_FEC(x)); }
// Variadic opus_encoder_ctl(OPUS_SET_PACKET_LOSS_PERC(x)): expected loss 0-100 %.
static inline int cms_opus_encoder_set_packet_loss_perc(OpusEncoder *st, opus_int32 x) { return opus_encoder_ctl(st, OPUS_SET_PACKET_LOSS_PERC(x)); }
// Variadic opus_encoder_ctl(OPUS_GET_PACKET_LOSS_PERC(x)).
static inline int cms_opus_encoder_get_packet_loss_perc(OpusEncoder *st, opus_int32 *x) { return opus_encoder_ctl(st, OPUS_GET_PACKET_LOSS_PERC(x)); }
// Variadic opus_encoder_ctl(OPUS_SET_DTX(x)): 0 off, 1 on.
static inline int cms_opus_encoder_set_dtx(OpusEncoder *st, opus_int32 x) { return opus_encoder_ctl(st, OPUS_SET_DTX(x)); }
// Variadic opus_encoder_ctl(OPUS_GET_DTX(x)).
static inline int cms_opus_encoder_get_dtx(OpusEncoder *st, opus_int32 *x) { return opus_encoder_ctl(st, OPUS_GET_DTX(x)); }
// Variadic opus_encoder_ctl(OPUS_GET_IN_DTX(x)): 1 while the encoder is in DTX.
static inline int cms_opus_encoder_get_in_dtx(OpusEncoder *st, opus_int32 *x) { return opus_encoder_ctl(st, OPUS_GET_IN_DTX(x)); }
// Variadic opus_encoder_ctl(OPUS_SET_SIGNAL(x)): OPUS_AUTO, OPUS_SIGNAL_VOICE or OPUS_SIGNAL_MUSIC.
static inline int cms_opus_encoder_set_signal(OpusEncoder *st, opus_int32 x) { return opus_encoder_ctl(st, OPUS_SET_SIGNAL(x)); }
// Variadic opus_encoder_ctl(OPUS_GET_SIGNAL(x)).
static inline int cms_opus_encoder_get_signal(OpusEncoder *st, opus_int32 *x) { return opus_encoder_ctl(st, OPUS_GET_SIGNAL(x)); }
// Variadic opus_encoder_ctl(OPUS_SET_MAX_BANDWIDTH(x)): OPUS_BANDWIDTH_*.
static inline int cms_opus_encoder_set_max_bandwidth(OpusEncoder *st, opus_int32 x) { return opus_encoder_ctl(st, OPUS_SET_MAX_BANDWIDTH(x)); }
// Variadic opus_encoder_ctl(OPUS_GET_MAX_BANDWIDTH(x)).
static inline int cms_opus_encoder_get_max_bandwidth(OpusEncoder *st, opus_int32 *x) { return opus_encoder_ctl(st, OPUS_GET_MAX_BANDWIDTH(x)); }
// Variadic opus_encoder_ctl(OPUS_SET_BANDWIDTH(x)): OPUS_AUTO or OPUS_BANDWIDTH_*.
static inline int cms_opus_encoder_set_bandwidth(OpusEncoder *st, opus_int32 x) { return opus_encoder_ctl(st, OPUS_SET_BANDWIDTH(x)); }
// Variadic opus_encoder_ctl(OPUS_GET_BANDWIDTH(x)): the bandwidth in use.
static inline int cms_opus_encoder_get_bandwidth(OpusEncoder *st, opus_int32 *x) { return opus_encoder_ctl(st, OPUS_GET_BANDWIDTH(x)); }
// Variadic opus_encoder_ctl(OPUS_SET_LSB_DEPTH(x)): significant bits of the input, 8-24.
static inline int cms_opus_encoder_set_lsb_depth(OpusEncoder *st, opus_int32 x) { return opus_encoder_ctl(st, OPUS_SET_LSB_DEPTH(x)); }
// Variadic opus_encoder_ctl(OPUS_GET_LSB_DEPTH(x)).
static inline int cms_opus_encoder_get_lsb_depth(OpusEncoder *st, opus_int32 *x) { return opus_encoder_ctl(st, OPUS_GET_LSB_DEPTH(x)); }
// Variadic opus_encoder_ctl(OPUS_GET_LOOKAHEAD(x)): codec delay in samples.
static inline int cms_opus_encoder_get_lookahead(OpusEncoder *st, opus_int32 *x) { return opus_encoder_ctl(st, OPUS_GET_LOOKAHEAD(x)); }
// Variadic opus_encoder_ctl(OPUS_GET_FINAL_RANGE(x)): range coder state after the last packet.
static inline int cms_opus_encoder_get_final_range(OpusEncoder *st, opus_uint32 *x) { return opus_encoder_ctl(st, OPUS_GET_FINAL_RANGE(x)); }
// Variadic opus_encoder_ctl(OPUS_RESET_STATE).
static inline int cms_opus_encoder_reset_state(OpusEncoder *st) { return opus_encoder_ctl(st, OPUS_RESET_STATE); }

// Variadic opus_decoder_ctl(OPUS_GET_LAST_PACKET_DURATION(x)): samples per channel.
static inline int cms_opus_decoder_get_last_packet_duration(OpusDecoder *st, opus_int32 *x) { return opus_decoder_ctl(st, OPUS_GET_LAST_PACKET_DURATION(x)); }
// Variadic opus_decoder_ctl(OPUS_GET_FINAL_RANGE(x)): range coder state after the last packet.
static inline int cms_opus_decoder_get_final_range(OpusDecoder *st, opus_uint32 *x) { return opus_decoder_ctl(st, OPUS_GET_FINAL_RANGE(x)); }
// Variadic opus_decoder_ctl(OPUS_GET_BANDWIDTH(x)): bandwidth of the last decoded packet.
static inline int cms_opus_decoder_get_bandwidth(OpusDecoder *st, opus_int32 *x) { return opus_decoder_ctl(st, OPUS_GET_BANDWIDTH(x)); }
// Variadic opus_decoder_ctl(OPUS_SET_GAIN(x)): output gain in Q8 dB.
static inline int cms_opus_decoder_set_gain(OpusDecoder *st, opus_int32 x) { return opus_decoder_ctl(st, OPUS_SET_GAIN(x)); }
// Variadic opus_decoder_ctl(OPUS_GET_GAIN(x)).
static inline int cms_opus_decoder_get_gain(OpusDecoder *st, opus_int32 *x) { return opus_decoder_ctl(st, OPUS_GET_GAIN(x)); }
// Variadic opus_decoder_ctl(OPUS_RESET_STATE).
static inline int cms_opus_decoder_reset_state(OpusDecoder *st) { return opus_decoder_ctl(st, OPUS_RESET_STATE); }

// The byte-buffer calls below wrap plain functions so packets cross as void *: Swift passes raw
// buffer pointers without rebinding memory to unsigned char (the package's shim convention).
// opus_encode writing the packet into a void * buffer.
static inline opus_int32 cms_opus_encode(OpusEncoder *st, const opus_int16 *pcm, int frame_size, void *data, opus_int32 max_data_bytes) { return opus_encode(st, pcm, frame_size, (unsigned char *)data, max_data_bytes); }
// opus_encode_float writing the packet into a void * buffer.
static inline opus_int32 cms_opus_encode_float(OpusEncoder *st, const float *pcm, int frame_size, void *data, opus_int32 max_data_bytes) { return opus_encode_float(st, pcm, frame_size, (unsigned char *)data, max_data_bytes); }
// opus_decode reading the packet from a const void * buffer (NULL = packet loss concealment).
static inline int cms_opus_decode(OpusDecoder *st, const void *data, opus_int32 len, opus_int16 *pcm, int frame_size, int decode_fec) { return opus_decode(st, (const unsigned char *)data, len, pcm, frame_size, decode_fec); }
// opus_decode_float reading the packet from a const void * buffer (NULL = packet loss concealment).
static inline int cms_opus_decode_float(OpusDecoder *st, const void *data, opus_int32 len, float *pcm, int frame_size, int decode_fec) { return opus_decode_float(st, (const unsigned char *)data, len, pcm, frame_size, decode_fec); }
// opus_packet_get_bandwidth on a const void * packet (reads the TOC byte only).
static inline int cms_opus_packet_get_bandwidth(const void *data) { return opus_packet_get_bandwidth((const unsigned char *)data); }
// opus_packet_get_samples_per_frame on a const void * packet (reads the TOC byte only).
static inline int cms_opus_packet_get_samples_per_frame(const void *data, opus_int32 fs) { return opus_packet_get_samples_per_frame((const unsigned char *)data, fs); }
// opus_packet_get_nb_channels on a const void * packet (reads the TOC byte only).
static inline int cms_opus_packet_get_nb_channels(const void *data) { return opus_packet_get_nb_channels((const unsigned char *)data); }
// opus_packet_get_nb_frames on a const void * packet.
static inline int cms_opus_packet_get_nb_frames(const void *data, opus_int32 len) { return opus_packet_get_nb_frames((const unsigned char *)data, len); }
// opus_packet_get_nb_samples on a const void * packet.
static inline int cms_opus_packet_get_nb_samples(const void *data, opus_int32 len, opus_int32 fs) { return opus_packet_get_nb_samples((const unsigned char *)data, len, fs); }

// opus_packet_parse takes `const unsigned char *frames[48]`, which imports awkwardly; this shim
// validates a packet's framing (RFC 6716 section 3) and returns the frame count or an OPUS_* error.
static inline int cms_opus_packet_validate(const void *data, opus_int32 len) { opus_int16 sizes[48]; return opus_packet_parse((const unsigned char *)data, len, NULL, NULL, sizes, NULL); }
#endif
