// RevueMedia: the media engine as a product of its own. `import RevueMedia` gives a program the
// codecs (Opus, VP8, VP9), the containers (IVF, Y4M, WAV, Ogg Opus), RTP, RTCP, SRTP, SDP, the
// sockets, and the send and receive pipelines, for programs that build their own media paths.
// Apps that use friends and calls import RevueSDK instead.
@_exported import MediaCore
