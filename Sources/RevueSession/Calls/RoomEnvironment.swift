// What tests and the call-signalling fuzzer change in a room: whether participants get media legs,
// where a leg's media goes, and a publication that fails on purpose. Production keeps the
// defaults; nothing here is part of the SDK.
internal import MediaCore

/// The room's outside world as tests and fuzzing set it (`Room.environment`). Thread rule: main
/// actor, read as the room runs, so a test may change it on a running room; a value, cheap to copy.
package struct RoomEnvironment {
    /// False connects participants without a media leg (no socket, no ICE agent), so only the
    /// signalling runs (the call-signalling fuzzer, simulated-time tests). True in production.
    package var mediaLegs = true
    /// Where a leg's media goes instead of the participant's address (friend ID, address; a
    /// lossy relay in between); nil sends directly.
    var mediaPath: ((String, SocketAddress) -> SocketAddress)?
    /// Publishing a track of this kind fails as if its encoder could not be created.
    var publishFailure: TrackKind?
    /// How long a joiner of a link room waits to be let in before its call fails
    /// (`RoomLinkLeg.admissionWait` in production).
    var linkAdmissionWait = RoomLinkLeg.admissionWait

    /// Production: media legs, direct media, no forced failure.
    package init() {}
}
