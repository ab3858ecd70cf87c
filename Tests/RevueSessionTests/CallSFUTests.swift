// Calls whose media goes through a real Janus VideoRoom (RoomOptions.sfu): the same Room API,
// every participant publishing once and receiving every other participant's feed, SFrame end to
// end so that the server (and a tap at it) cannot decode, keys rotated when someone leaves, and
// the modes deciding what is published and subscribed at the server.
import Foundation
import MediaCore
import MediaTestSupport
import Synchronization
import Testing

@testable import RevueSession

/// Decoded pictures of one sender as one receiver gets them: how many carry a bar code in the
/// sender's range, their mean PSNR against the source, and the PCM.
final class SenderProbe: VideoRenderer, AudioSink, @unchecked Sendable {
    struct Counts {
        var frames = 0, foreign = 0, unreadable = 0
        var psnrSum = 0.0
        /// The highest frame index decoded from the sender's range (-1: none).
        var lastIndex = -1
    }
    let range: Range<Int>
    let counts = Mutex(Counts())
    let pcm = Mutex<[Int16]>([])
    init(range: Range<Int>) { self.range = range }

    func render(_ frame: DecodedVideoFrame) {
        guard let (index, psnr) = syntheticFrameQuality(frame) else {
            counts.withLock { $0.unreadable += 1 }
            return
        }
        counts.withLock {
            if range.contains(index) && psnr > 25 {
                $0.frames += 1
                $0.psnrSum += psnr
                $0.lastIndex = max($0.lastIndex, index)
            } else {
                $0.foreign += 1
            }
        }
    }
    func play(_ s: Span<Int16>, sampleRate: Int, channels: Int) { pcm.withLock { $0 += copied(s) } }

    var snapshot: Counts { counts.withLock { $0 } }
    var meanPSNR: Double { let c = snapshot; return c.frames > 0 ? c.psnrSum / Double(c.frames) : 0 }
    /// The tone's SNR over the last `seconds` of sound played, ending 0.1 s before the last loud
    /// sample (the playout conceals for up to 0.2 s after a stream ends, so the last window may
    /// hold some of that): the median over 0.2 s windows, each fitted on its own, so that one jump
    /// in phase where the playout stretched to follow the network's jitter (as it should), or the
    /// concealment at the end, does not count as noise over the whole second; -99 without that
    /// much sound.
    func snr(_ frequency: Double, seconds: Double = 1) -> Double {
        pcm.withLock { x in
            guard let last = x.lastIndex(where: { abs(Int($0)) > 1000 }) else { return -99 }
            let end = last - 4_800, start = end - Int(seconds * 48_000)
            guard start >= 0 else { return -99 }
            let snrs = windowedToneSNRs(x[start..<end], frequency: frequency, window: 9_600)
            return snrs.isEmpty ? -99 : snrs[snrs.count / 2]
        }
    }
}

/// Attaches one `SenderProbe` per remote participant to whatever the receiver subscribes to.
@MainActor
final class ProbeAttacher: RoomDelegate {
    var probes: [String: SenderProbe] = [:]
    let ranges: [String: Range<Int>]
    init(ranges: [String: Range<Int>]) { self.ranges = ranges }
    func probe(_ id: String) -> SenderProbe {
        if let p = probes[id] { return p }
        let p = SenderProbe(range: ranges[id] ?? 0..<0)
        probes[id] = p
        return p
    }
    func room(_ room: Room, participant: RemoteParticipant, didSubscribeTrack publication: RemoteTrackPublication) {
        publication.renderer = probe(participant.identity)
        publication.audioSink = probe(participant.identity)
    }
}

/// An SFU that answers every request with the same broken reply and closes, on loopback, until
/// stopped: what a client meets behind a broken proxy or a hostile server. Thread rule: any
/// thread. Cost: one accept thread; one short read and write per connection.
final class BrokenHTTPServer: Sendable {
    let port: UInt16
    /// Connections answered so far.
    let answered = Atomic<Int>(0)
    private let listener: TCPSocket
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    init(reply: String) throws {
        listener = try TCPSocket.listen(on: .loopbackIPv4(port: 0))
        port = try listener.localAddress().port
        let bytes = Array(reply.utf8)
        Thread { [self] in
            defer { finished.signal() }
            while !stopping.load(ordering: .relaxed) {
                guard (try? listener.poll(.readable, timeoutMilliseconds: 50)) == true, let client = try? listener.accept() else {
                    continue
                }
                // Read the request head (or what comes within 200 ms), answer, close.
                var chunk = [UInt8](repeating: 0, count: 4096)
                if (try? client.poll(.readable, timeoutMilliseconds: 200)) == true {
                    _ = chunk.withUnsafeMutableBytes { try? client.receive(into: $0) }
                }
                _ = bytes.withUnsafeBytes { try? client.sendAll($0, deadline: .now + .seconds(1)) }
                client.close()
                answered.add(1, ordering: .relaxed)
            }
        }.start()
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        finished.wait()
        listener.close()
    }
}

