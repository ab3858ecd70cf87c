// The engine as one import: every module of the media engine, from the base types up to the
// WebRTC peer and the SFU client. The package's own targets (the session, the tools, the tests)
// import this; `RevueMedia` re-exports it for dependents. The modules underneath each have one job
// and may only import the ones below them (docs/architecture.md, "Modules").
@_exported import MediaBase
@_exported import MediaCodecs
@_exported import MediaFrames
@_exported import MediaPipeline
@_exported import MediaSFU
@_exported import MediaTransport
@_exported import MediaWebRTC
@_exported import MediaWire
