// A call through Janus survives a cut of the network between the participants and the server:
// Janus runs in a network namespace of its own, reached over a veth pair; the cut drops every
// packet on that link and breaks the participants' TCP connections to Janus. Within the server's
// reclaim window the sessions are reclaimed (same session, handles and WebRTC connections); past
// it they are rebuilt. Either way media comes back in every direction. docs/sfu.md "A lost
// connection".
import Foundation
import MediaCore
import MediaTestSupport
import Synchronization
import Testing

@testable import RevueSession

/// Janus's own network namespace, joined to the test's by a veth pair (10.77.n.1 on our side,
/// 10.77.n.2 on Janus's), and the cut of that link. Built with `ip` and `nft` (root only);
/// `teardown()` deletes the namespace and the pair. Thread rule: one test drives it. Cost: a
/// handful of `ip` commands.
final class JanusNamespace {
    let namespace: String
    let hostSide: String
    let janusAddress: String
    private var torn = false
    private static let serial = Atomic<Int>(0)

    init() throws {
        let n = Self.serial.wrappingAdd(1, ordering: .relaxed).oldValue
        let tag = "\(getpid() % 100_000)x\(n)"
        namespace = "rjn\(tag)"
        hostSide = "rjh\(tag)"
        let subnet = "10.77.\((Int(getpid()) * 8 + n) % 250)"
        janusAddress = subnet + ".2"
        // Not named veth*: Janus's configuration ignores such interfaces for ICE.
        let r = shell(
            """
            set -e
            ip netns add \(namespace)
            ip -n \(namespace) link set lo up
            ip link add \(hostSide) type veth peer name rjj0 netns \(namespace)
            ip addr add \(subnet).1/30 dev \(hostSide)
            ip link set \(hostSide) up
            ip -n \(namespace) addr add \(janusAddress)/30 dev rjj0
            ip -n \(namespace) link set rjj0 up
            """)
        guard r.status == 0 else {
            teardown()
            throw NetworkLabError(description: "Janus's namespace could not be made: \(r.output)")
        }
    }

    deinit { teardown() }

    /// Drops every packet on Janus's link, both ways, and aborts the TCP connections between us
    /// and Janus on both ends (as a device that lost its network finds them broken when it is
    /// back, and as Janus finds them once its TCP gives up on them).
    func cut() throws {
        let r = shell(
            """
            set -e
            ip netns exec \(namespace) nft add table inet rjcut
            ip netns exec \(namespace) nft add chain inet rjcut in '{ type filter hook input priority 0; policy accept; }'
            ip netns exec \(namespace) nft add chain inet rjcut out '{ type filter hook output priority 0; policy accept; }'
            ip netns exec \(namespace) nft add rule inet rjcut in iifname rjj0 drop
            ip netns exec \(namespace) nft add rule inet rjcut out oifname rjj0 drop
            ss -K dst \(janusAddress) > /dev/null
            ip netns exec \(namespace) ss -K src \(janusAddress) > /dev/null
            """)
        guard r.status == 0 else { throw NetworkLabError(description: "cut failed: \(r.output)") }
    }

    /// Silently drops, for good, the packets of the TCP connections to Janus's `port` that are
    /// open now, both ways (no reset: as when a device's address changes under a connection);
    /// new connections pass, and so does media. Returns how many connections it silenced.
    func silenceConnections(toPort port: Int) throws -> Int {
        let list = shell("ss -Htn state established dst \(janusAddress):\(port) | awk '{print $3}' | sed 's/.*://'")
        let ports = list.output.split(whereSeparator: \.isNewline).compactMap { Int($0) }
        guard list.status == 0, !ports.isEmpty else {
            throw NetworkLabError(description: "no connection to silence: \(list.output)")
        }
        let set = ports.map(String.init).joined(separator: ", ")
        let r = shell(
            """
            set -e
            ip netns exec \(namespace) nft add table inet rjquiet
            ip netns exec \(namespace) nft add chain inet rjquiet in '{ type filter hook input priority 0; policy accept; }'
            ip netns exec \(namespace) nft add chain inet rjquiet out '{ type filter hook output priority 0; policy accept; }'
            ip netns exec \(namespace) nft add rule inet rjquiet in tcp dport \(port) tcp sport '{ \(set) }' drop
            ip netns exec \(namespace) nft add rule inet rjquiet out tcp sport \(port) tcp dport '{ \(set) }' drop
            """)
        guard r.status == 0 else { throw NetworkLabError(description: "silencing failed: \(r.output)") }
        return ports.count
    }