@MainActor
@Suite(.serialized) struct CallSFUTests {
    static let tones: [Double] = [440, 660, 880]

    /// Janus, a rendezvous node and three friends a, b and c with the SFU setting (E2EE as
    /// `e2ee`; `adjust` changes their options before they befriend); all stopped after `body`,
    /// which gets the server, the room number and the peers.
    /// `janusOptions` makes it a server with TLS, WebSockets or authentication, and `secure` has
    /// the peers reach it over wss://localhost with that CA file, token and room pin (nil: its plain
    /// HTTP API).
    static func withThreeFriends(
        e2ee: Bool = true, janusOptions: JanusServer.Options = JanusServer.Options(),
        secure: (caFile: String, token: String, pin: String?)? = nil, adjust: ([CallPeer]) -> Void = { _ in },
        _ body: @MainActor (JanusServer, UInt64, [CallPeer]) async throws -> Void
    ) async throws {
        let janus = try await JanusServer.started(options: janusOptions)
        defer { janus.stop() }
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let room = UInt64.random(in: 1...1_000_000)
        let server = secure.map {
            SFUServer(
                url: "wss://localhost:\(janus.wssPort)/", room: room, endToEndEncryption: e2ee, token: $0.token,
                roomSecret: "room-secret", pin: $0.pin, certificateAuthorityFile: $0.caFile)
        }
        let peers = try Self.peers(["a", "b", "c"], node: node, janus: janus, room: room, e2ee: e2ee, server: server)
        defer { for p in peers { p.peer.remove() } }
        adjust(peers)
        try await makeFriends(peers)
        try await body(janus, room, peers)
    }

    /// One `ProbeAttacher` per peer, each knowing every peer's bar-code range (peer i feeds
    /// frames from i * 10,000: `startFrame` i * 30,000 at 15 fps).
    static func attachProbes(_ peers: [CallPeer]) -> ([String: Range<Int>], [ProbeAttacher]) {
        let ranges = Dictionary(uniqueKeysWithValues: peers.enumerated().map { ($1.id, ($0 * 10_000)..<($0 * 10_000 + 10_000)) })
        let attachers = peers.map { _ in ProbeAttacher(ranges: ranges) }
        for (p, at) in zip(peers, attachers) { p.room.delegates.add(delegate: at) }
        return (ranges, attachers)
    }

    /// Peers with the SFU setting, 320x180.
    static func peers(
        _ names: [String], node: RendezvousNode, janus: JanusServer, room: UInt64, e2ee: Bool = true, server: SFUServer? = nil
    ) throws -> [CallPeer] {
        try names.map { name in
            let p = try CallPeer(name, node: node)
            p.room.options.videoWidth = 320
            p.room.options.videoHeight = 180
            p.room.options.sfu =
                server ?? SFUServer(url: "http://127.0.0.1:\(janus.port)/janus", room: room, endToEndEncryption: e2ee)
            return p
        }
    }

    /// a invites b, then c; returns once all three are in one another's rooms and each receives
    /// the other two through a connected subscription.
    static func startThreeWayCall(_ peers: [CallPeer]) async throws {
        let (a, b, c) = (peers[0], peers[1], peers[2])
        try await startCall(a, b)
        try await startCall(a, c)
        await b.wait("c in b's room") { b.room.remoteParticipants[c.id] != nil }
        for p in peers { await Self.waitSubscribed(p, to: peers.filter { $0 !== p }) }
    }

    /// Waits until `me` receives each of `others` through a connected subscription.
    static func waitSubscribed(_ me: CallPeer, to others: [CallPeer], timeout: Double = 20) async {
        await me.wait("\(me.name) subscribed at the SFU to \(others.map(\.name))", timeout: timeout) {
            others.allSatisfy { o in
                me.room.sfu?.subscriptions[o.id] != nil && me.room.sfu?.subscriber?.connection.state == .connected
            }
        }
    }

