// Rooms joined by link through a real Janus: a host makes a link, a friend of the host and a
// stranger join by it, all three see and hear each other with SFrame keys derived from the
// host's epochs; the host removes the stranger (its media stops, it gets no new key) and revokes
// the link (a replay of it is refused); wrong links are refused and decrypt nothing.
import Foundation
import MediaCore
import MediaTestSupport
import Testing

@testable import RevueSession

@MainActor
@Suite(.serialized) struct CallSFULinkTests {
    /// Janus, a rendezvous node and peers with its SFU in their options (`CallSFUTests.peers`);
    /// the first one made is the host's, which creates the room with a secret it draws.
    static func withPeers(
        _ names: [String], _ body: @MainActor (JanusServer, UInt64, [CallPeer]) async throws -> Void
    ) async throws {
        let janus = try await JanusServer.started()
        defer { janus.stop() }
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let room = UInt64.random(in: 1...1_000_000)
        let peers = try CallSFUTests.peers(names, node: node, janus: janus, room: room)
        defer { for p in peers { p.peer.remove() } }
        try await body(janus, room, peers)
    }

    /// The identity a peer has in the link room.
    static func identity(_ p: CallPeer) -> String {
        RoomLinkLeg.identity(tag: RoomLinkRosterEntry.tag(p.room.linkLeg!.publicKey))
    }

    /// Waits until `me` has every one of `others` as a participant, subscribed to through a
    /// connected subscription.
    static func waitInRoom(_ me: CallPeer, with others: [CallPeer], timeout: Double = 25) async {
        let ids = others.map(identity)
        await me.wait("\(me.name) with \(others.map(\.name)) at the SFU", timeout: timeout) {
            ids.allSatisfy { id in
                me.room.remoteParticipants[id] != nil && me.room.sfu?.subscriptions[id] != nil
                    && me.room.sfu?.subscriber?.connection.state == .connected
            }
        }
    }

    /// Waits until every peer holds the host's latest epoch and the senders switched to it.
    static func waitKeysSettled(_ peers: [CallPeer]) async {
        await peers[0].wait("every peer at the host's epoch, sending under its keys", timeout: 10) {
            let epochs = Set(peers.flatMap { [$0.room.linkLeg?.epoch ?? 0, $0.room.linkLeg?.epochInUse ?? 0] })
            return epochs.count == 1
        }
    }

    /// Probes on each peer for each other peer's identity (peer i's bar codes from i * 10,000).
    static func attach(_ peers: [CallPeer]) -> [ProbeAttacher] {
        let ranges = Dictionary(
            uniqueKeysWithValues: peers.enumerated().map { (identity($1), ($0 * 10_000)..<($0 * 10_000 + 10_000)) })
        let attachers = peers.map { _ in ProbeAttacher(ranges: ranges) }
        for (p, at) in zip(peers, attachers) { p.room.delegates.add(delegate: at) }
        return attachers
    }

    /// Feeds `senders` for `seconds` (peer i of `all` from 20 ms chunk i * 30,000 + `after`: a later
    /// feed starts where the wall clock is since the first, so that capture times keep pace with
    /// it; frames stamped far from it were not sent), then waits until each sender's last frames
    /// reached every other sender (through `attachers`, one per peer of `all`) and `alsoWaitFor`.
    static func feed(
        _ senders: [CallPeer], of all: [CallPeer], attachers: [ProbeAttacher], seconds: Double, after: Int = 0,
        alsoWaitFor extra: [SenderProbe] = []
    ) async {
        let tasks = senders.map { p in
            let i = all.firstIndex { $0 === p }!
            return CallMediaQualityTests.feed(
                p.room.localParticipant.localTrackPublications, tone: CallSFUTests.tones[i], seconds: seconds,
                startFrame: i * 30_000 + after)
        }
        for t in tasks { await t.value }
        // The last video frame of peer i is chunk i * 30,000 + after + c, c the last multiple of 3.
        let lastChunk = (Int(seconds * 50) - 1) / 3 * 3
        var ends: [(SenderProbe, Int)] = extra.map { ($0, ($0.range.lowerBound * 3 + after + lastChunk) / 3) }
        for r in senders {
            let ri = all.firstIndex { $0 === r }!
            for s in senders where s !== r {
                let si = all.firstIndex { $0 === s }!
                ends.append((attachers[ri].probe(identity(s)), (si * 30_000 + after + lastChunk) / 3))
            }
        }
        // One of a sender's last four frames decoded: what it sent before is in too (one path, in order).
        await all[0].wait("the last frames decoded", timeout: 5) { ends.allSatisfy { $0.0.snapshot.lastIndex >= $0.1 - 3 } }
    }

