import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// Every RevueDelegate event, recorded in arrival order.
enum Event: Equatable, CustomStringConvertible {
    case request(String, String)
    case name(String, String)
    case statusMessage(String, String)
    case status(String, UserStatus)
    case paths(String, Bool)
    case message(String, String)
    case discoverable(Bool)

    var description: String {
        switch self {
        case .request(let id, let m): "request(\(id.prefix(8)), \(m))"
        case .name(let id, let n): "name(\(id.prefix(8)), \(n))"
        case .statusMessage(let id, let n): "statusMessage(\(id.prefix(8)), \(n))"
        case .status(let id, let s): "status(\(id.prefix(8)), \(s))"
        case .paths(let id, let o): "paths(\(id.prefix(8)), online: \(o))"
        case .message(let id, let m): "message(\(id.prefix(8)), \(m))"
        case .discoverable(let d): "discoverable(\(d))"
        }
    }
}

/// A Revue instance on loopback with a temp data directory and an event recorder.
@MainActor
final class TestPeer: RevueDelegate {
    let revue = Revue()
    let directory: String
    var events: [Event] = []
    var lastPaths: [String: FriendConnectionPaths] = [:]
    var configuration: RevueConfiguration

    init(rendezvous: RendezvousNode? = nil, directory: String? = nil, tweak: (inout RevueConfiguration) -> Void = { _ in }) throws
    {
        self.directory =
            directory
            ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("revue-test-\(UUID().uuidString)").path
        var c = RevueConfiguration(dataDirectory: self.directory)
        c.bindHost = "127.0.0.1"
        if let rendezvous { c.rendezvousNodes = ["127.0.0.1:\(rendezvous.port)"] }
        c.timeouts.rendezvousInterval = 0.2
        c.timeouts.handshakeRetryInterval = 0.2
        tweak(&c)
        configuration = c
        try start()
    }

    func start() throws {
        try revue.initialize(configuration)
        id = revue.revueId
        revue.delegates.add(delegate: self)
    }

    func stop() { revue.destroy() }

    func remove() {
        revue.destroy()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The identity, kept after destroy (revueId is "" then).
    private(set) var id = ""

    func revue(_ revue: Revue, didReceiveFriendRequest friendId: String, message: String) {
        events.append(.request(friendId, message))
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdateName name: String) { events.append(.name(friendId, name)) }
    func revue(_ revue: Revue, friend friendId: String, didUpdateStatusMessage statusMessage: String) {
        events.append(.statusMessage(friendId, statusMessage))
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdateStatus status: UserStatus) {
        events.append(.status(friendId, status))
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdatePaths paths: FriendConnectionPaths) {
        lastPaths[friendId] = paths
        events.append(.paths(friendId, paths.isOnline))
    }
    func revue(_ revue: Revue, friend friendId: String, didReceiveMessage message: String) {
        events.append(.message(friendId, message))
    }
    func revue(_ revue: Revue, didUpdateIsDiscoverable isDiscoverable: Bool) { events.append(.discoverable(isDiscoverable)) }

    /// Waits (yielding the main actor) until `condition` holds; fails the test after `timeout`.
    func wait(
        _ what: String, timeout: Double = 5, sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: () -> Bool
    ) async {
        let deadline = MonotonicTime.now + .seconds(timeout)
        while !condition() {
            if MonotonicTime.now > deadline {
                Issue.record("timed out waiting for \(what); events: \(events)", sourceLocation: sourceLocation)
                return
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    func waitForEvent(_ e: Event, timeout: Double = 5, sourceLocation: SourceLocation = #_sourceLocation) async {
        await wait("\(e)", timeout: timeout, sourceLocation: sourceLocation) { events.contains(e) }
    }

    /// Events other than discoverable ones, for order checks.
    var friendEvents: [Event] { events.filter { if case .discoverable = $0 { false } else { true } } }
}

/// Sleeps on the main actor without blocking it.
@MainActor
func settle(_ seconds: Double) async { try? await Task.sleep(for: .milliseconds(Int(seconds * 1000))) }

/// Makes two friends through a rendezvous node: a requests, b accepts; waits until both are online.
@MainActor
func befriend(_ a: TestPeer, _ b: TestPeer, message: String = "hi") async throws {
    try a.revue.friends.addFriend(address: b.revue.revueAddress, message: message)
    await b.waitForEvent(.request(a.id, message))
    try b.revue.friends.addFriendNorequest(friendId: a.id)
    await a.waitForEvent(.paths(b.id, true))
    await b.waitForEvent(.paths(a.id, true))
    // Online now, not only once: under load a first session can be replaced while both sides
    // settle, and a test that starts at once must find both connected.
    await a.wait("both online", timeout: 10) {
        a.revue.friends.getFriendPaths(friendId: b.id).isOnline && b.revue.friends.getFriendPaths(friendId: a.id).isOnline
    }
}

/// Waits until both friends send their session on their links' selected pairs and have heard
/// each other on it (after that, their paths stay as they are on a quiet loopback).
@MainActor
func waitForLinks(_ a: TestPeer, _ b: TestPeer) async {
    for (p, q) in [(a, b), (b, a)] {
        await p.wait("\(p === a ? "first" : "second") peer on its link", timeout: 10) {
            guard let f = p.revue.core?.friends[q.id] else { return false }
            return f.bestRoute(now: .now, timeout: .seconds(2)) == .link && f.routes[.link] != nil
        }
    }
}

/// A LAN discovery port for one test: 32,440 + `slot` (0...299). These lie below the kernel's
/// ephemeral range (32768-60999 by default), so none of the sockets this process binds to port 0
/// can hold one before a peer binds it for discovery (a LAN request once took 3.6 s instead of
/// 0.06 s on port 33443), and above the interop tests' ports (20000-32000). Tests that run at once
/// use different slots.
func testLANPort(_ slot: Int) -> UInt16 {
    precondition((0...299).contains(slot), "LAN test port slot \(slot) out of range")
    return UInt16(32_440 + slot)
}