    /// Feeds every peer's pictures and tone for `seconds`, then checks all directions: each decodes
    /// at least 3/4 of every other's frames, none of another sender, at a mean PSNR over 32 dB, and
    /// hears its tone (SNR over 10 dB); prints each direction's figures and audio playout.
    static func feedAndCheckEveryDirection(_ peers: [CallPeer], _ attachers: [ProbeAttacher], seconds: Double, label: String)
        async
    {
        let feeds = peers.enumerated().map { i, p in
            CallMediaQualityTests.feed(
                p.room.localParticipant.localTrackPublications, tone: Self.tones[i], seconds: seconds, startFrame: i * 30_000)
        }
        for f in feeds { await f.value }
        await settle(0.6)
        let fed = Int(seconds * 15)
        for (i, me) in peers.enumerated() {
            for (j, other) in peers.enumerated() where i != j {
                let probe = attachers[i].probe(other.id)
                let n = probe.snapshot
                #expect(n.frames >= fed * 3 / 4 && n.foreign == 0, "\(me.name) from \(other.name): \(n) of \(fed)")
                #expect(probe.meanPSNR > 32, "\(me.name) from \(other.name): \(probe.meanPSNR) dB")
                let snr = probe.snr(Self.tones[j])
                let audio = me.room.inboundStats(of: other.id)?.first { $0.kind == "audio" }
                let playout = audio.map {
                    "\($0.packetsReceived) packets, \($0.packetsLost) lost, \($0.concealedSamples) concealed, \($0.insertedSamplesForDeceleration) inserted, \($0.removedSamplesForAcceleration) removed, \($0.packetsDiscarded) discarded"
                }
                print(
                    "CallSFUTests\(label.isEmpty ? "" : " " + label): \(me.name) from \(other.name): \(n.frames) of \(fed) frames, \(String(format: "%.1f", probe.meanPSNR)) dB, tone SNR \(String(format: "%.1f", snr)) dB; audio \(playout ?? "none")"
                )
                #expect(snr > 10, "\(me.name) hears \(other.name) at \(snr) dB; audio: \(playout ?? "none")")
            }
        }
    }

    /// A raw subscriber at the server (what Janus, or anyone tapping it, gets): a subscription to
    /// `feed` with no call keys, or with the keys given.
    final class Tap {
        let session: JanusSession
        let connection: PeerConnection
        let probe: SenderProbe
        let receiver = SFrameReceiver(suite: SFUMedia.suite)

        init(server: SocketAddress, room: UInt64, feed: UInt64, range: Range<Int>, decrypt: Bool) async throws {
            session = try await JanusSession.create(server: server)
            let handle = try await JanusVideoRoom(session: session)
            let offer = try await handle.joinAsSubscriber(room: room, feeds: [feed]).sdp!
            var c = PeerConnectionConfiguration()
            c.gatheringTimeoutSeconds = 2
            if decrypt { c.frameDecryption = receiver }
            connection = try PeerConnection(configuration: c)
            probe = SenderProbe(range: range)
            connection.videoRenderer = probe
            connection.audioSink = probe
            try await connection.setRemoteDescription(JSEPSessionDescription(parsing: offer, type: .offer))
            let answer = try await connection.createAnswer()
            try await handle.start(answer: answer.sdp)
        }

        func close() async {
            connection.close()
            await session.destroy()
        }
    }

    /// Janus with HTTPS, secure WebSockets and stored-token authentication (certificates from a CA
    /// the test makes).
    static func secureJanus(_ ca: TestCertificateAuthority) -> JanusServer.Options {
        var o = JanusServer.Options()
        o.certificate = (ca.serverCertificate, ca.serverKey)
        o.webSocket = true
        o.tokenAuth = true
        return o
    }

    /// Three participants through Janus over wss:// (the host name `localhost` resolved, the
    /// certificate checked against the test's CA) with a stored token, in a room they create with
    /// a secret and a pin: all six directions decode the right sender's pictures and tone.
    @Test func threeParticipantsOverSecureWebSocketWithAToken() async throws {
        let ca = try TestCertificateAuthority()
        defer { ca.remove() }
        let token = "revue-token-\(UInt64.random(in: 0...UInt64.max))"
        try await Self.withThreeFriends(
            janusOptions: Self.secureJanus(ca), secure: (ca.caFile, token, "2468")
        ) { janus, roomNumber, peers in
            try await janus.addToken(token)
            let (_, attachers) = Self.attachProbes(peers)
            try await Self.startThreeWayCall(peers)
            for p in peers {
                let transport = p.room.sfu?.session?.transport
                #expect(transport is JanusWebSocketTransport, "\(p.name) talks to Janus through \(String(describing: transport))")
            }
            await Self.feedAndCheckEveryDirection(peers, attachers, seconds: 3, label: "wss+token")
            // The room was made with its pin: a stranger with the token but without the pin is refused.
            var endpoint = try JanusEndpoint(url: "wss://localhost:\(janus.wssPort)/", certificateAuthorityFile: ca.caFile)
            endpoint.token = token
            let stranger = try await JanusSession.create(endpoint: endpoint)
            let handle = try await JanusVideoRoom(session: stranger)
            await #expect(throws: JanusError.self) { _ = try await handle.joinAsPublisher(room: roomNumber, pin: "1357") }
            await stranger.destroy()
            for p in peers { p.room.disconnectAll() }
        }
    }

