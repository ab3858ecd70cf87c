import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// A friend that speaks the call protocol by hand: it records every reserved message it receives
/// and sends whatever signalling a test gives it on its real, encrypted friend channel. While
/// `honest` is true its own Room also sees what arrives and behaves like any peer.
@MainActor
final class HostileFriend {
    let peer: CallPeer
    /// Reserved messages received, with the sender's friend ID, in order.
    var received: [(from: String, signal: CallSignal)] = []
    var honest = true
    /// Operations its own Room does not get even while honest.
    var withheld: Set<String> = []

    init(_ peer: CallPeer) {
        self.peer = peer
        let room = peer.room
        peer.revue.core!.reservedMessageHandler = { [weak self, weak room] id, body in
            guard let self else { return SessionCore.isReserved(body) }
            let s = CallSignal.parse(body)
            if let s { self.received.append((id, s)) }
            if self.honest, !self.withheld.contains(s?.op ?? ""), let room { return room.receiveReserved(body, from: id) }
            return SessionCore.isReserved(body)
        }
    }

    var id: String { peer.id }

    /// Sends a call-layer message as-is.
    func send(_ s: CallSignal, to friendId: String) {
        #expect(peer.revue.core!.sendReserved(friendId: friendId, text: s.json))
    }

    func join(_ friendId: String, token: String?, members: [String]) {
        var s = CallSignal(op: CallSignal.Op.join, inv: token)
        s.members = members
        s.mode = "sendAndRecv"
        send(s, to: friendId)
    }
}