    /// Undoes `cut()`.
    func restore() throws {
        let r = shell("ip netns exec \(namespace) nft delete table inet rjcut")
        guard r.status == 0 else { throw NetworkLabError(description: "restore failed: \(r.output)") }
    }

    func teardown() {
        guard !torn else { return }
        torn = true
        shell("ip link del \(hostSide) 2>/dev/null; ip netns del \(namespace) 2>/dev/null; true")
    }
}

@MainActor
@Suite(.serialized, .enabled(if: getuid() == 0 && janusInstalled, "needs root (ip netns, nft, ss) and janus"))
struct CallSFUReclaimTests {
    /// Three friends in a call through Janus in its own namespace (`webSocket`: over ws://,
    /// otherwise http://), the server started with `reclaim` and `sessionTimeout` seconds; `body`
    /// gets the link, the server and the peers once each receives the other two.
    static func withCallThroughNamespace(
        webSocket: Bool, reclaim: Int, sessionTimeout: Int = 60,
        _ body: @MainActor (JanusNamespace, JanusServer, [CallPeer], [ProbeAttacher]) async throws -> Void
    ) async throws {
        let link = try JanusNamespace()
        defer { link.teardown() }
        var o = JanusServer.Options()
        o.host = link.janusAddress
        o.namespace = link.namespace
        o.webSocket = webSocket
        o.reclaimSessionTimeout = reclaim
        o.sessionTimeout = sessionTimeout
        let janus = try await JanusServer.started(options: o)
        defer { janus.stop() }
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let room = UInt64.random(in: 1...1_000_000)
        let url = webSocket ? "ws://\(link.janusAddress):\(janus.wsPort)/" : "http://\(link.janusAddress):\(janus.port)/janus"
        let peers = try CallSFUTests.peers(
            ["a", "b", "c"], node: node, janus: janus, room: room, server: SFUServer(url: url, room: room))
        defer { for p in peers { p.peer.remove() } }
        try await makeFriends(peers)
        let (_, attachers) = CallSFUTests.attachProbes(peers)
        try await CallSFUTests.startThreeWayCall(peers)
        try await body(link, janus, peers, attachers)
        for p in peers { p.room.disconnectAll() }
    }

    /// What each peer's SFU side is made of now: its session, feed and connections.
    struct Identity: Equatable {
        var session: UInt64?, feed: UInt64?, publisher: ObjectIdentifier?, subscriber: ObjectIdentifier?
    }
    static func identity(_ p: CallPeer) -> Identity {
        let sfu = p.room.sfu
        return Identity(
            session: sfu?.session?.id, feed: sfu?.feed, publisher: sfu?.publisher.map(ObjectIdentifier.init),
            subscriber: sfu?.subscriber.map { ObjectIdentifier($0.connection) })
    }

    /// Forgets what the probes decoded so far, so that the next check counts only what follows.
    static func resetProbes(_ attachers: [ProbeAttacher]) {
        for at in attachers {
            for p in at.probes.values {
                p.counts.withLock { $0 = SenderProbe.Counts() }
                p.pcm.withLock { $0 = [] }
            }
        }
    }

    /// Cuts the link for `seconds`, then restores it; returns when it is back.
    static func blip(_ link: JanusNamespace, seconds: Double) async throws {
        try link.cut()
        let cutAt = Date()
        await settle(seconds)
        try link.restore()
        print("CallSFUReclaimTests: link to Janus cut for \(String(format: "%.1f", Date().timeIntervalSince(cutAt))) s")
    }