    /// A token the server does not know: the call's SFU media fails at once for every
    /// participant with `mediaSetupFailed` naming Janus's refusal (not after a timeout).
    @Test func wrongTokenFailsAtOnce() async throws {
        let ca = try TestCertificateAuthority()
        defer { ca.remove() }
        try await Self.withThreeFriends(
            janusOptions: Self.secureJanus(ca), secure: (ca.caFile, "not-a-token", nil)
        ) { janus, _, peers in
            try await janus.addToken("the-real-token")
            let (a, b) = (peers[0], peers[1])
            let started = Date()
            try await startCall(a, b)
            for (p, other) in [(a, b), (b, a)] {
                await p.wait("\(p.name)'s SFU refusal", timeout: 5) {
                    p.recorder.room.contains {
                        $0.hasPrefix("failed(mediaSetupFailed(participant: \"\(other.id)\"") && $0.contains("403")
                    }
                }
            }
            let took = Date().timeIntervalSince(started)
            print(
                "CallSFUTests: a wrong token refused \(String(format: "%.2f", took)) s after the call started: \(a.recorder.room.filter { $0.hasPrefix("failed") })"
            )
            #expect(took < 5)
            for p in peers { p.room.disconnectAll() }
        }
    }

    /// Three participants in one SFU room, E2EE on: all six directions decode the right sender's
    /// pictures and tone; each publisher sends one copy; a tap at the server decodes nothing
    /// without the keys and everything with them; after a participant leaves, the others' new
    /// keys lock the tap (holding the old keys) out while the remaining pair still decodes.
    @Test func threeParticipantsEveryDirectionEndToEndEncryptedAndKeysRotateOnLeave() async throws {
        try await Self.withThreeFriends { janus, roomNumber, peers in
            let (a, b, c) = (peers[0], peers[1], peers[2])
            let (ranges, attachers) = Self.attachProbes(peers)
            try await Self.startThreeWayCall(peers)

            // A tap at the server on a's feed, without keys and with a's keys.
            let aSFU = try #require(a.room.sfu)
            let aFeed = try #require(aSFU.feed)
            let blind = try await Tap(server: janus.address, room: roomNumber, feed: aFeed, range: ranges[a.id]!, decrypt: false)
            let keyed = try await Tap(server: janus.address, room: roomNumber, feed: aFeed, range: ranges[a.id]!, decrypt: true)
            for kid in [aSFU.keyIDs.video, aSFU.keyIDs.audio] where !aSFU.baseKey.isEmpty {
                try keyed.receiver.addKey(keyID: kid, baseKey: aSFU.baseKey)
            }
            for t in [blind, keyed] { #expect(await t.connection.waitUntilSettled(timeout: 15) == .connected) }

            let seconds = 4.0
            await Self.feedAndCheckEveryDirection(peers, attachers, seconds: seconds, label: "")
            let fed = Int(seconds * 15)
            // One copy up per publisher: what it sent equals what each receiver got (not twice that).
            for (i, p) in peers.enumerated() {
                let sent = try #require(p.room.sfu?.publisher).sentTraffic(.video).bytes
                for (j, q) in peers.enumerated() where i != j {
                    let got =
                        q.room.inboundStats(of: p.id)?.filter { $0.kind == "video" }.reduce(0) { $0 + Int($1.bytesReceived) } ?? 0
                    let ratio = Double(sent) / Double(max(got, 1))
                    #expect(ratio > 0.8 && ratio < 1.3, "\(p.name) sent \(sent) B of video, \(q.name) received \(got) B")
                }
            }
            // The server's view: nothing decodable without the keys.
            let blindCounts = blind.probe.snapshot, keyedCounts = keyed.probe.snapshot
            #expect(blindCounts.frames == 0, "tap without keys: \(blindCounts)")
            #expect(blind.probe.snr(Self.tones[0]) < 0, "tap without keys hears the tone")
            #expect(keyedCounts.frames >= fed * 3 / 4 && keyed.probe.meanPSNR > 32, "tap with a's keys: \(keyedCounts)")
            #expect(keyed.probe.snr(Self.tones[0]) > 10)

            // c leaves: a and b take new keys; the keyed tap (c's old knowledge) decodes no more.
            let oldVideoKID = aSFU.keyIDs.video
            c.room.disconnectAll()
            await a.wait("c gone") { a.room.remoteParticipants[c.id] == nil && b.room.remoteParticipants[c.id] == nil }
            await a.wait("a's key rotated") { a.room.sfu.map { $0.keyIDs.video != oldVideoKID } ?? false }
            await Self.waitKeysInUse([a, b])
            let keyedBefore = keyed.probe.snapshot.frames
            let bFromA = attachers[1].probe(a.id), bBefore = bFromA.snapshot.frames
            let feeds = [a, b].enumerated().map { i, p in
                CallMediaQualityTests.feed(
                    p.room.localParticipant.localTrackPublications, tone: Self.tones[i], seconds: 2, startFrame: i * 30_000 + 200)
            }
            for f in feeds { await f.value }
            await settle(0.5)
            #expect(keyed.probe.snapshot.frames == keyedBefore, "the old keys still decode a's media")
            #expect(keyed.receiver.statistics.unknownKeys > 0, "the tap's receiver: \(keyed.receiver.statistics)")
            let aSent = a.room.videoSendStatistics
            #expect(
                bFromA.snapshot.frames - bBefore >= 20,
                "b after the rotation: \(bFromA.snapshot.frames - bBefore); a sent: \(aSent.map { "\($0.outbound), resolution changes \($0.qualityLimitationResolutionChanges)" } ?? "-")"
            )
            #expect(bFromA.snr(Self.tones[0]) > 10)
            await blind.close()
            await keyed.close()
            for p in peers { p.room.disconnectAll() }
        }
    }

