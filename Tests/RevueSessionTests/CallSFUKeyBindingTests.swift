import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// End-to-end keys bound to their senders in a room through a real Janus: what a newcomer can
/// read, and a participant that claims another's feed.
extension CallSFUTests {
    /// a and b are in a call when c joins. A frame a encrypted before c joined opens at b and not
    /// at c: c was given a key nothing was sent under (a's key ID changes on the join), and a's
    /// media still reaches c and b afterwards. Then c claims b's feed to a: a refuses the claim,
    /// keeps c's own feed for c, and still shows each sender's pictures as that sender's.
    @Test func aNewcomerCannotReadWhatWasSentBeforeAndAFeedClaimedTwiceIsRefused() async throws {
        try await Self.withThreeFriends { _, _, peers in
            let (a, b, c) = (peers[0], peers[1], peers[2])
            let (_, attachers) = Self.attachProbes(peers)
            try await startCall(a, b)
            for (me, other) in [(a, b), (b, a)] { await Self.waitSubscribed(me, to: [other]) }
            let aSFU = try #require(a.room.sfu), bSFU = try #require(b.room.sfu)
            await Self.waitKeysInUse([a, b])
            let keyBefore = aSFU.keyIDs.video
            let recorded = try #require(aSFU.video).encrypt(Array(repeating: 0x42, count: 64))
            let aAtB = try #require(bSFU.subscriptions[a.id]?.ssrcs.first)
            #expect(Self.open(recorded, with: try #require(bSFU.frames), ssrc: aAtB) == .success(64))

            try await startCall(a, c)
            await b.wait("c in b's room") { b.room.remoteParticipants[c.id] != nil }
            for p in peers { await Self.waitSubscribed(p, to: peers.filter { $0 !== p }) }
            let cSFU = try #require(c.room.sfu), cFrames = try #require(cSFU.frames)
            await c.wait("a's new key at c") { cSFU.remoteKeyIDs[a.id]?.isEmpty == false }
            let keyAfter = aSFU.keyIDs.video
            print(
                "CallSFUTests: a's video key ID \(keyBefore) before c joined, \(keyAfter) after; c holds \(cSFU.remoteKeyIDs[a.id] ?? [])"
            )
            #expect(keyAfter != keyBefore)
            #expect(!(cSFU.remoteKeyIDs[a.id] ?? []).contains(keyBefore))
            let aAtC = try #require(cSFU.subscriptions[a.id]?.ssrcs.first)
            #expect(Self.open(recorded, with: cFrames, ssrc: aAtC) == .failure(.unknownKey))

            // After the switch, a's media decodes at both.
            await Self.waitKeysInUse(peers)
            let fromA = [1, 2].map { attachers[$0].probe(a.id) }
            let before = fromA.map(\.snapshot.frames)
            await CallMediaQualityTests.feed(
                a.room.localParticipant.localTrackPublications, tone: Self.tones[0], seconds: 2, startFrame: 0
            ).value
            await settle(0.5)
            for (i, probe) in fromA.enumerated() {
                let got = probe.snapshot.frames - before[i]
                print("CallSFUTests: \(peers[i + 1].name) from a after c joined: \(got) frames of 30")
                #expect(got >= 20 && probe.snapshot.foreign == 0, "\(peers[i + 1].name) from a: \(probe.snapshot)")
                #expect(probe.snr(Self.tones[0]) > 10, "\(peers[i + 1].name) hears a at \(probe.snr(Self.tones[0])) dB")
            }

            // c claims b's feed (with its own keys) to a.
            let aAtCFeed = try #require(aSFU.remoteFeeds[c.id]), bFeed = try #require(bSFU.feed)
            let refusedBefore = try #require(a.room.core).counters.callSignalsRefused
            var claim = CallSignal(type: "adr", op: CallSignal.Op.sfu)
            claim.sfu = cSFU.server.identifier
            claim.feed = String(bFeed)
            claim.key = Data(cSFU.baseKey).base64EncodedString()
            claim.kids = [cSFU.keyIDs.video, cSFU.keyIDs.audio]
            c.room.send(claim, to: a.id)
            await a.wait("a refuses c's claim on b's feed") {
                (a.room.core?.counters.callSignalsRefused ?? 0) > refusedBefore
            }
            #expect(aSFU.remoteFeeds[c.id] == aAtCFeed && aSFU.remoteFeeds[b.id] == bFeed)
            let atA = [b, c].map { attachers[0].probe($0.id) }
            let startA = atA.map(\.snapshot.frames)
            let feeds = [(b, 1), (c, 2)].map { (p: CallPeer, i: Int) in
                CallMediaQualityTests.feed(
                    p.room.localParticipant.localTrackPublications, tone: Self.tones[i], seconds: 2, startFrame: i * 30_000 + 600)
            }
            for f in feeds { await f.value }
            await settle(0.5)
            for (i, probe) in atA.enumerated() {
                let got = probe.snapshot.frames - startA[i]
                #expect(got >= 20 && probe.snapshot.foreign == 0, "a from \([b, c][i].name): \(probe.snapshot)")
            }
            for p in peers { p.room.disconnectAll() }
        }
    }