    /// The order of a call's start as friends' calls have it: `started` first, each participant
    /// connected before any of its tracks is subscribed, our tracks published after the first
    /// participant connected; one `connect` per participant.
    static func expectCallOrder(_ events: [String], participants: [String], label: String) {
        #expect(events.first == "started", "\(label): \(events)")
        let firstConnect = events.firstIndex { $0.hasPrefix("connect(") } ?? events.count
        for kind in ["audio", "video"] {
            let published = events.firstIndex(of: "publish(\(kind))")
            #expect(published.map { $0 > firstConnect } == true, "\(label): \(events)")
        }
        for name in participants {
            #expect(events.filter { $0 == "connect(\(name))" }.count == 1, "\(label): \(events)")
            let connected = events.firstIndex(of: "connect(\(name))") ?? events.count
            let subscribed = events.indices.filter { events[$0].hasPrefix("subscribe(\(name),") }
            #expect(subscribed.count == 2 && subscribed.allSatisfy { $0 > connected }, "\(label): \(events)")
        }
    }

    /// A participant's leaving as a hang-up has it: both its tracks unsubscribed, then
    /// `disconnect` with the reason.
    static func expectLeaveOrder(_ events: [String], _ name: String, reason: String) {
        let left = events.firstIndex(of: "disconnect(\(name),\(reason))")
        let unsubscribed = events.indices.filter { events[$0].hasPrefix("unsubscribe(\(name),") }
        #expect(left != nil && unsubscribed.count == 2 && unsubscribed.allSatisfy { $0 < left! }, "\(name): \(events)")
    }

