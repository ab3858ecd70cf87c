// The SFU side of a call at the room's level: the server the current call uses (fixed when the
// call starts), its live connection (`SFUMedia`, made on first use), and the SFU announcements of
// friends that arrived before they were participants here. `Room+SFU.swift` drives the Janus
// session, publisher and subscription; this type holds what the room keeps between those steps.
internal import MediaCore

/// The room's SFU leg. A value owned by `Room`; it sends nothing. Thread rule: main actor (the
/// room's). Cost: one dictionary update per operation.
struct RoomSFULeg {
    /// Friends whose early announcement is kept at once.
    static let maxEarlySignals = 64

    /// The SFU the current call uses: `RoomOptions.sfu` when the call started, fixed until it
    /// ends (options changed mid-call apply to the next call); nil: a mesh.
    private(set) var server: SFUServer?
    /// The call's media through `server` (instead of the mesh legs), once made.
    var media: SFUMedia?
    /// A friend's announcement (`adr sfu`) that came before the friend was a participant here
    /// (it learnt of us first): kept until it is one, at most `maxEarlySignals` friends.
    private var earlySignals: [String: CallSignal] = [:]

    /// A call starts with `server` (nil: a mesh).
    mutating func callStarted(server: SFUServer?) { self.server = server }

    /// The call ended: the next one reads `RoomOptions.sfu` again (the media was stopped first).
    mutating func callEnded() { server = nil }

    /// Keeps `signal` from `id` until it is a participant (a newer one replaces it; a friend past
    /// `maxEarlySignals` is not kept).
    mutating func keepEarly(_ signal: CallSignal, from id: String) {
        guard earlySignals[id] != nil || earlySignals.count < Self.maxEarlySignals else { return }
        earlySignals[id] = signal
    }

    /// The early announcement of `id`, taken out.
    mutating func takeEarly(from id: String) -> CallSignal? { earlySignals.removeValue(forKey: id) }

    /// Forgets every early announcement.
    mutating func forgetEarly() { earlySignals = [:] }
}