    /// A 3 s cut over `webSocket` or HTTP with a 20 s reclaim window: every session is reclaimed
    /// (same id, same feed, same WebRTC connections, nothing rebuilt), and afterwards all six
    /// directions decode the right sender's pictures and tone again.
    func reclaimed(webSocket: Bool) async throws {
        try await Self.withCallThroughNamespace(webSocket: webSocket, reclaim: 20) { link, _, peers, attachers in
            let label = webSocket ? "ws" : "http"
            let before = peers.map(Self.identity)
            try await Self.blip(link, seconds: 3)
            let back = Date()
            for p in peers {
                await p.wait("\(p.name)'s session reclaimed", timeout: 20) { (p.room.sfu?.reclaims ?? 0) >= 1 }
            }
            print(
                "CallSFUReclaimTests \(label): every session reclaimed \(String(format: "%.2f", Date().timeIntervalSince(back))) s after the link came back"
            )
            for (p, was) in zip(peers, before) {
                let sfu = try #require(p.room.sfu)
                #expect(
                    sfu.rebuilds == 0 && sfu.interruptions >= 1,
                    "\(p.name): \(sfu.interruptions) breaks, \(sfu.rebuilds) rebuilds")
                #expect(Self.identity(p) == was, "\(p.name) kept its session, feed and connections")
                #expect(sfu.failure == nil)
                if webSocket { #expect(sfu.session?.transport is JanusWebSocketTransport) }
            }
            for p in peers { await CallSFUTests.waitSubscribed(p, to: peers.filter { $0 !== p }) }
            Self.resetProbes(attachers)
            await CallSFUTests.feedAndCheckEveryDirection(peers, attachers, seconds: 3, label: "after a 3 s cut (\(label))")
            for p in peers { #expect(!p.recorder.room.contains { $0.hasPrefix("failed") }, "\(p.name): \(p.recorder.room)") }
        }
    }

    @Test func aThreeSecondCutOverWebSocketIsReclaimedAndMediaResumes() async throws {
        try await reclaimed(webSocket: true)
    }

    @Test func aThreeSecondCutOverHTTPIsReclaimedAndMediaResumes() async throws {
        try await reclaimed(webSocket: false)
    }

    /// Over a WebSocket, the path of every participant's connection to Janus dies without a
    /// reset (its packets are dropped for good; new connections and media pass): the keepalive
    /// that gets no answer notices it within 10 s (5 s between keepalives, 5 s for the answer),
    /// and the session is reclaimed on a new connection, keeping its handles and WebRTC
    /// connections; media goes on in every direction.
    @Test func aWebSocketWhosePathDiesSilentlyIsNoticedWithinTenSecondsAndReclaimed() async throws {
        try await Self.withCallThroughNamespace(webSocket: true, reclaim: 20) { link, janus, peers, attachers in
            let before = peers.map(Self.identity)
            let silenced = try link.silenceConnections(toPort: janus.wsPort)
            #expect(silenced == peers.count, "one WebSocket per participant")
            let at = Date()
            for p in peers {
                await p.wait("\(p.name)'s session reclaimed", timeout: 20) { (p.room.sfu?.reclaims ?? 0) >= 1 }
            }
            let took = Date().timeIntervalSince(at)
            print(
                "CallSFUReclaimTests: silent WebSocket path: every session reclaimed \(String(format: "%.2f", took)) s after it died"
            )
            // At most 10.25 s (a keepalive just missed, its 5 s wait, the first retry after 0.25 s);
            // with a keepalive every 25 s it was 10-35 s. The margin is for a loaded machine.
            #expect(took < 16, "noticed within a keepalive round and its wait")
            for (p, was) in zip(peers, before) {
                #expect(Self.identity(p) == was, "\(p.name) kept its session, feed and connections")
                #expect(p.room.sfu?.rebuilds == 0 && p.room.sfu?.failure == nil)
            }
            for p in peers { await CallSFUTests.waitSubscribed(p, to: peers.filter { $0 !== p }) }
            Self.resetProbes(attachers)
            await CallSFUTests.feedAndCheckEveryDirection(peers, attachers, seconds: 3, label: "after a silent WebSocket death")
            for p in peers { #expect(!p.recorder.room.contains { $0.hasPrefix("failed") }, "\(p.name): \(p.recorder.room)") }
        }
    }

    /// Over a WebSocket, a participant leaves while the link is cut, and Janus ends its session
    /// then (destroyed from inside Janus's namespace, which the cut does not reach): Janus's
    /// `leaving` for its feed goes nowhere, the others' connections being down. Once their
    /// sessions are reclaimed the two others no longer count its feed as live (the room's
    /// publishers are listed again), each saw it leave once, and they see and hear each other.
    @Test func aParticipantWhoLeavesDuringTheCutIsSeenLeavingOnce() async throws {
        try await Self.withCallThroughNamespace(webSocket: true, reclaim: 20) { link, janus, peers, attachers in
            let (a, b, c) = (peers[0], peers[1], peers[2])
            let cFeed = try #require(c.room.sfu?.feed)
            let cSession = try #require(c.room.sfu?.session?.id)
            try link.cut()
            let destroy = shell(
                """
                ip netns exec \(link.namespace) python3 -c 'import json, urllib.request as u; print(u.urlopen(u.Request("http://\(link.janusAddress):\(janus.port)/janus/\(cSession)", data=json.dumps({"janus": "destroy", "transaction": "t"}).encode()), timeout=5).read())'
                """)
            #expect(destroy.status == 0 && destroy.output.contains("success"), "\(destroy.output)")
            await settle(0.5)
            c.room.disconnectAll()
            await a.wait("c gone") { a.room.remoteParticipants[c.id] == nil && b.room.remoteParticipants[c.id] == nil }
            await settle(2)
            try link.restore()
            for p in [a, b] {
                await p.wait("\(p.name)'s session reclaimed", timeout: 20) { (p.room.sfu?.reclaims ?? 0) >= 1 }
                await p.wait("\(p.name) no longer counts c's feed", timeout: 10) { p.room.sfu?.liveFeeds[cFeed] == nil }
                #expect(p.recorder.room.filter { $0.hasPrefix("disconnect(c") }.count == 1, "\(p.name): \(p.recorder.room)")
                #expect(p.room.sfu?.rebuilds == 0)
            }
            // The subscription drops c's sections (Janus's offer for that was lost with the
            // connections; the pass asks for it again) and carries only the other's feed.
            for (p, other) in [(a, b), (b, a)] {
                await p.wait("\(p.name)'s subscription carries only \(other.name)'s feed", timeout: 15) {
                    guard let sfu = p.room.sfu, let feed = other.room.sfu?.feed else { return false }
                    return sfu.subscriber?.feeds == [feed] && !sfu.working
                }
                await CallSFUTests.waitSubscribed(p, to: [other])
            }
            let subscribers = [a, b].map { Self.identity($0).subscriber }
            print(
                "CallSFUReclaimTests: after c left during the cut: \([a, b].map { "\($0.name): \($0.room.sfu?.subscribeFailures ?? -1) failed exchanges" })"
            )
            Self.resetProbes(attachers)
            await CallSFUTests.feedAndCheckEveryDirection([a, b], attachers, seconds: 3, label: "after c left during a cut")
            #expect(
                [a, b].map { Self.identity($0).subscriber } == subscribers,
                "the subscriptions stayed as they were while media was checked")
        }
    }

    /// A cut longer than the server keeps a session whose connection broke: over a WebSocket a
    /// 2 s reclaim window and an 8 s cut (the claim is refused), over HTTP a 6 s session timeout
    /// and a 10 s cut (the keepalive is refused). Each participant makes a new session, joins,
    /// publishes and subscribes again (a new feed, announced to the others), and media comes back
    /// in every direction.
    func rebuilt(webSocket: Bool) async throws {
        let cut = webSocket ? 8.0 : 10
        try await Self.withCallThroughNamespace(
            webSocket: webSocket, reclaim: 2, sessionTimeout: webSocket ? 60 : 6
        ) { link, _, peers, attachers in
            let before = peers.map(Self.identity)
            try await Self.blip(link, seconds: cut)
            let back = Date()
            for p in peers {
                await p.wait("\(p.name) rebuilt", timeout: 30) { (p.room.sfu?.rebuilds ?? 0) >= 1 && p.room.sfu?.handle != nil }
            }
            for p in peers { await CallSFUTests.waitSubscribed(p, to: peers.filter { $0 !== p }, timeout: 30) }
            print(
                "CallSFUReclaimTests rebuild (\(webSocket ? "ws" : "http")): every participant subscribed again \(String(format: "%.2f", Date().timeIntervalSince(back))) s after the link came back"
            )
            for (p, was) in zip(peers, before) {
                let now = Self.identity(p)
                #expect(now.session != was.session && now.feed != was.feed, "\(p.name): \(was) -> \(now)")
                #expect(p.room.sfu?.failure == nil)
            }
            Self.resetProbes(attachers)
            await CallSFUTests.feedAndCheckEveryDirection(
                peers, attachers, seconds: 3, label: "after a \(Int(cut)) s cut (\(webSocket ? "ws" : "http"), rebuilt)")
            for p in peers { #expect(!p.recorder.room.contains { $0.hasPrefix("failed") }, "\(p.name): \(p.recorder.room)") }
        }
    }

    @Test func aCutLongerThanTheReclaimWindowOverWebSocketRebuildsAndMediaResumes() async throws {
        try await rebuilt(webSocket: true)
    }

    @Test func aCutLongerThanTheSessionTimeoutOverHTTPRebuildsAndMediaResumes() async throws {
        try await rebuilt(webSocket: false)
    }

    /// A room joined by link (a host and two joiners, over HTTP) through a 10 s cut with a 6 s
    /// session timeout: every session is made again, on a new feed. Nobody leaves anyone's
    /// call: while its own connection is coming back, the host keeps the members it no longer
    /// sees and each joiner waits for the host's envelope; the host lets each joiner back in at
    /// its new feed (its request under the same link) and seals an epoch naming the new feeds,
    /// which everyone follows. All six directions decode the right sender and hear its tone.
    @Test func aLinkRoomSurvivesACutLongerThanTheSessionTimeout() async throws {
        let link = try JanusNamespace()
        defer { link.teardown() }
        var o = JanusServer.Options()
        o.host = link.janusAddress
        o.namespace = link.namespace
        o.reclaimSessionTimeout = 2
        o.sessionTimeout = 6
        let janus = try await JanusServer.started(options: o)
        defer { janus.stop() }
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let room = UInt64.random(in: 1...1_000_000)
        let server = SFUServer(url: "http://\(link.janusAddress):\(janus.port)/janus", room: room)
        let peers = try CallSFUTests.peers(["host", "ann", "bob"], node: node, janus: janus, room: room, server: server)
        defer { for p in peers { p.peer.remove() } }
        let roomLink = try peers[0].room.createLink(name: "Hana")
        try peers[1].room.joinRoom(link: roomLink, name: "Ann")
        try peers[2].room.joinRoom(link: roomLink, name: "Bob")
        let attachers = CallSFULinkTests.attach(peers)
        for p in peers { await CallSFULinkTests.waitInRoom(p, with: peers.filter { $0 !== p }) }
        await CallSFULinkTests.waitKeysSettled(peers)
        let before = peers.map(Self.identity)
        let epoch = try #require(peers[0].room.linkLeg?.epoch)

        try await Self.blip(link, seconds: 10)
        let back = Date()
        for p in peers {
            await p.wait("\(p.name) rebuilt", timeout: 30) { (p.room.sfu?.rebuilds ?? 0) >= 1 && p.room.sfu?.handle != nil }
        }
        await peers[0].wait("an epoch naming every new feed", timeout: 30) {
            let feeds = Set(peers.compactMap { $0.room.sfu?.feed })
            return feeds.count == 3 && Set(peers[0].room.linkLeg?.roster.map(\.feed) ?? []) == feeds
        }
        for p in peers { try #require(p.room.linkLeg != nil, "\(p.name)'s call ended: \(p.recorder.room)") }
        for p in peers { await CallSFULinkTests.waitInRoom(p, with: peers.filter { $0 !== p }, timeout: 30) }
        await CallSFULinkTests.waitKeysSettled(peers)
        print(
            "CallSFUReclaimTests link room: every participant back at its new feed \(String(format: "%.2f", Date().timeIntervalSince(back))) s after the link came back"
        )
        #expect((peers[0].room.linkLeg?.epoch ?? 0) > epoch)
        for (p, was) in zip(peers, before) {
            let now = Self.identity(p)
            #expect(now.session != was.session && now.feed != was.feed, "\(p.name): \(was) -> \(now)")
            #expect(p.room.linkLeg != nil && p.room.sfu?.failure == nil)
            #expect(
                !p.recorder.room.contains { $0.hasPrefix("disconnect(") || $0.hasPrefix("failed") || $0 == "ended" },
                "\(p.name): \(p.recorder.room)")
        }
        Self.resetProbes(attachers)
        await CallSFULinkTests.feed(peers, of: peers, attachers: attachers, seconds: 3)
        for (i, me) in peers.enumerated() {
            for (j, other) in peers.enumerated() where i != j {
                let probe = attachers[i].probe(CallSFULinkTests.identity(other))
                let n = probe.snapshot
                print("CallSFUReclaimTests link room: \(me.name) from \(other.name): \(n) \(probe.meanPSNR) dB")
                #expect(n.frames >= 45 * 3 / 4 && n.foreign == 0, "\(me.name) from \(other.name): \(n)")
                #expect(probe.snr(CallSFUTests.tones[j]) > 10, "\(me.name) hears \(other.name)")
            }
        }
        for p in peers { p.room.disconnectAll() }
    }
}

/// Whether Janus is installed (the tests above start it).
let janusInstalled = FileManager.default.isExecutableFile(atPath: "/usr/bin/janus")