    /// The host, a friend of the host and a stranger to both: all six directions decode the
    /// right sender at over 32 dB and hear its tone, with the events of a call in their usual
    /// order and the names chosen. The host then removes the stranger: it leaves everyone's call,
    /// its pictures stop, and the next epoch's key is sealed to the two others only. The host
    /// revokes the link: a newcomer presenting it is refused and kicked, and the two left still
    /// see each other. When the host leaves, the friend's call ends too.
    @Test func aStrangerJoinsByLinkSeesAndIsSeenThenIsRemovedAndTheLinkRevoked() async throws {
        try await Self.withPeers(["host", "friend", "stranger", "late"]) { janus, room, all in
            let (h, f, s, late) = (all[0], all[1], all[2], all[3])
            try await makeFriends([h, f])
            let link = try h.room.createLink(name: "Hana")
            #expect(!"\(link)".contains(Base64.encodeURL(link.secret)))
            let shared = try RoomLink(parsing: link.text)
            try f.room.joinRoom(link: shared, name: "Fred")
            try s.room.joinRoom(link: shared, name: "Sam")
            let peers = [h, f, s]
            for p in peers { for q in peers { p.recorder.names[Self.identity(q)] = q.name } }
            let attachers = Self.attach(peers)
            for p in peers { await Self.waitInRoom(p, with: peers.filter { $0 !== p }) }

            // The events a call with friends has, in the same order; the names they chose.
            for p in peers {
                let others = peers.filter { $0 !== p }.map(\.name)
                Self.expectCallOrder(p.recorder.room, participants: others, label: p.name)
            }
            #expect(h.room.remoteParticipants[Self.identity(s)]?.name == "Sam")
            #expect(s.room.remoteParticipants[Self.identity(h)]?.name == "Hana")
            #expect(f.room.remoteParticipants[Self.identity(s)]?.name == "Sam")
            #expect(h.room.isLinkParticipant(h.room.remoteParticipants[Self.identity(s)]!))
            // Janus saw the names only sealed.
            let session = try await JanusSession.create(server: janus.address)
            let admin = try await JanusVideoRoom(session: session)
            let listed = try await admin.listParticipants(room: room)
            #expect(
                listed.count == 3
                    && !listed.contains { ($0.display ?? "").contains("Sam") || ($0.display ?? "").contains("Fred") })

            await Self.waitKeysSettled(peers)
            let firstFeed = Date()
            await Self.feed(peers, of: peers, attachers: attachers, seconds: 3)
            for (i, me) in peers.enumerated() {
                for (j, other) in peers.enumerated() where i != j {
                    let probe = attachers[i].probe(Self.identity(other))
                    let n = probe.snapshot
                    print(
                        "CallSFULinkTests: \(me.name) from \(other.name): \(n) \(probe.meanPSNR) dB, tone \(probe.snr(CallSFUTests.tones[j])) dB"
                    )
                    #expect(n.frames >= 45 * 3 / 4 && n.foreign == 0, "\(me.name) from \(other.name): \(n)")
                    #expect(probe.meanPSNR > 32, "\(me.name) from \(other.name): \(probe.meanPSNR) dB")
                    #expect(probe.snr(CallSFUTests.tones[j]) > 10, "\(me.name) hears \(other.name)")
                }
            }

            // Removal.
            let strangerLeg = try #require(s.room.linkLeg)
            let strangerLegFeed = try #require(s.room.sfu?.feed)
            let epochBefore = strangerLeg.epoch
            let sid = Self.identity(s)
            let framesFromStranger = { (i: Int) in attachers[i].probe(sid).snapshot.frames }
            #expect(h.room.removeLinkParticipant(h.room.remoteParticipants[sid]!))
            #expect(h.room.remoteParticipants[sid] == nil)
            await f.wait("the stranger out of the friend's call", timeout: 10) { f.room.remoteParticipants[sid] == nil }
            await h.waitRoom("disconnect(stranger,localHangUp)")
            await f.waitRoom("disconnect(stranger,remoteHangUp)")
            await s.waitRoom("ended", timeout: 10)
            await h.wait("a new epoch", timeout: 5) { h.room.linkLeg!.epoch > epochBefore }
            #expect(strangerLeg.epoch == epochBefore, "the removed participant got epoch \(strangerLeg.epoch)")
            let hostDisplay = h.room.linkLeg!.display
            #expect(
                RoomLinkEnvelope.open(
                    hostDisplay, room: room, hostKey: link.hostKey, memberSecret: strangerLeg.secret,
                    memberPublic: strangerLeg.publicKey) == nil)
            #expect(h.room.linkLeg!.admission.members.count == 1)
            let counted = (framesFromStranger(0), framesFromStranger(1))
            // In the order a hang-up has: the participant's tracks unsubscribed, then it leaves; the
            // stranger's own call ends after its last participant left.
            Self.expectLeaveOrder(h.recorder.room, "stranger", reason: "localHangUp")
            Self.expectLeaveOrder(f.recorder.room, "stranger", reason: "remoteHangUp")
            for other in ["host", "friend"] { Self.expectLeaveOrder(s.recorder.room, other, reason: "remoteHangUp") }
            #expect(s.recorder.room.last == "ended", "\(s.recorder.room)")
            // Its keys are gone from both receivers, the server dropped its feed, and its request
            // (its public key) is refused from now on.
            #expect(h.room.sfu?.remoteKeyIDs[sid] == nil && f.room.sfu?.remoteKeyIDs[sid] == nil)
            let strangerFeed = strangerLegFeed
            let afterRemoval = try await admin.listParticipants(room: room)
            #expect(!afterRemoval.contains { $0.id == strangerFeed }, "\(afterRemoval)")
            let again = h.room.linkLeg!.admission.consider(strangerLeg.display, feed: 999_999)
            #expect(again == .refuse(.removed))