    /// The SFU lies about which feed each stream carries: at c, the streams Janus said carry a's
    /// feed are said to carry b's and the other way round (what a server that swaps its SSRC
    /// mapping reports), and c routes them so. Janus still forwards a's media on a's streams, so
    /// c's renderer for b now gets a's frames and the other way round; bound to the key IDs of
    /// the participant each stream is said to carry, none of them decodes (each is a wrong
    /// sender), and nothing is shown under the wrong name.
    @Test func anSFUThatSwapsWhoseFeedAStreamCarriesGetsNothingShownUnderTheWrongName() async throws {
        try await Self.withThreeFriends { _, _, peers in
            let (a, b, c) = (peers[0], peers[1], peers[2])
            let (_, attachers) = Self.attachProbes(peers)
            try await Self.startThreeWayCall(peers)
            await Self.waitKeysInUse(peers)
            let cSFU = try #require(c.room.sfu), sub = try #require(cSFU.subscriber), frames = try #require(cSFU.frames)
            let aFeed = try #require(cSFU.remoteFeeds[a.id]), bFeed = try #require(cSFU.remoteFeeds[b.id])
            for (mid, stream) in sub.streams {
                if stream.feed == aFeed {
                    sub.streams[mid]?.feed = bFeed
                } else if stream.feed == bFeed {
                    sub.streams[mid]?.feed = aFeed
                }
            }
            c.room.sfuRoute(cSFU)
            let probes = [a, b].map { attachers[2].probe($0.id) }
            let before = probes.map(\.snapshot), wrongBefore = frames.statistics.wrongSender
            let feeds = [(a, 0), (b, 1)].map { (p: CallPeer, i: Int) in
                CallMediaQualityTests.feed(
                    p.room.localParticipant.localTrackPublications, tone: Self.tones[i], seconds: 2, startFrame: i * 30_000 + 900)
            }
            for f in feeds { await f.value }
            await settle(0.5)
            let wrong = frames.statistics.wrongSender - wrongBefore
            for (i, probe) in probes.enumerated() {
                let now = probe.snapshot
                print(
                    "CallSFUTests: swapped mapping, c's view of \([a, b][i].name): \(now.frames - before[i].frames) frames, "
                        + "\(now.foreign - before[i].foreign) of another sender; \(wrong) frames refused as a wrong sender")
                #expect(now.frames == before[i].frames && now.foreign == before[i].foreign, "\([a, b][i].name): \(now)")
            }
            #expect(wrong >= 40, "\(frames.statistics)")
            for p in peers { p.room.disconnectAll() }
        }
    }

    /// Waits until each of `peers` sends under the newest key it announced (its senders switch
    /// `Room.sfuKeySwitchDelay` after announcing one).
    static func waitKeysInUse(_ peers: [CallPeer]) async {
        await peers[0].wait("every participant's senders on its newest key") {
            peers.allSatisfy { p in p.room.sfu.map { $0.keyGeneration == $0.keyGenerationInUse } ?? false }
        }
    }

    /// Decrypts `frame` as the receive pipeline would for the stream `ssrc`: the plaintext length,
    /// or the error.
    static func open(_ frame: [UInt8], with receiver: SFrameReceiver, ssrc: UInt32) -> Result<Int, SFrameError> {
        var out = [UInt8](repeating: 0, count: frame.count)
        return out.withUnsafeMutableBytes { o in
            frame.withUnsafeBytes { f in
                Result { () throws(SFrameError) in
                    try receiver.decryptFrame(f, clearPrefix: 0, into: o, recordingCounter: false, ssrc: ssrc)
                }
            }
        }
    }
}
