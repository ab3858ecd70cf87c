/// The set of paths between your device and a friend's: the friend connection. A
/// value type; `RevueDelegate.revue(_:friend:didUpdatePaths:)` delivers a new one
/// whenever a path appears or goes away.
public struct FriendConnectionPaths: Sendable, Hashable {
    /// Every path that carried authenticated traffic from the friend recently, best first.
    public var paths: [FriendConnectionPath]

    /// Whether at least one path works: the friend's device is reachable now.
    public var isOnline: Bool { !paths.isEmpty }

    /// No path: the friend is not reachable.
    public static let offline = FriendConnectionPaths(paths: [])

    /// Makes a value from its paths.
    public init(paths: [FriendConnectionPath]) { self.paths = paths }
}

/// One route to a friend's device.
public struct FriendConnectionPath: Sendable, Hashable {
    /// How packets travel on this path.
    public enum Kind: Sendable, Hashable {
        /// Directly over UDP to an address on your local network (private, link-local or loopback).
        case directLAN
        /// Directly over UDP to a public address (possibly through NAT).
        case directUDP
        /// Through a relay that forwards encrypted packets it cannot read: a rendezvous node's
        /// blind relay, or a TURN server on the path the friend connection found with ICE.
        case relayed
    }

    /// How packets travel on this path.
    public var kind: Kind
    /// The friend's address as seen from here ("203.0.113.5:33445"); for `.relayed`, the relay's
    /// (the rendezvous node's, or the friend's relayed address on a TURN server when the friend's
    /// side relays; the friend's own address when only ours does).
    public var endpoint: String
    /// Last measured round-trip time in seconds, nil until a keepalive came back. Not part of
    /// equality: a new RTT alone does not produce `didUpdatePaths`.
    public var roundTripTime: Double?

    /// Makes a path.
    public init(kind: Kind, endpoint: String, roundTripTime: Double? = nil) {
        self.kind = kind
        self.endpoint = endpoint
        self.roundTripTime = roundTripTime
    }

    /// Equal when kind and endpoint are (round-trip time is a measurement, not identity).
    public static func == (a: Self, b: Self) -> Bool { a.kind == b.kind && a.endpoint == b.endpoint }
    /// Hashes what `==` compares.
    public func hash(into h: inout Hasher) { h.combine(kind); h.combine(endpoint) }
}
