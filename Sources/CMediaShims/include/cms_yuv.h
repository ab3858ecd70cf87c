// libyuv (libyuv-dev; no .pc file, linked as -lyuv). Plain C functions: no shims needed so far.
#ifndef CMS_YUV_H
#define CMS_YUV_H
#include <libyuv/basic_types.h>
#include <libyuv/convert.h>
#include <libyuv/convert_argb.h>
#include <libyuv/convert_from.h>
#include <libyuv/convert_from_argb.h>
#include <libyuv/planar_functions.h>
#include <libyuv/rotate.h>
#include <libyuv/scale.h>
#include <libyuv/compare.h>
#include <libyuv/video_common.h>
#endif