            // The two left still see each other after the key changed.
            await Self.waitInRoom(h, with: [f])
            await Self.waitKeysSettled([h, f])
            let before = (
                attachers[0].probe(Self.identity(f)).snapshot.frames, attachers[1].probe(Self.identity(h)).snapshot.frames
            )
            await Self.feed(
                [h, f], of: peers, attachers: attachers, seconds: 2, after: Int(Date().timeIntervalSince(firstFeed) / 0.02))
            #expect(attachers[0].probe(Self.identity(f)).snapshot.frames - before.0 >= 20)
            #expect(attachers[1].probe(Self.identity(h)).snapshot.frames - before.1 >= 20)
            #expect((framesFromStranger(0), framesFromStranger(1)) == counted)

            // Revocation: the same link, presented by a newcomer, is refused and kicked.
            let refusedBefore = h.room.linkLeg!.admission.refusals[.revoked] ?? 0
            #expect(h.room.revokeLink(link))
            try late.room.joinRoom(link: shared, name: "Lou")
            await h.wait("the revoked link refused", timeout: 10) {
                (h.room.linkLeg?.admission.refusals[.revoked] ?? 0) > refusedBefore
            }
            // Until the server no longer lists the newcomer's feed (the host had it kicked).
            let lateFeed = try #require(late.room.sfu?.feed)
            var afterKick = try await admin.listParticipants(room: room)
            for _ in 0..<100 where afterKick.contains(where: { $0.id == lateFeed }) {
                try await Task.sleep(for: .milliseconds(100))
                afterKick = try await admin.listParticipants(room: room)
            }
            #expect(!afterKick.contains { $0.id == lateFeed }, "\(afterKick)")
            #expect(late.room.remoteParticipants.isEmpty && late.room.linkLeg?.epoch == 0)
            #expect(
                h.room.remoteParticipants.count == 1 && f.room.remoteParticipants.count == 1,
                "host: \(h.recorder.room) friend: \(f.recorder.room)")
            await session.destroy()

            // The host leaves: the room ends for the friend too (nobody makes its keys any more).
            h.room.disconnectAll()
            await f.waitRoom("ended", timeout: 10)
            Self.expectLeaveOrder(f.recorder.room, "host", reason: "remoteHangUp")
            #expect(f.room.linkLeg == nil && f.room.sfu == nil)
            for p in all { p.room.disconnectAll() }
        }
    }

    /// Links that are not the host's: a secret one bit off, a forged host key, the right secret
    /// under another room number. None is let in: the host refuses and counts the first two
    /// (the third names a room that does not exist, which a joiner does not make), none gets a key, and each joiner's call fails
    /// with `mediaSetupFailed` once its wait is over, with no other event. A good link let in
    /// meanwhile works. At the server, a subscriber without the keys (or with keys of another
    /// room key) decodes none of the good participant's frames; with the keys derived from the
    /// host's room key for its feed it decodes them.
    @Test func wrongLinksAreRefusedAndDecryptNothing() async throws {
        try await Self.withPeers(["host", "good", "flipped", "forged", "elsewhere"]) { janus, room, all in
            let (h, good, flipped, forged, elsewhere) = (all[0], all[1], all[2], all[3], all[4])
            let link = try h.room.createLink(name: "Hana")
            var bits = link.secret
            bits[0] ^= 0x80
            let wrongSecret = try #require(RoomLink.make(server: link.server, hostKey: link.hostKey, secret: bits))
            let forgedHost = try #require(
                RoomLink.make(
                    server: link.server, hostKey: Sodium.x25519Public(secret: Sodium.randomSecret(32)), secret: link.secret))
            var otherServer = link.server
            otherServer.room += 1
            let otherRoom = try #require(RoomLink.make(server: otherServer, hostKey: link.hostKey, secret: link.secret))
            let wrong = [flipped, forged, elsewhere]
            for p in wrong { p.room.environment.linkAdmissionWait = .seconds(3) }
            try good.room.joinRoom(link: link, name: "Gil")
            try flipped.room.joinRoom(link: wrongSecret, name: "Flo")
            try forged.room.joinRoom(link: forgedHost, name: "Fay")
            try elsewhere.room.joinRoom(link: otherRoom, name: "Eve")
            await Self.waitInRoom(good, with: [h])
            await h.wait("two refusals", timeout: 10) { (h.room.linkLeg?.admission.refusals[.unknownLink] ?? 0) >= 2 }
            let failed = "failed(mediaSetupFailed(participant: \"\", detail: \"the host of the room did not let us in\"))"
            // The room elsewhere does not exist, and a joiner does not make it: the SFU refuses it.
            let noRoom = "failed(mediaSetupFailed(participant: \"\", detail: \"the SFU at \(link.server.url) could not be joined"
            for p in wrong {
                await p.wait("its call failed", timeout: 10) { !p.recorder.room.isEmpty }
                let expected = p === elsewhere ? noRoom : failed
                #expect(p.recorder.room.count == 1 && p.recorder.room[0].hasPrefix(expected), "\(p.name): \(p.recorder.room)")
                #expect(p.room.remoteParticipants.isEmpty && p.room.linkLeg == nil && p.room.sfu == nil)
            }
            #expect(h.room.remoteParticipants.count == 1 && h.room.linkLeg?.admission.members.count == 1)

            // What the server forwards of the good participant's feed.
            await Self.waitKeysSettled([h, good])
            let feed = try #require(good.room.sfu?.feed)
            let range = 10_000..<20_000
            let keys = RoomLinkSenderKeys.keys(roomKey: try #require(h.room.linkLeg?.roomKey), feed: feed)
            let other = RoomLinkSenderKeys.keys(roomKey: RandomBytes.bytes(32), feed: feed)
            let withKeys = try await CallSFUTests.Tap(server: janus.address, room: room, feed: feed, range: range, decrypt: true)
            let withoutKeys = try await CallSFUTests.Tap(
                server: janus.address, room: room, feed: feed, range: range, decrypt: true)
            let otherKeys = try await CallSFUTests.Tap(server: janus.address, room: room, feed: feed, range: range, decrypt: true)
            for kid in [keys.video, keys.audio] { try withKeys.receiver.addKey(keyID: kid, baseKey: keys.baseKey) }
            for kid in [other.video, other.audio] { try otherKeys.receiver.addKey(keyID: kid, baseKey: other.baseKey) }
            let taps = [withKeys, withoutKeys, otherKeys]
            await h.wait("the taps connected", timeout: 10) { taps.allSatisfy { $0.connection.state == .connected } }
            await Self.feed([good], of: all, attachers: [], seconds: 2, after: 3_000, alsoWaitFor: [withKeys.probe])
            print("CallSFULinkTests: taps \(withKeys.probe.snapshot) \(withoutKeys.probe.snapshot) \(otherKeys.probe.snapshot)")
            #expect(withKeys.probe.snapshot.frames >= 20, "\(withKeys.probe.snapshot)")
            #expect(withoutKeys.probe.snapshot.frames == 0 && otherKeys.probe.snapshot.frames == 0)
            for t in [withKeys, withoutKeys, otherKeys] { await t.close() }

            // The host's hang-up with a link participant removes it; a joiner's does nothing.
            let hostThere = try #require(good.room.remoteParticipants.values.first)
            hostThere.disconnect()
            #expect(good.room.remoteParticipants.count == 1)
            try #require(h.room.remoteParticipants.values.first).disconnect()
            await good.waitRoom("ended", timeout: 10)
            #expect(h.room.linkLeg == nil || h.room.linkLeg?.admission.members.isEmpty == true)
            for p in all { p.room.disconnectAll() }
        }
    }
}
