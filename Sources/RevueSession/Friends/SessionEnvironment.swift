// What a session runs on: its clock and timers, its datagram socket, whether it opens the sockets
// of friend links and LAN discovery, where its random choices come from, and what tests and the
// session fuzzer observe or break. Production uses the real ones (`live`); tests run the same
// session code on a simulated clock and an in-process network, and fuzzing on fixed keys,
// indices and timestamps.
package import MediaCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The outside world of one session core, injected when it is made (`Revue.initialize(_:environment:)`)
/// and kept as `SessionCore.environment`. The clock, the socket binding and the disk are read
/// when the core starts; the rest is read each time it is used, so a test may change it on a
/// running core (`core.environment.faults.dropDirectSends = true`). Thread rule: main actor once
/// the core holds it; a value, cheap to copy.
package struct SessionEnvironment {
    /// The clock every "now", timeout and timer of the session reads and schedules on.
    package let scheduler: any TaskScheduler
    /// Wall-clock time in seconds since 1970, read for the rendezvous and LAN tag epochs (the
    /// only use of the date: every interval is on `scheduler`).
    package var wallClock: () -> Double
    /// Binds the session's datagram socket (host, port; port 0: any).
    package let bindSocket: @Sendable (String, UInt16) throws(RevueError) -> any DatagramPort
    /// Whether connected friends get a link of their own (a datagram endpoint and an ICE agent
    /// each); off in the session fuzzer, whose inputs must not open sockets.
    package var makesLinks: Bool
    /// Makes a friend link's endpoint and agent from the session's bind host and the agent's
    /// configuration (`FriendLinkEndpoint.udp` in production: a UDP socket and a queue-run agent;
    /// a port of the simulated network and an agent on the simulated clock in tests). Called on
    /// the main actor when a friend connects; throws when no endpoint can be had (counted in
    /// `linkFailures`, and the friend session keeps to the session socket).
    package var makeLinkEndpoint: (String, ICEAgentConfiguration) throws -> FriendLinkEndpoint
    /// Whether LAN discovery may open its multicast socket (the configuration must also ask).
    package let lanDiscovery: Bool
    /// Whether profile writes run at once, their completion coming later on `scheduler`'s clock
    /// (a simulated disk); false: on a private queue, completing on the main queue.
    package let simulatedDisk: Bool
    /// Where handshake ephemerals and session indices come from (libsodium unless replaced).
    package var randomness = SessionRandomness()
    /// The timestamp of each handshake initiation (nil: the real-time clock, nanoseconds, rising).
    package var handshakeTimestamp: (() -> UInt64)?
    /// Sees every session datagram as it is sent, with its route, before any fault drops it.
    /// Called on the main actor; nil: nothing watches.
    var sendTap: (([UInt8], Route) -> Void)?
    /// Faults and limits tests impose (`SessionFaults`); none in production.
    package var faults = SessionFaults()

    /// One environment from its parts; randomness, timestamps, tap and faults are the production
    /// ones until set, and links get a UDP socket unless `makeLinkEndpoint` says otherwise.
    package init(
        scheduler: any TaskScheduler, bindSocket: @escaping @Sendable (String, UInt16) throws(RevueError) -> any DatagramPort,
        makesLinks: Bool, lanDiscovery: Bool, simulatedDisk: Bool,
        wallClock: @escaping () -> Double = { Date().timeIntervalSince1970 },
        makeLinkEndpoint: @escaping (String, ICEAgentConfiguration) throws -> FriendLinkEndpoint = FriendLinkEndpoint.udp(
            bindHost:ice:)
    ) {
        self.makeLinkEndpoint = makeLinkEndpoint
        self.scheduler = scheduler
        self.wallClock = wallClock
        self.bindSocket = bindSocket
        self.makesLinks = makesLinks
        self.lanDiscovery = lanDiscovery
        self.simulatedDisk = simulatedDisk
    }

    /// The real clock, the main queue, a UDP socket, friend links on UDP sockets and LAN discovery.
    package static var live: SessionEnvironment {
        SessionEnvironment(
            scheduler: DispatchTaskScheduler.main,
            bindSocket: { host, port throws(RevueError) in try SessionSocket(host: host, port: port) },
            makesLinks: true, lanDiscovery: true, simulatedDisk: false)
    }
}

/// The random choices of a session that a replay must repeat: each nil member means libsodium's
/// generator. The session fuzzer fixes them so a stored input replays identically. Thread rule:
/// called on the main actor; a value.
package struct SessionRandomness {
    /// The ephemeral key pair of each handshake (initiator and responder).
    package var ephemeralKeys: (() -> KeyPair)?
    /// Each new local session and handshake index (must not be 0).
    package var sessionIndex: (() -> UInt32)?
    /// The identity key pair of a new profile (read once, when the data directory holds none).
    /// Simulated worlds fix it so that which friend has the smaller ID, and so which side of a
    /// link controls its ICE, repeats from run to run.
    package var identityKeys: (() -> KeyPair)?

    /// libsodium for everything.
    package init() {}
}

/// What tests break on purpose. Thread rule: read on the main actor as the session runs; a value.
package struct SessionFaults {
    /// Direct sends and sends on friend links are dropped after `SessionEnvironment.sendTap` saw
    /// them (to force the relay, or with no rendezvous node, an outage).
    package var dropDirectSends = false
    /// Received stream items are delivered but their position is never saved nor acknowledged,
    /// as if every delivery were followed by a crash before its receipt.
    package var withholdReceipts = false
    /// Messages one set of transport keys sends or receives at most (a rekey starts at half).
    package var sessionMessageLimit: UInt64 = 1 << 60
    /// A hard lifetime of a transport session replacing the one derived from the rekey interval.
    package var sessionLifetime: Duration?

    /// No faults: production limits.
    package init() {}
}