    /// Who publishes at the server, by participant: Janus's own participant list.
    static func publishersAtJanus(_ janus: JanusServer, room: UInt64) async throws -> [String: Bool] {
        let admin = try await JanusSession.create(server: janus.address)
        let handle = try await JanusVideoRoom(session: admin)
        let list = try await handle.listParticipants(room: room)
        await admin.destroy()
        return Dictionary(list.map { ($0.display ?? "", $0.publisher) }, uniquingKeysWith: { $0 || $1 })
    }

    /// Modes at the server: a `recvOnly` participant is in the room but publishes nothing and
    /// receives; a `signallingOnly` one neither publishes nor subscribes; `changeMode` round trips
    /// publish and unpublish at Janus and keep a muted microphone muted.
    @Test func modesDecideWhatIsPublishedAndSubscribedAtTheServer() async throws {
        try await Self.withThreeFriends(e2ee: false) {
            $0[1].room.options.mode = .recvOnly
            $0[2].room.options.mode = .signallingOnly
        } _: { janus, roomNumber, peers in
            let (a, b, c) = (peers[0], peers[1], peers[2])
            let (_, attachers) = Self.attachProbes(peers)
            try await startCall(a, b)
            try await startCall(a, c)
            await Self.waitSubscribed(b, to: [a])
            await a.wait("everyone at the server") { peers.allSatisfy { $0.room.sfu?.feed != nil } }
            var publishing = try await Self.publishersAtJanus(janus, room: roomNumber)
            #expect(publishing == [a.id: true, b.id: false, c.id: false], "at Janus: \(publishing)")
            #expect(a.room.sfu?.subscriptions.isEmpty == true && c.room.sfu?.subscriptions.isEmpty == true)
            #expect(b.room.sfu?.publisher == nil && c.room.sfu?.publisher == nil)

            @MainActor func window(start: Int) async {
                let feeds = [a, b].enumerated().map { i, p in
                    CallMediaQualityTests.feed(
                        p.room.localParticipant.localTrackPublications, tone: Self.tones[i], seconds: 1.5,
                        startFrame: i * 30_000 + start)
                }
                for f in feeds { await f.value }
                await settle(0.5)
            }
            // A quiet start, as from a microphone (the speaking detector learns the noise floor).
            await CallMediaQualityTests.feed(a.room.localParticipant.localTrackPublications, tone: 0, seconds: 2.2, startFrame: 0)
                .value
            await window(start: 200)
            #expect(attachers[1].probe(a.id).snapshot.frames >= 15, "recvOnly b receives a: \(attachers[1].probe(a.id).snapshot)")
            #expect(attachers[2].probe(a.id).snapshot.frames == 0, "signallingOnly c receives nothing")
            // Speaking and statistics still work: a spoke alone; b's statistics come from its
            // subscription.
            for p in [b, c] { await p.waitRoom("speakers(a)") }
            await b.wait("b's statistics of a's video") { (b.recorder.statistics["a/video"]?.packetsReceived ?? 0) > 50 }

            // b starts sending: a subscribes to it; b mutes its microphone.
            try await b.room.changeMode(.sendAndRecv)
            await Self.waitSubscribed(a, to: [b])
            let mic = try #require(b.room.localParticipant.publication(.audio))
            mic.mute()
            await a.wait("b's microphone muted at a") {
                a.room.remoteParticipants[b.id]?.trackPublications["audio"]?.isMuted == true
            }
            publishing = try await Self.publishersAtJanus(janus, room: roomNumber)
            #expect(publishing[b.id] == true, "b publishes after changeMode: \(publishing)")

            // A round trip through recvOnly: b unpublishes at Janus, then publishes again, muted still.
            try await b.room.changeMode(.recvOnly)
            await b.wait("b unpublished at Janus") { b.room.sfu?.publisher == nil && a.room.sfu?.subscriptions[b.id] == nil }
            publishing = try await Self.publishersAtJanus(janus, room: roomNumber)
            #expect(publishing[b.id] == false, "b in recvOnly: \(publishing)")
            try await b.room.changeMode(.sendAndRecv)
            await Self.waitSubscribed(a, to: [b])
            #expect(b.room.localParticipant.publication(.audio)?.isMuted == true)
            #expect(a.room.remoteParticipants[b.id]?.trackPublications["audio"]?.isMuted == true)
            let fromB = attachers[0].probe(b.id)
            let framesBefore = fromB.snapshot.frames
            fromB.pcm.withLock { $0.removeAll() }
            await window(start: 500)
            #expect(fromB.snapshot.frames - framesBefore >= 10, "b's camera after the round trip: \(fromB.snapshot)")
            let loud = fromB.pcm.withLock { $0.filter { abs(Int($0)) > 1000 }.count }
            #expect(loud == 0, "b's muted microphone was heard: \(loud) loud samples")

            // c to signallingOnly -> recvOnly: it subscribes to both, and back: it lets both go.
            try await c.room.changeMode(.recvOnly)
            await Self.waitSubscribed(c, to: [a, b])
            try await c.room.changeMode(.signallingOnly)
            await c.wait("c let go of its subscriptions") { c.room.sfu?.subscriptions.isEmpty == true }
            for p in peers { p.room.disconnectAll() }
        }
    }