/// Joins must be authorized by an introduction from a member; a friend who is not invited gets
/// no participant, no key and no media, however it asks, and each attempt is counted.
@MainActor
@Suite(.serialized) struct CallHostileFriendTests {
    @Test func uninvitedReplayedAndMisdirectedJoinsAreRefusedAndCounted() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node), c = try CallPeer("c", node: node)
        let hp = try CallPeer("h", node: node)
        defer { for p in [a, b, c, hp] { p.peer.remove() } }
        try await makeFriends([a, b, c, hp])
        // Audio only: this suite runs beside the timing-sensitive session tests.
        for p in [a, b, c, hp] { p.room.options.cameraEnabled = false }
        let h = HostileFriend(hp)

        // h is invited once, properly, and joins b with the introduction a gave it.
        try await startCall(a, b)
        try await startCall(a, hp)
        await b.wait("h in b's room") { b.room.remoteParticipants[h.id] != nil }
        await hp.wait("b in h's room") { hp.room.remoteParticipants[b.id] != nil }
        let intros = h.received.filter { $0.from == a.id && $0.signal.op == CallSignal.Op.intros }
        let used = try #require(intros.first?.signal.intros?[b.id])
        // Everyone else in the call was told about h by a, with the token h used at b.
        #expect(b.room.introductions.wasUsed(used))

        // c is invited by a too, but never uses its introductions, so b keeps a real, unused one
        // for c; c hands its token for b to h (a stolen or shared introduction).
        let cw = HostileFriend(c)
        cw.withheld = [CallSignal.Op.intros]
        try await startCall(a, c)
        await c.wait("c's introductions") { cw.received.contains { $0.from == a.id && $0.signal.op == CallSignal.Op.intros } }
        let forC = try #require(cw.received.first { $0.signal.op == CallSignal.Op.intros }?.signal.intros?[b.id])
        await b.wait("a's introduction of c at b") { b.room.introductions[forC] != nil }
        #expect(b.room.introductions[forC]?.newcomer == c.id && b.room.introductions[forC]?.introducer == a.id)
        #expect(b.room.remoteParticipants[c.id] == nil)

        // h leaves and from now on only speaks by hand.
        hp.room.disconnectAll()
        await b.wait("h gone at b") { b.room.remoteParticipants[h.id] == nil }
        await a.wait("h gone at a") { a.room.remoteParticipants[h.id] == nil }
        h.honest = false
        await settle(0.5)  // what b sent before it saw h leave has arrived
        let refused0 = b.revue.counters.callSignalsRefused
        let seen0 = h.received.count
        #expect(b.recorder.calls.filter { $0 == "connect(h)" }.count == 1)

        // b keeps talking to a all along, so there is media h could receive.
        let audio = try #require(b.room.localParticipant.publication(.audio)?.audioCapturer)
        let feeding = CallMediaSendTests.feedSpeech(audio, chunks: 300, talking: 0..<300, seed: 7)
        defer { feeding.cancel() }
        // h offers a media key of its own, as a participant would.
        var adr = CallSignal(type: "adr", op: CallSignal.Op.media)
        adr.suite = SRTPSuite.aeadAES128GCM.sdpName
        adr.key = SRTPKeyMaterial.random(for: .aeadAES128GCM).inlineKeyParams

        // 1. The introduction h already used, replayed.
        h.join(b.id, token: used, members: [a.id])
        // 2. A join with no introduction at all, and one with a made-up token (held for the
        //    introduction that never comes, then refused).
        h.join(b.id, token: nil, members: [a.id])
        h.join(b.id, token: "00112233445566FF", members: [a.id])
        // 3. The introduction a made for c at b, in h's hands.
        h.join(b.id, token: forC, members: [a.id])
        // 4. h vouches for itself, not being in b's call, then uses that token.
        var selfIntro = CallSignal(op: CallSignal.Op.introduce, inv: "BAD0BAD0BAD0BAD0")
        selfIntro.text = h.id
        h.send(selfIntro, to: b.id)
        // 5. A `joined` nobody asked for, the media socket, a publication.
        h.send(CallSignal(op: CallSignal.Op.joined), to: b.id)
        h.send(adr, to: b.id)
        var publish = CallSignal(type: "track", op: CallSignal.Op.publish)
        publish.sid = "audio"; publish.kind = "audio"
        h.send(publish, to: b.id)
        // 6. Signalling smuggled in application text: the API refuses it, and a chat carrying a
        //    join is only text (and h is not in the call, so it is not even delivered).
        var joinText = CallSignal(op: CallSignal.Op.join, inv: used)
        joinText.members = [a.id]
        await #expect(throws: FriendMessageError.reservedFormat) {
            _ = try await hp.friends.sendMessage(friendId: b.id, message: joinText.json)
        }
        var chat = CallSignal(op: CallSignal.Op.chat)
        chat.text = joinText.json
        h.send(chat, to: b.id)
        await settle(0.5)
        h.join(b.id, token: "BAD0BAD0BAD0BAD0", members: [a.id])

        // The held joins are refused after Room.introductionWait.
        await b.wait("every attempt refused", timeout: (Room.introductionWait + .seconds(3)).inSeconds) {
            b.revue.counters.callSignalsRefused - refused0 >= 7
        }
        await settle(0.5)
        // replay, no token, made-up token (replaced by the later held join), c's introduction,
        // h's own introduction, unasked joined, h's self-made token.
        #expect(b.revue.counters.callSignalsRefused - refused0 == 7)
        #expect(b.recorder.calls.filter { $0 == "connect(h)" }.count == 1)
        #expect(b.room.remoteParticipants[h.id] == nil && b.room.legs[h.id] == nil)
        #expect(b.room.localMedia.values.allSatisfy { !$0.targetIds.contains(h.id) })
        #expect(!b.recorder.room.contains { $0.hasPrefix("message(h") })
        // The introduction for c is still c's to use.
        #expect(b.room.introductions[forC]?.newcomer == c.id)
        // h got hang-ups (and perhaps b's hello), never a key, a track, a joined or introductions.
        let after = h.received[seen0...].filter { $0.from == b.id }
        #expect(
            after.allSatisfy { [CallSignal.Op.hangup, CallSignal.Op.hello].contains($0.signal.op) }, "\(after.map(\.signal.op))")
        #expect(after.contains { $0.signal.op == CallSignal.Op.hangup })
        // b's audio went to a the whole time, and none of it to h: b made h no leg and no place
        // in its fan-outs (checked above), so its link to h carried only the session and ICE.
        #expect((a.room.legs[b.id]?.pipeline?.inboundStats.first { $0.kind == "audio" }?.packetsReceived ?? 0) > 50)
        // a, who made the introductions, saw none of this.
        #expect(a.revue.counters.callSignalsRefused == 0)
        a.room.disconnectAll()
    }

    /// A participant floods us with track publications: thousands of new track IDs, over-long
    /// IDs and names. We keep at most `Room.maxRemotePublications` of its publications, count
    /// every one refused, and its honest audio track keeps playing.
    @Test func thousandsOfTrackPublicationsAreCappedAndCounted() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), hp = try CallPeer("h", node: node)
        defer { a.peer.remove(); hp.peer.remove() }
        try await makeFriends([a, hp])
        for p in [a, hp] { p.room.options.cameraEnabled = false }
        let h = HostileFriend(hp)
        try await startCall(a, hp)
        let p = try #require(a.room.remoteParticipants[h.id])
        await a.wait("h's audio subscribed") { (p.trackPublications["audio"] as? RemoteTrackPublication)?.isSubscribed == true }
        let audio = try #require(hp.room.localParticipant.publication(.audio)?.audioCapturer)
        let feeding = CallMediaSendTests.feedSpeech(audio, chunks: 3000, talking: 0..<3000, seed: 11)
        defer { feeding.cancel() }
        let refused0 = a.revue.counters.callSignalsRefused
        let swallowed0 = a.revue.counters.reservedMessagesSwallowed

        // 2,000 new track IDs, then over-long IDs and names, all on h's real encrypted channel
        // (at most `reservedQueueCapacity` wait for a receipt, so the flood goes at that pace).
        var flood: [CallSignal] = (0..<2000).map { i in
            var s = CallSignal(type: "track", op: CallSignal.Op.publish)
            s.sid = "x\(i)"; s.kind = i % 2 == 0 ? "audio" : "video"; s.text = "track \(i)"
            return s
        }
        var longId = CallSignal(type: "track", op: CallSignal.Op.publish)
        longId.sid = String(repeating: "i", count: Room.maxTrackIdLength + 1); longId.kind = "video"
        var longName = CallSignal(type: "track", op: CallSignal.Op.publish)
        longName.sid = "n"; longName.kind = "video"; longName.text = String(repeating: "n", count: Room.maxTrackNameLength + 1)
        flood += [longId, longName]
        let started = MonotonicTime.now
        for s in flood {
            let text = s.json
            while !hp.revue.core!.sendReserved(friendId: a.id, text: text) { try await Task.sleep(for: .milliseconds(2)) }
        }
        let expected = flood.count - (Room.maxRemotePublications - 1)
        await a.wait("every publication delivered", timeout: 60) {
            a.revue.counters.callSignalsRefused - refused0 >= expected
        }
        print("track publication flood: \(flood.count) publications in \((MonotonicTime.now - started).inSeconds) s")
        await settle(0.3)
        #expect(a.revue.counters.reservedMessagesSwallowed - swallowed0 >= flood.count)

        // Kept: the honest audio track and the first 15 of the flood; refused: all the others.
        #expect(p.trackPublications.count == Room.maxRemotePublications)
        #expect(p.trackPublications["audio"] != nil)
        #expect(p.trackPublications.keys.allSatisfy { $0.utf8.count <= Room.maxTrackIdLength })
        #expect(p.trackPublications.values.allSatisfy { $0.name.utf8.count <= Room.maxTrackNameLength })
        #expect(a.revue.counters.callSignalsRefused - refused0 == expected)
        // Unpublishing frees places again, up to the same bound.
        var unpublish = CallSignal(type: "track", op: CallSignal.Op.unpublish)
        unpublish.sid = "x0"
        h.send(unpublish, to: a.id)
        var again = CallSignal(type: "track", op: CallSignal.Op.publish)
        again.sid = "again"; again.kind = "video"
        h.send(again, to: a.id)
        h.send(again, to: a.id)
        await a.wait("the freed place taken") { p.trackPublications["again"] != nil }
        #expect(p.trackPublications["x0"] == nil && p.trackPublications.count == Room.maxRemotePublications)

        // The call still works: h is in it, its audio plays, and its messages arrive.
        #expect(a.room.remoteParticipants[h.id] === p)
        #expect((p.trackPublications["audio"] as? RemoteTrackPublication)?.isSubscribed == true)
        func audioPackets() -> UInt64 {
            a.room.legs[h.id]?.pipeline?.inboundStats.first { $0.kind == "audio" }?.packetsReceived ?? 0
        }
        let packets0 = audioPackets()
        await a.wait("h's audio still arrives") { audioPackets() >= packets0 + 40 }
        _ = try await hp.room.localParticipant.sendMessage("still here")
        await a.waitRoom("message(h,still here)")
        a.room.disconnectAll()
    }
}
