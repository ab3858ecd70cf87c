/// How a participant takes part in a call.
public enum ParticipantMode: String, Sendable, Hashable, CaseIterable {
    /// Sends its own media and receives everyone's.
    case sendAndRecv
    /// Neither sends nor receives media; still sends and receives messages.
    case signallingOnly
    /// Receives everyone's media, sends none.
    case recvOnly

    /// Whether a participant in this mode publishes media.
    public var sends: Bool { self == .sendAndRecv }
    /// Whether a participant in this mode receives media.
    public var receives: Bool { self != .signallingOnly }
}

/// Why `Room.changeMode(_:)` failed.
public enum RoomError: Error, Sendable, Hashable {
    /// The local participant is already in the requested mode.
    case alreadyInRequestedState
    /// `Revue.initialize(_:)` has not run, or `destroy()` has.
    case notInitialized
}

/// Why publishing one of your tracks failed
/// (`RoomDelegate.room(_:localParticipant:didFailToPublishTrack:error:)`).
public enum TrackPublishError: Error, Sendable, Hashable {
    /// The engine could not create the track's encoder or send stream; `detail` says what failed.
    case mediaSetupFailed(detail: String)
}

/// Why a call failed (`RoomDelegate.room(_:callDidFailWithError:)`).
public enum CallError: Error, Sendable, Hashable {
    /// A call leg's media could not be set up with `participant` (a friend ID): no path of its
    /// own to that friend, or no working ICE pair within 5 s of the leg's start; `detail` says
    /// why (for the latter: a TURN server's refusal, refused permissions, or how many checks went
    /// unanswered). That participant stays in the call without media; should a pair work later,
    /// its media starts then.
    case mediaSetupFailed(participant: String, detail: String)
    /// The last participant left because its connection was lost (`.connectionLost`); the call
    /// ends right after this event.
    case connectionLost
}

/// Why a participant left the call (`ParticipantDelegate.participant(_:didDisconnectWithReason:)`).
public enum DisconnectReason: Sendable, Hashable {
    /// You hung up (`RemoteParticipant.disconnect()`, `Room.disconnectAll()`).
    case localHangUp
    /// The participant hung up.
    case remoteHangUp
    /// You deleted the friend (`FriendManager.deleteFriend(friendId:)`) or they deleted you.
    case friendDeleted
    /// The friend connection went offline (no packet for `RevueTimeouts.connectionTimeout`), and
    /// stayed offline for the grace `RevueTimeouts.callLostTimeout` (none by default).
    case connectionLost
    /// `Revue.destroy()` ended the call.
    case destroyed
}

/// How well media reaches a participant, from loss and round-trip time.
public enum ConnectionQuality: Int, Sendable, Hashable, Comparable {
    /// No path, or nothing measured yet.
    case unknown = 0
    /// Loss above 10 % or RTT above 800 ms.
    case poor = 1
    /// Loss above 2 % or RTT above 300 ms.
    case good = 2
    /// Low loss and low RTT.
    case excellent = 3

    /// Ordered by raw value.
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }

    /// Classifies a loss fraction (0...1) and a round-trip time in seconds.
    public static func from(loss: Double, roundTripTime: Double?) -> ConnectionQuality {
        guard let rtt = roundTripTime else { return .unknown }
        if loss > 0.10 || rtt > 0.8 { return .poor }
        if loss > 0.02 || rtt > 0.3 { return .good }
        return .excellent
    }
}

/// Statistics of one track, named like W3C webrtc-stats (`RTCInboundRtpStreamStats`,
/// `RTCOutboundRtpStreamStats`). A value type.
public struct TrackStatistics: Sendable, Hashable {
    /// Outbound: RTP packets sent.
    public var packetsSent: UInt64 = 0
    /// Outbound: RTP payload bytes sent.
    public var bytesSent: UInt64 = 0
    /// Inbound: RTP packets received.
    public var packetsReceived: UInt64 = 0
    /// Inbound: RTP payload bytes received.
    public var bytesReceived: UInt64 = 0
    /// Inbound: packets lost, expected minus received (RFC 3550 A.3); negative with duplicates.
    public var packetsLost: Int64 = 0
    /// Inbound interarrival jitter in seconds (RFC 3550 A.8).
    public var jitter: Double = 0
    /// Round-trip time in seconds, when measured.
    public var roundTripTime: Double?
    /// Video: frames encoded.
    public var framesEncoded: UInt64 = 0
    /// Video: frames decoded.
    public var framesDecoded: UInt64 = 0

    /// Empty statistics.
    public init() {}
}