    /// Media set-up failures are reported per participant, and the call itself goes on: a friend
    /// whose media goes peer to peer while ours goes through the SFU, a server that cannot be
    /// reached, and one whose every reply is broken; then a call through the good server works.
    @Test func aParticipantOnAnotherPathOrAnUnreachableServerFailsMediaSetupForThatParticipant() async throws {
        try await Self.withThreeFriends {
            $0[1].room.options.sfu = nil
        } _: { janus, roomNumber, peers in
            let (a, b, c) = (peers[0], peers[1], peers[2])
            @MainActor func failed(_ p: CallPeer, about other: CallPeer) -> Bool {
                p.recorder.room.contains { $0.hasPrefix("failed(mediaSetupFailed(participant: \"\(other.id)\"") }
            }
            try await startCall(a, b)
            await a.wait("a reports b's path") { failed(a, about: b) }
            await b.wait("b reports a's path") { failed(b, about: a) }
            #expect(a.room.remoteParticipants[b.id] != nil && b.room.remoteParticipants[a.id] != nil, "the call goes on")
            a.room.disconnectAll()
            await a.wait("call over") { a.room.remoteParticipants.isEmpty && b.room.remoteParticipants.isEmpty }

            // A closed port: both sides report it for the other, and stay in the call.
            let closed = cliFreePort()
            for p in [a, c] { p.room.options.sfu = SFUServer(url: "http://127.0.0.1:\(closed)/janus", room: roomNumber) }
            try await startCall(a, c)
            await a.wait("a reports the server") { failed(a, about: c) }
            await c.wait("c reports the server") { failed(c, about: a) }
            let detail = a.recorder.room.last { $0.hasPrefix("failed(") } ?? ""
            #expect(detail.contains("could not be joined"), "\(detail)")
            a.room.disconnectAll()
            await a.wait("call over") { a.room.remoteParticipants.isEmpty && c.room.remoteParticipants.isEmpty }

            // A server whose every reply is broken (a chunk size of -1, which once trapped the
            // client): both report it for the other and stay in the call, and the process lives.
            let broken = try BrokenHTTPServer(
                reply: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\nx\r\n")
            defer { broken.stop() }
            for p in [a, c] { p.room.options.sfu = SFUServer(url: "http://127.0.0.1:\(broken.port)/janus", room: roomNumber) }
            let failuresBefore = a.recorder.room.filter { $0.hasPrefix("failed(") }.count
            try await startCall(a, c)
            await a.wait("a reports the broken server") {
                a.recorder.room.filter { $0.hasPrefix("failed(") }.count > failuresBefore
            }
            await c.wait("c reports the broken server") { failed(c, about: a) }
            #expect(broken.answered.load(ordering: .relaxed) >= 2)
            #expect(a.room.remoteParticipants[c.id] != nil && c.room.remoteParticipants[a.id] != nil, "the call goes on")
            let brokenDetail = a.recorder.room.last { $0.hasPrefix("failed(") } ?? ""
            #expect(brokenDetail.contains("mediaSetupFailed(participant: \"\(c.id)\""), "\(brokenDetail)")
            a.room.disconnectAll()
            await a.wait("call over") { a.room.remoteParticipants.isEmpty && c.room.remoteParticipants.isEmpty }

            // The good server again: the next call's media goes through it.
            for p in [a, c] { p.room.options.sfu = SFUServer(url: "http://127.0.0.1:\(janus.port)/janus", room: roomNumber) }
            try await startCall(a, c)
            await Self.waitSubscribed(a, to: [c])
            await Self.waitSubscribed(c, to: [a])
            #expect(SFUServer(url: "ftp://example.org/janus", room: 1).isUsable == false)
            #expect(SFUServer(url: "https://example.org/janus", room: 1).isUsable)
            #expect(SFUServer(url: "http://127.0.0.1:8088/janus", room: 0).isUsable == false)
            #expect(SFUServer(url: "http://[::1]:8088", room: 1 << 53).isUsable == false)
            #expect(SFUServer(url: "http://[::1]:8088", room: 7).isUsable)
            a.room.disconnectAll()
        }
    }

    /// The interop check that what a participant publishes is standard WebRTC: with end-to-end
    /// encryption off, headless Chromium subscribes to a participant's feed in the call's Janus
    /// room as a plain subscriber, decodes its frames and shows them.
    @Test func aBrowserSubscribesToAParticipantWhenEndToEndEncryptionIsOff() async throws {
        let scripts =
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .path + "/scripts/webrtc"
        let (browser, dir) = try JSONLinePeer.chromium(scripts: scripts)
        defer {
            browser.stop()
            dir.remove()
        }
        try await Self.withThreeFriends(e2ee: false) { janus, roomNumber, peers in
            let (a, b) = (peers[0], peers[1])
            try await startCall(a, b)
            await Self.waitSubscribed(b, to: [a])
            let feed = try #require(a.room.sfu?.feed)
            let admin = try await JanusSession.create(server: janus.address)
            let handle = try await JanusVideoRoom(session: admin)
            let offer = try await handle.joinAsSubscriber(room: roomNumber, feeds: [feed]).sdp!
            let answer = try #require(try browser.call(JSONLinePeer.js("receiveAnswer", offer))["sdp"])
            try await handle.start(answer: answer)
            await a.wait("Chromium connected to Janus", timeout: 20) {
                (try? browser.pageStats())?["connection"] as? String == "connected"
            }
            let publisher = try #require(a.room.sfu?.publisher)
            let before = Int(publisher.videoSendStatistics?.outbound.framesEncoded ?? 0)
            await CallMediaQualityTests.feed(a.room.localParticipant.localTrackPublications, tone: 440, seconds: 4, startFrame: 0)
                .value
            let encoded = Int(publisher.videoSendStatistics?.outbound.framesEncoded ?? 0) - before
            var stats: [String: Any] = [:]
            await a.wait("Chromium decoded a's frames", timeout: 10) {
                stats = (try? browser.pageStats()) ?? [:]
                return (stats["framesDecoded"] as? NSNumber)?.intValue ?? 0 >= encoded * 9 / 10
            }
            let shot = try browser.call([
                "op": "screenshot", "path": dir.file("participant-via-janus.png"), "x": "0", "y": "0", "width": "320",
                "height": "180",
            ])
            let decoded = (stats["framesDecoded"] as? NSNumber)?.intValue ?? 0
            print("CallSFUTests Chromium subscriber: decoded \(decoded) of \(encoded) frames; screenshot \(shot)")
            #expect(encoded >= 45 && decoded >= encoded * 9 / 10, "Chromium decoded \(decoded) of \(encoded): \(stats)")
            #expect(stats["receivedCodec"] as? String == "video/VP8", "\(stats)")
            #expect(((stats["totalAudioEnergy"] as? NSNumber)?.doubleValue ?? 0) > 0, "\(stats)")
            let notBlack = Double(shot["not_black"] ?? "") ?? 0, luma = Double(shot["mean_luma"] ?? "") ?? 0
            #expect(notBlack > 0.5 && luma > 24, "the <video> element: \(shot)")
            try? await handle.leave()
            await admin.destroy()
            a.room.disconnectAll()
        }
    }

    /// Turning the camera on and off during a call renegotiates the publisher connection with
    /// Janus (`configure` with a new offer); Janus announces the feed's new streams, and each
    /// subscriber subscribes afresh: the camera's pictures reach the other participant and stop
    /// when it is turned off, while the microphone goes on throughout.
    @Test func aCameraTurnedOnAndOffMidCallReachesTheSubscriber() async throws {
        try await Self.withThreeFriends {
            $0[0].room.options.cameraEnabled = false
        } _: { _, _, peers in
            let (a, b) = (peers[0], peers[1])
            let ranges = [a.id: 0..<10_000]
            let attacher = ProbeAttacher(ranges: ranges)
            b.room.delegates.add(delegate: attacher)
            try await startCall(a, b)
            await Self.waitSubscribed(b, to: [a])
            #expect(a.room.localParticipant.publication(.video) == nil)
            @MainActor func feed(_ start: Int) async {
                await CallMediaQualityTests.feed(
                    a.room.localParticipant.localTrackPublications, tone: 440, seconds: 2, startFrame: start
                ).value
                await settle(0.5)
            }
            let probe = attacher.probe(a.id)
            await feed(0)
            #expect(probe.snapshot.frames == 0 && probe.snr(440) > 10, "audio only: \(probe.snapshot), \(probe.snr(440)) dB")

            a.room.localParticipant.setCamera(enabled: true)
            await b.wait("a's camera at b") {
                (b.room.remoteParticipants[a.id]?.trackPublications["video"] as? RemoteTrackPublication)?.isSubscribed == true
                    && a.room.sfu?.negotiated == [.audio, .video]
            }
            await feed(200)
            let on = probe.snapshot.frames
            #expect(on >= 15, "after the camera was turned on: \(probe.snapshot)")
            #expect(probe.snr(440) > 10)

            a.room.localParticipant.setCamera(enabled: false)
            await a.wait("a's camera off at Janus") { a.room.sfu?.negotiated == [.audio] }
            await settle(0.5)
            let off = probe.snapshot.frames
            probe.pcm.withLock { $0.removeAll() }
            await feed(400)
            #expect(probe.snapshot.frames - off <= 2, "after the camera was turned off: \(probe.snapshot.frames - off) frames")
            #expect(probe.snr(440) > 10, "the microphone after the camera went off")
            a.room.disconnectAll()
        }
    }

    /// Unsubscribing from one track pauses it at the server: Janus stops forwarding the stream
    /// (no more packets arrive, not only no more pictures), the other track goes on, and
    /// subscribing again brings the pictures back.
    @Test func anUnsubscribedTrackIsPausedAtTheServer() async throws {
        try await Self.withThreeFriends { _, _, peers in
            let (a, b) = (peers[0], peers[1])
            let (_, attachers) = Self.attachProbes(peers)
            try await startCall(a, b)
            await Self.waitSubscribed(b, to: [a])
            @MainActor func packets(_ kind: String) -> UInt64 {
                b.room.inboundStats(of: a.id)?.filter { $0.kind == kind }.reduce(0) { $0 + $1.packetsReceived } ?? 0
            }
            @MainActor func feed(_ start: Int) async {
                await CallMediaQualityTests.feed(
                    a.room.localParticipant.localTrackPublications, tone: 440, seconds: 1.5, startFrame: start
                ).value
                await settle(0.5)
            }
            let video = try #require(b.room.remoteParticipants[a.id]?.trackPublications["video"] as? RemoteTrackPublication)
            video.setSubscribed(false)
            await b.wait("a's video paused at Janus") {
                b.room.sfu?.subscriptions[a.id]?.forwarding[.video] == false
            }
            await settle(0.3)
            let (video0, audio0) = (packets("video"), packets("audio"))
            await feed(0)
            #expect(packets("video") - video0 <= 2, "video packets while unsubscribed: \(packets("video") - video0)")
            #expect(packets("audio") - audio0 >= 50, "audio packets meanwhile: \(packets("audio") - audio0)")
            let probe = attachers[1].probe(a.id)
            let frames = probe.snapshot.frames
            video.setSubscribed(true)
            await b.wait("a's video forwarded again") { b.room.sfu?.subscriptions[a.id]?.forwarding[.video] == true }
            await feed(300)
            #expect(probe.snapshot.frames - frames >= 10, "frames after subscribing again: \(probe.snapshot.frames - frames)")
            a.room.disconnectAll()
        }
    }
}
