// The process runner, temporary directories and the Janus server live in MediaTestSupport,
// shared with the session suites; every interop test file sees them.
@_exported import MediaTestSupport
