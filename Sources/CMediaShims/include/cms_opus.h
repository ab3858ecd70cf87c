// Opus (libopus-dev). opus_encoder_ctl/opus_decoder_ctl are variadic: one shim per request used.
#ifndef CMS_OPUS_H
#define CMS_OPUS_H
#include <opus/opus.h>
#endif
