// RevueSDK: what an app imports. The whole session API (friends, messages, invitations, calls;
// the RevueSession module) and, of the media engine, only the types that API hands to an app:
// capturers to feed, the frame and pixel views they take, the renderer and audio sink protocols a
// call's remote tracks deliver to. The rest of the engine is the RevueMedia product.
@_exported import RevueSession

// Audio in: PCM into a local audio track's capturer.
@_exported import class MediaCore.AudioBufferCapturer
@_exported import protocol MediaCore.AudioSink
// Video in: an app feeds frames it captured into a local track's capturer.
@_exported import class MediaCore.BufferCapturer
// What a pixel view throws when your buffer cannot hold the picture it describes.
@_exported import struct MediaCore.ColorConversionError
@_exported import struct MediaCore.DecodedVideoFrame
@_exported import struct MediaCore.I420View
@_exported import class MediaCore.LatestFrameRenderer
// The clock a decoded frame's times are on.
@_exported import struct MediaCore.MonotonicTime
@_exported import struct MediaCore.PCMBufferView
@_exported import struct MediaCore.PixelBufferView
@_exported import enum MediaCore.PixelFormat
@_exported import protocol MediaCore.VideoCapturerDelegate
@_exported import struct MediaCore.VideoDimensions
@_exported import class MediaCore.VideoFrame
// Video and audio out: what a remote track's renderer and audio sink receive.
@_exported import protocol MediaCore.VideoRenderer
@_exported import enum MediaCore.VideoRotation
