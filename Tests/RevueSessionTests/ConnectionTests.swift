import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// LAN discovery by multicast: two friends find each other with no rendezvous node and no stored
/// endpoint. Each test has its own discovery port (`testLANPort`).
func multicastAvailable() -> Bool {
    guard let s = try? SessionSocket(host: "0.0.0.0", port: 0) else { return false }
    defer { s.close() }
    return s.joinMulticast(group: SocketAddress(ip: 0xEFFF_4D4D, port: 0))
}

@MainActor
@Suite(.serialized, .enabled(if: multicastAvailable(), "no IPv4 multicast route on this host"))
struct LANDiscoveryTests {

    /// Bound to every IPv4 address, and to "::" (one dual-stack socket, which answers the IPv4
    /// announcements' senders over IPv4).
    @Test(arguments: ["0.0.0.0", "::"])
    func friendsFindEachOtherByMulticast(bindHost: String) async throws {
        func lan(_ c: inout RevueConfiguration) {
            c.bindHost = bindHost
            c.lanDiscovery = true
            c.lanDiscoveryPort = testLANPort(1)
        }
        let alice = try TestPeer(tweak: lan), bob = try TestPeer(tweak: lan)
        defer { alice.remove(); bob.remove() }
        #expect(alice.revue.isDiscoverable)
        #expect(alice.events.isEmpty || alice.events == [.discoverable(true)])
        try await befriend(alice, bob)
        #expect(alice.revue.friends.getFriendPaths(friendId: bob.id).paths.first?.kind == .directLAN)
    }

    /// Another program holds the discovery port without sharing it: the instance starts without
    /// LAN discovery and says so. With the port free it runs; with the setting off it does not.
    @Test func aDiscoveryPortHeldByAnotherSocketLeavesDiscoveryOffAndSaysSo() throws {
        let port = testLANPort(4)
        func lan(_ c: inout RevueConfiguration) {
            c.lanDiscovery = true
            c.lanDiscoveryPort = port
        }
        let holder = try SessionSocket(host: "0.0.0.0", port: port)  // without SO_REUSEPORT
        let blocked = try TestPeer(tweak: lan)
        #expect(blocked.revue.isInitialized && !blocked.revue.isDiscoveringOnLAN)
        blocked.remove()
        holder.close()
        let running = try TestPeer(tweak: lan)
        defer { running.remove() }
        #expect(running.revue.isDiscoveringOnLAN)
        let off = try TestPeer()
        defer { off.remove() }
        #expect(!off.revue.isDiscoveringOnLAN)
    }
}
