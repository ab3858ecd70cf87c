// What a session runs on: its clock and timers, its datagram socket, and whether it opens the
// sockets of friend links and LAN discovery. Production uses the real ones (`live`); tests run the
// same session code on a simulated clock and an in-process network.
package import MediaCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The outside world of one session core. Thread rule: a value, read once when the session starts.
package struct SessionEnvironment: Sendable {
    /// The clock every "now", timeout and timer of the session reads and schedules on.
    package var scheduler: any TaskScheduler
    /// Wall-clock time in seconds since 1970, read for the rendezvous and LAN tag epochs (the
    /// only use of the date: every interval is on `scheduler`).
    package var wallClock: @Sendable () -> Double
    /// Binds the session's datagram socket (host, port; port 0: any).
    package var bindSocket: @Sendable (String, UInt16) throws(RevueError) -> any DatagramPort
    /// Whether connected friends get a link of their own (a socket and an ICE agent each).
    package var makesLinks: Bool
    /// Whether LAN discovery may open its multicast socket (the configuration must also ask).
    package var lanDiscovery: Bool
    /// Whether profile writes run at once, their completion coming later on `scheduler`'s clock
    /// (a simulated disk); false: on a private queue, completing on the main queue.
    package var simulatedDisk: Bool

    /// One environment from its parts.
    package init(
        scheduler: any TaskScheduler, bindSocket: @escaping @Sendable (String, UInt16) throws(RevueError) -> any DatagramPort,
        makesLinks: Bool, lanDiscovery: Bool, simulatedDisk: Bool,
        wallClock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
    ) {
        self.scheduler = scheduler
        self.wallClock = wallClock
        self.bindSocket = bindSocket
        self.makesLinks = makesLinks
        self.lanDiscovery = lanDiscovery
        self.simulatedDisk = simulatedDisk
    }

    /// The real clock, the main queue, a UDP socket, friend links and LAN discovery.
    package static var live: SessionEnvironment {
        SessionEnvironment(
            scheduler: DispatchTaskScheduler.main,
            bindSocket: { host, port throws(RevueError) in try SessionSocket(host: host, port: port) },
            makesLinks: true, lanDiscovery: true, simulatedDisk: false)
    }
}
