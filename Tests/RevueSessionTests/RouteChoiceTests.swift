import MediaCore
import Testing

@testable import RevueSession

/// Which of a friend's live routes the session sends on.
@Suite struct RouteChoiceTests {
    /// A direct route we only hear the friend on (its probes reach us, our datagrams do not reach
    /// it: its firewall lets only its own flows out) must not win over the relay whose pongs come
    /// back; once a pong returns on the direct route too, the direct route wins again, and a
    /// confirmation older than the timeout no longer counts.
    @Test func aRouteWeOnlyHearOnLosesToOneThatAnswers() {
        let key = [UInt8](repeating: 7, count: 32)
        let f = FriendState(key: key, stored: StoredProfile.Friend(id: Hex.encode(key)))
        let now = MonotonicTime.now, timeout = Duration.seconds(2)
        let direct = Route.direct(SocketAddress(ipv4Address: 0xC612_0102, port: 4000))  // 198.18.1.2, public
        let relay = Route.relay(SocketAddress(ipv4Address: 0xCB00_7101, port: 33_400))
        f.routes[direct] = RouteState(lastReceived: now)
        f.routes[relay] = RouteState(lastReceived: now, rtt: .milliseconds(3), confirmedAt: now)
        #expect(f.bestRoute(now: now, timeout: timeout) == relay)
        f.routes[direct]?.confirmedAt = now
        f.routes[direct]?.rtt = .milliseconds(1)
        #expect(f.bestRoute(now: now, timeout: timeout) == direct)
        let later = now + .seconds(3)
        f.routes[direct]?.lastReceived = later
        f.routes[relay]?.lastReceived = later
        f.routes[relay]?.confirmedAt = later
        #expect(f.bestRoute(now: later, timeout: timeout) == relay)
        // With nothing confirmed, the kinds decide as before: direct over relayed.
        f.routes[relay]?.confirmedAt = nil
        #expect(f.bestRoute(now: later, timeout: timeout) == direct)
    }
}
