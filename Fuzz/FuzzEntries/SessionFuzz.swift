import Dispatch
import Foundation
import MediaCore
import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

extension FuzzEntries {
    /// Session transport datagrams (docs/session.md, `Transport/Wire.swift`) through the real
    /// receive code: the input is a sequence of datagrams (`[length: UInt16 BE][datagram]`
    /// records), each passed to `SessionCore.handle(_:from:)` of one real `Revue` instance
    /// (`SessionHarness`, made once per process: fixed identity, temporary data directory, UDP
    /// socket on 127.0.0.1, one friend, and a rendezvous node at the address the datagrams come
    /// from so relayed datagrams are read too).
    ///
    /// For every input the friend is added through `FriendManager` (deleted again at the end), and
    /// a real Noise IK handshake (the fixture friend's initiation, then its first data packet) goes
    /// through `handle`; the core's handshake ephemerals, indices and timestamps come from its
    /// fuzzing seams, so the session keys are the same in every process and stored inputs replay.
    /// Properties, checked on the core's `RevueCounters` and on the messages its delegates get,
    /// against what the fixture can authenticate independently (the keys of both sides):
    /// - a datagram the fixture cannot authenticate (handshake or data) is counted as dropped;
    /// - an initiation that authenticates is not counted as forged, and the same datagram with
    ///   one byte changed is counted as forged or malformed;
    /// - an authentic data packet is never counted as forged; received again after it was
    ///   accepted, it is counted as dropped (replay or dropped session) and delivers nothing;
    /// - a message is delivered at most once per (epoch, sequence), with the text that was sent,
    ///   and the first in-order message of the stream is delivered exactly once.
    /// Thread rule: runs on the main thread (libFuzzer calls from it); from another thread it
    /// hops there with `DispatchQueue.main.sync` (the regression tests).
    @Sendable public static func session(_ data: UnsafeRawBufferPointer) {
        let datagrams = fuzzRecords(data, limit: 64).map { [UInt8]($0) }
        _ = onMainActor { SessionHarness.shared.run(datagrams) }
        // libFuzzer never returns to the main run loop: run it once, so the main-queue work this
        // input left (the core's event drain, profile-write completions) runs and is freed now
        // rather than piling up (libFuzzer would see the input leak and run a leak check).
        if Thread.isMainThread { _ = RunLoop.main.run(mode: .default, before: Date()) }
    }

    /// Seed datagrams for fuzz-session, made by the fixture's two real peers: the friend's
    /// data packets with every frame type, a new handshake from each side, relayed and rendezvous
    /// datagrams. Each element is one input (a name and its records).
    public static func sessionSeeds() -> [(String, [[UInt8]])] { SessionFixture.shared.seeds() }

    /// How many of `datagrams` the real core accepted (authentic to the fixture and not counted as
    /// dropped), so the seed writer can check that its seeds reach past authentication.
    public static func sessionAccepted(_ datagrams: [[UInt8]]) -> Int {
        onMainActor { SessionHarness.shared.run(datagrams) }
    }
}

/// Runs `body` on the main actor: directly on the main thread, else through the main queue.
func onMainActor<T: Sendable>(_ body: @MainActor () -> T) -> T {
    if Thread.isMainThread { return MainActor.assumeIsolated(body) }
    return DispatchQueue.main.sync { MainActor.assumeIsolated(body) }
}

/// The fixed keys, seam values and handshakes of both peers, computed without the core.
/// The core is the responder of the friend's handshake; the core's own (pending) handshake to the
/// friend, started when the friend is added, is answered by `coreResponse`.
struct SessionFixture: Sendable {
    static let shared = SessionFixture()

    /// The core's identity, and the friend's.
    let core = KeyPair(secret: (0..<32).map { UInt8($0) &* 13 &+ 5 })
    let friend = KeyPair(secret: (0..<32).map { UInt8($0) &* 7 &+ 1 })
    /// The wall clock the core's tag epochs use (seam), mid-hour.
    static let wallClock = 1_800_001_800.0
    /// The friend's relay source tags the core accepts (this epoch and its neighbours), and the
    /// core's own (which the friend never sends).
    var friendRelayTags: [[UInt8]] {
        let k = PrivacyTags.pairKey(secret: friend.secret, peerPublic: core.publicKey)!
        let e = PrivacyTags.epoch(Self.wallClock)
        return [e - 1, e, e + 1].map { PrivacyTags.rendezvous(pairKey: k, owner: friend.publicKey, epoch: $0) }
    }
    var coreRelayTag: [UInt8] {
        let k = PrivacyTags.pairKey(secret: friend.secret, peerPublic: core.publicKey)!
        return PrivacyTags.rendezvous(pairKey: k, owner: core.publicKey, epoch: PrivacyTags.epoch(Self.wallClock))
    }
    /// The friend's LAN tag for this epoch.
    var friendLANTag: [UInt8] {
        let k = PrivacyTags.pairKey(secret: friend.secret, peerPublic: core.publicKey)!
        return PrivacyTags.lan(pairKey: k, owner: friend.publicKey, epoch: PrivacyTags.epoch(Self.wallClock))
    }
    /// The friend's indices of its handshake and of the re-key.
    let friendIndex: UInt32 = 0x0102_0304
    let friendRekeyIndex: UInt32 = 0x0102_0305
    /// The friend's index in its answer to the core's handshake.
    let friendAnswerIndex: UInt32 = 0x0102_0306
    /// The friend's handshake timestamp (the re-key uses the next one).
    let friendTimestamp: UInt64 = 1_700_000_000_000_000_000
    /// The core's seam values: indices `indexBase + n` and timestamps `timestampBase + n` for the
    /// n-th call after a reset, always the same ephemeral key. So a session's keys depend only on
    /// the friend's message 1, whatever order the datagrams before it came in.
    static let indexBase: UInt32 = 0x0A0B_0C0C
    static let timestampBase: UInt64 = 1_800_000_000_000_000_000
    static let coreEphemeral = KeyPair(secret: [UInt8](repeating: 0x30, count: 32))

    /// The core's pending handshake after the reset: index `indexBase` (seam call 0).
    var pendingIndex: UInt32 { Self.indexBase }
    /// The session of the reset handshake (seam call 1), and of the friend's re-key (seam call 2).
    var sessionIndex: UInt32 { Self.indexBase + 1 }
    var rekeyIndex: UInt32 { Self.indexBase + 2 }

    /// The friend's initiation of the reset, and its keys (friend to core, core to friend).
    let initiation: [UInt8]
    let sessionKeys: (toCore: [UInt8], toFriend: [UInt8])
    /// The friend's data packet (counter 0, a ping) that completes the reset handshake.
    let confirmation: [UInt8]
    /// A second initiation (next timestamp, seam call 2), and its keys.
    let rekeyInitiation: [UInt8]
    let rekeyKeys: (toCore: [UInt8], toFriend: [UInt8])
    /// The friend's answer to the core's pending handshake, and its keys.
    let coreResponse: [UInt8]
    let answerKeys: (toCore: [UInt8], toFriend: [UInt8])

    /// Every key a datagram to the core can be sealed with.
    var receiveKeys: [[UInt8]] { [sessionKeys.toCore, rekeyKeys.toCore, answerKeys.toCore] }
    var friendId: String { Hex.encode(friend.publicKey) }

    /// Message 1 header: type, version, sender index.
    static func header(_ index: UInt32) -> [UInt8] {
        var w = ByteWriter()
        w.u8(PacketType.handshakeInitiation.rawValue)
        w.u8(revueProtocolVersion)
        w.u32(index)
        return w.bytes
    }

    /// One IK handshake between two fixed key pairs with fixed ephemerals: message 1 and 2 as
    /// sent, and the transport keys (initiator to responder, back).
    static func handshake(
        initiator: KeyPair, responder: KeyPair, initiatorIndex: UInt32, responderIndex: UInt32,
        initiatorEphemeral: KeyPair, responderEphemeral: KeyPair, timestamp: UInt64
    )
        -> (message1: [UInt8], message2: [UInt8], toResponder: [UInt8], toInitiator: [UInt8])
    {
        let header = Self.header(initiatorIndex)
        var i = NoiseIKHandshake(
            initiator: true, prologue: header, localStatic: initiator,
            remoteStatic: responder.publicKey, ephemeral: initiatorEphemeral)
        var payload = ByteWriter()
        payload.u8(HandshakeKind.connect.rawValue)
        payload.u64(timestamp)
        let body = header + i.writeMessage1(payload: payload.bytes)!
        // mac1 for the responder, no cookie (mac2 zeros).
        let message1 =
            body + Sodium.keyedBlake2b(key: HandshakeMACs.mac1Key(responder.publicKey), body) + [UInt8](repeating: 0, count: 16)
        var r = NoiseIKHandshake(
            initiator: false, prologue: header, localStatic: responder, remoteStatic: nil, ephemeral: responderEphemeral)
        _ = r.readMessage1(Array(body[6...]))!
        var w = ByteWriter()
        w.u8(PacketType.handshakeResponse.rawValue)
        w.u8(revueProtocolVersion)
        w.u32(responderIndex)
        w.u32(initiatorIndex)
        w.append(r.writeMessage2(payload: [])!)
        _ = i.readMessage2(Array(w.bytes[10...]))!
        precondition(r.transportKeys().receive == i.transportKeys().send, "fixture handshake disagrees")
        return (message1, w.bytes, i.transportKeys().send, i.transportKeys().receive)
    }

    init() {
        precondition(Sodium.ready)
        let first = Self.handshake(
            initiator: friend, responder: core, initiatorIndex: friendIndex, responderIndex: Self.indexBase + 1,
            initiatorEphemeral: KeyPair(secret: [UInt8](repeating: 0x42, count: 32)),
            responderEphemeral: Self.coreEphemeral, timestamp: friendTimestamp)
        initiation = first.message1
        sessionKeys = (first.toResponder, first.toInitiator)
        let rekey = Self.handshake(
            initiator: friend, responder: core, initiatorIndex: friendRekeyIndex, responderIndex: Self.indexBase + 2,
            initiatorEphemeral: KeyPair(secret: [UInt8](repeating: 0x43, count: 32)),
            responderEphemeral: Self.coreEphemeral, timestamp: friendTimestamp + 1)
        rekeyInitiation = rekey.message1
        rekeyKeys = (rekey.toResponder, rekey.toInitiator)
        let answer = Self.handshake(
            initiator: core, responder: friend, initiatorIndex: Self.indexBase, responderIndex: friendAnswerIndex,
            initiatorEphemeral: Self.coreEphemeral, responderEphemeral: KeyPair(secret: [UInt8](repeating: 0x44, count: 32)),
            timestamp: Self.timestampBase)
        coreResponse = answer.message2
        answerKeys = (answer.toInitiator, answer.toResponder)
        var ping = ByteWriter()
        ping.u8(FrameType.ping.rawValue)
        ping.u64(0)
        confirmation = Self.data(to: Self.indexBase + 1, key: first.toResponder, counter: 0, frame: ping.bytes)
    }

    /// A transport data packet as `SessionCore.sendFrame` writes it.
    static func data(to index: UInt32, key: [UInt8], counter: UInt64, frame: [UInt8]) -> [UInt8] {
        var w = ByteWriter()
        w.u8(PacketType.transportData.rawValue)
        w.u32(index)
        w.u64(counter)
        let sealed = Sodium.seal(key: key, nonce: counter, ad: w.bytes, plaintext: frame)
        w.append(sealed)
        return w.bytes
    }

    /// The plaintext of a data packet to the core, when one of the fixture's keys opens it.
    func open(_ bytes: [UInt8]) -> [UInt8]? {
        var r = ByteReader(bytes, offset: 1)
        guard bytes.first == PacketType.transportData.rawValue, r.u32() != nil, let counter = r.u64(), r.remaining >= 16 else {
            return nil
        }
        for key in receiveKeys {
            if let plain = Sodium.open(key: key, nonce: counter, ad: Array(bytes[0..<13]), ciphertext: bytes[13...]) {
                return plain
            }
        }
        return nil
    }

    /// Whether the core's identity authenticates `bytes` as the friend's Noise IK message 1.
    func authenticInitiation(_ bytes: [UInt8]) -> Bool {
        var r = ByteReader(bytes, offset: 1)
        guard bytes.first == PacketType.handshakeInitiation.rawValue, r.u8() == revueProtocolVersion, r.u32() != nil,
            r.remaining >= NoiseIKHandshake.message1Overhead + 9 + HandshakeMACs.trailerLength
        else { return false }
        // mac1 (keyed by the core's public key) is part of what makes an initiation authentic: the
        // core refuses, as forged, one whose Noise message is valid but whose mac1 is not.
        let macStart = bytes.count - HandshakeMACs.trailerLength
        guard
            Sodium.keyedBlake2b(key: HandshakeMACs.mac1Key(core.publicKey), Array(bytes[0..<macStart]))
                == Array(bytes[macStart..<(macStart + 16)])
        else { return false }
        var hs = NoiseIKHandshake(initiator: false, prologue: Array(bytes[0..<6]), localStatic: core, remoteStatic: nil)
        guard hs.readMessage1(Array(r.rest().dropLast(HandshakeMACs.trailerLength))) != nil, let rs = hs.remoteStatic else {
            return false
        }
        fuzzRequire(rs == friend.publicKey, "initiation authenticated an unknown static key \(Hex.encode(rs))")
        return true
    }

    /// Whether `bytes` is the friend's answer to the core's pending handshake of the reset.
    func authenticResponse(_ bytes: [UInt8]) -> Bool {
        var r = ByteReader(bytes, offset: 1)
        guard bytes.first == PacketType.handshakeResponse.rawValue, r.u8() == revueProtocolVersion, r.u32() != nil,
            r.u32() == pendingIndex, r.remaining >= NoiseIKHandshake.message2Overhead
        else { return false }
        // The core's message 1 is deterministic (seam ephemeral 0, index and timestamp).
        var hs = NoiseIKHandshake(
            initiator: true, prologue: Self.header(pendingIndex), localStatic: core,
            remoteStatic: friend.publicKey, ephemeral: Self.coreEphemeral)
        var payload = ByteWriter()
        payload.u8(HandshakeKind.connect.rawValue)
        payload.u64(Self.timestampBase)
        _ = hs.writeMessage1(payload: payload.bytes)
        return hs.readMessage2(r.rest()) != nil
    }

    func seeds() -> [(String, [[UInt8]])] {
        func frame(_ build: (inout ByteWriter) -> Void) -> [UInt8] { var w = ByteWriter(); build(&w); return w.bytes }
        let ping = frame {
            $0.u8(FrameType.ping.rawValue); $0.u64(123_456_789)
        }
        let pong = frame {
            $0.u8(FrameType.pong.rawValue); $0.u64(123_456_789)
        }
        let message = frame {
            $0.u8(FrameType.reliable.rawValue); $0.u32(7); $0.u32(1); $0.u8(ReliableKind.message.rawValue);
            $0.append("hello".utf8)
        }
        let profile = frame {
            $0.u8(FrameType.reliable.rawValue); $0.u32(7); $0.u32(2); $0.u8(ReliableKind.profile.rawValue)
            $0.u8(1); $0.u16(5); $0.append("Alice".utf8); $0.append("on a call".utf8)
        }
        let ack = frame {
            $0.u8(FrameType.ack.rawValue); $0.u32(7); $0.u32(2)
        }
        let bye = frame { $0.u8(FrameType.bye.rawValue) }
        // Counter 0 of the reset session is the confirmation.
        let toCore = [ping, message, profile, ack, pong].enumerated().map {
            Self.data(to: sessionIndex, key: sessionKeys.toCore, counter: UInt64($0.offset + 1), frame: $0.element)
        }
        func relayed(_ inner: [UInt8], source: [UInt8]? = nil) -> [UInt8] {
            var w = ByteWriter()
            w.u8(PacketType.relayDeliver.rawValue); w.u8(revueProtocolVersion); w.append(source ?? friendRelayTags[1]);
            w.append(inner)
            return w.bytes
        }
        var registered = ByteWriter()
        registered.u8(PacketType.rendezvousRegistered.rawValue); registered.u8(revueProtocolVersion)
        registered.u8(RendezvousAuth.registeredUnsealed)
        registered.append(friend.publicKey)
        registered.append([UInt8](repeating: 7, count: 16))
        var lookup = ByteWriter()
        lookup.u8(PacketType.rendezvousLookupReply.rawValue); lookup.u8(revueProtocolVersion); lookup.u64(1 << 63 | 5)
        lookup.append(friendRelayTags[1]); lookup.u8(1); lookup.u8(0); lookup.u16(12)
        lookup.endpoint(SocketAddress(ipv4Address: 0x7F00_0001, port: 33_446))
        lookup.append([UInt8](repeating: 0, count: 16))
        var lan = ByteWriter()
        lan.u8(PacketType.lanAnnounce.rawValue); lan.u8(revueProtocolVersion); lan.u16(33_447); lan.u8(8);
        lan.append(friendLANTag)
        lan.append([UInt8](repeating: 0x5A, count: 7 * 16))
        let rekeyed = Self.data(to: rekeyIndex, key: rekeyKeys.toCore, counter: 0, frame: message)
        let answered = Self.data(to: pendingIndex, key: answerKeys.toCore, counter: 0, frame: ping)
        return [
            ("handshake-rekey", [rekeyInitiation, rekeyed, toCore[0]]),
            ("handshake-response", [coreResponse, answered]),
            ("handshake-replayed", [initiation, rekeyInitiation, rekeyInitiation]),
            ("data-all-frames", toCore),
            ("data-replayed", [toCore[1], toCore[1], confirmation]),
            ("data-out-of-order", [toCore[2], toCore[0], toCore[3], toCore[1]]),
            ("data-bye", [toCore[0], Self.data(to: sessionIndex, key: sessionKeys.toCore, counter: 9, frame: bye), toCore[1]]),
            (
                "relayed-handshake-and-data",
                [
                    relayed(toCore[0]), relayed(rekeyInitiation), relayed(coreResponse),
                    relayed(rekeyInitiation, source: coreRelayTag),
                ]
            ),
            ("rendezvous-and-lan", [registered.bytes, lookup.bytes, lan.bytes]),
        ]
    }
}

/// Counts the messages the core delivers to the App.
@MainActor
final class SessionDeliveries: RevueDelegate {
    var messages: [String] = []
    func revue(_ revue: Revue, friend friendId: String, didReceiveMessage message: String) { messages.append(message) }
}

/// The real `Revue` instance the fuzz inputs go to (see `FuzzEntries.session`).
@MainActor
final class SessionHarness {
    static let shared = SessionHarness()

    let fixture = SessionFixture.shared
    let revue = Revue()
    let core: SessionCore
    let deliveries = SessionDeliveries()
    /// Where every datagram comes from: the friend's endpoint and the rendezvous node (port 9,
    /// discard: nothing listens there, so the core's few sends to it go nowhere).
    let peer = SocketAddress(ipv4: 127, 0, 0, 1, port: 9)
    /// Seam calls since the last reset.
    var indices = 0, timestamps = 0

    init() {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        let dir = base + "/revue-fuzz-session-\(getpid())"
        sessionDataDirectory = dir
        atexit { if let d = sessionDataDirectory { try? FileManager.default.removeItem(atPath: d) } }
        try? FileManager.default.removeItem(atPath: dir)
        try! FileManager.default.createDirectory(
            atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let profile = """
            {"format":1,"secretKey":"\(Hex.encode(fixture.core.secret.exposedCopy))","nospam":305419896,"name":"","statusMessage":"",\
            "status":0,"friends":[]}
            """
        precondition(
            FileManager.default.createFile(
                atPath: dir + "/profile.json", contents: Data(profile.utf8),
                attributes: [.posixPermissions: 0o600]))
        var configuration = RevueConfiguration(dataDirectory: dir)
        configuration.bindHost = "127.0.0.1"
        configuration.rendezvousNodes = ["127.0.0.1:9"]
        do { try revue.initialize(configuration) } catch { fatalError("fuzz-session: cannot start the core: \(error)") }
        core = revue.core!
        precondition(revue.revueId == Hex.encode(fixture.core.publicKey), "the core did not load the fixed identity")
        revue.delegates.add(delegate: deliveries)
        core.environment.faults.dropDirectSends = true
        core.environment.makesLinks = false
        core.environment.wallClock = { SessionFixture.wallClock }
        core.environment.randomness.ephemeralKeys = { SessionFixture.coreEphemeral }
        core.environment.randomness.sessionIndex = { [unowned self] in
            defer { indices += 1 }; return SessionFixture.indexBase &+ UInt32(truncatingIfNeeded: indices)
        }
        core.environment.handshakeTimestamp = { [unowned self] in
            defer { timestamps += 1 }; return SessionFixture.timestampBase &+ UInt64(timestamps)
        }
        reset()
        precondition(core.counters.handshakesCompleted == 1, "fuzz-session: the reset handshake did not complete")
        tearDown()
    }

    /// Deletes the friend again (its `save()` waits for any profile write still in flight), so
    /// what an input allocated is freed within it: libFuzzer runs a leak check on every input
    /// that ends with more allocations than frees.
    func tearDown() {
        if revue.friends.getFriendList().contains(fixture.friendId) {
            try! revue.friends.deleteFriend(friendId: fixture.friendId)
        }
        core.drainEvents()
        deliveries.messages = []
    }

    /// The friend added (deleted first if an earlier input trapped half-way), then the friend's
    /// handshake and its first data packet.
    func reset() {
        indices = 0; timestamps = 0
        if revue.friends.getFriendList().contains(fixture.friendId) {
            try! revue.friends.deleteFriend(friendId: fixture.friendId)
        }
        core.handshakeTokens = SessionCore.handshakeBurst
        _ = try! revue.friends.addFriendNorequest(friendId: fixture.friendId)
        let before = core.counters
        core.handle(fixture.initiation, from: peer)
        core.handle(fixture.confirmation, from: peer)
        core.drainEvents()
        deliveries.messages = []
        fuzzRequire(
            core.counters.handshakesCompleted == before.handshakesCompleted + 1 && drops(core.counters) == drops(before),
            "the reset handshake failed: \(core.counters)")
    }

    /// Every counter that records a datagram refused: malformed, forged, replayed, unknown session,
    /// stranger, over a rate, wrong nospam, on a session past its hard lifetime, an announce or
    /// lookup answer refused, the backlog full, or an initiation answered with a cookie instead.
    func drops(_ c: RevueCounters) -> Int {
        c.droppedMalformed + c.droppedForged + c.droppedReplayed + c.droppedUnknownSession + c.droppedNonFriend
            + c.droppedRateLimited + c.droppedWrongNospam + c.droppedExpired + c.droppedAnnounces
            + c.droppedLookupReplies + c.droppedOverload + c.cookieRepliesSent
    }

    /// One fuzz input; returns how many datagrams the core accepted.
    func run(_ datagrams: [[UInt8]]) -> Int {
        reset()
        var accepted = 0
        var acceptedData: Set<[UInt8]> = []
        var reliable: Set<[UInt8]> = []  // (stream, epoch, seq) of accepted reliable message frames
        var lastEpoch: UInt32 = 0, streams = 0
        var bodies: [String] = []
        var firstReliableSeen = false
        for bytes in datagrams {
            // What the fixture makes of it (a relayed datagram from the friend is judged by its
            // inner datagram; a relay from another source tag only passes for data packets).
            var inner = bytes
            var relaySource: [UInt8]?
            if bytes.first == PacketType.relayDeliver.rawValue, bytes.count >= 18, bytes[1] == revueProtocolVersion {
                relaySource = Array(bytes[2..<18])
                inner = Array(bytes[18...])
            }
            let type = inner.first.flatMap(PacketType.init(rawValue:))
            let plain = type == .transportData ? fixture.open(inner) : nil
            let authentic: Bool
            switch type {
            case .handshakeInitiation:
                authentic =
                    fixture.authenticInitiation(inner) && (relaySource == nil || fixture.friendRelayTags.contains(relaySource!))
            case .handshakeResponse: authentic = fixture.authenticResponse(inner)
            case .transportData: authentic = plain != nil
            default: authentic = false
            }
            // Types the core only acts on once they authenticate.
            let authenticated = type == .handshakeInitiation || type == .handshakeResponse || type == .transportData
            // Types a peer reads without authentication (directly, not inside a relay).
            let unauthenticated =
                relaySource == nil
                && (type == .rendezvousRegistered || type == .rendezvousLookupReply || type == .lanAnnounce
                    || type == .relayDeliver || type == .turnCredentials)

            let before = core.counters
            let delivered = deliveries.messages.count
            core.handle(bytes, from: peer)
            core.drainEvents()
            let after = core.counters
            let dropped = drops(after) - drops(before)

            if authenticated && !authentic {
                fuzzRequire(dropped > 0, "a datagram the fixture cannot authenticate was not counted as dropped (\(after))")
            }
            if authentic {
                fuzzRequire(after.droppedForged == before.droppedForged, "an authentic \(type!) datagram was counted as forged")
            }
            if !authenticated && !unauthenticated {
                fuzzRequire(
                    after.droppedMalformed > before.droppedMalformed,
                    "a datagram of no type a peer reads was not counted as malformed")
            }
            // Accepted by the transport (a malformed frame inside may still be counted).
            let transportAccepted =
                authentic && after.droppedReplayed == before.droppedReplayed
                && after.droppedUnknownSession == before.droppedUnknownSession && after.droppedForged == before.droppedForged
                && after.droppedRateLimited == before.droppedRateLimited && after.droppedNonFriend == before.droppedNonFriend
            if transportAccepted { accepted += 1 }
            if type == .handshakeInitiation, authentic {
                // Every byte but mac2 (read only under load) is authenticated: the header through the
                // prologue and mac1, e through the hash, the rest by the AEAD tags and mac1. Change
                // one: the core must refuse it.
                let at = 1 + (Int(inner[inner.count - 1]) &+ inner.count / 2) % (inner.count - 1 - 16)
                var changed = inner
                changed[at] ^= 0x01
                let c0 = core.counters
                core.handle(relaySource == nil ? changed : Array(bytes[0..<34]) + changed, from: peer)
                core.drainEvents()
                let c1 = core.counters
                fuzzRequire(
                    c1.droppedForged + c1.droppedMalformed > c0.droppedForged + c0.droppedMalformed,
                    "initiation still accepted with byte \(at) changed (\(c1))")
            }
            if let plain {
                if acceptedData.contains(inner) {
                    fuzzRequire(
                        dropped > 0 && deliveries.messages.count == delivered,
                        "an accepted data packet was accepted again (\(after))")
                } else if transportAccepted {
                    acceptedData.insert(inner)
                    var r = ByteReader(plain)
                    if r.u8() == FrameType.reliable.rawValue, let epoch = r.u32(), let seq = r.u32(),
                        let kind = r.u8().flatMap(ReliableKind.init(rawValue:))
                    {
                        let body = r.rest()
                        // A new epoch restarts the friend's stream (a restarted peer).
                        if epoch != lastEpoch { lastEpoch = epoch; streams += 1 }
                        if kind == .message {
                            reliable.insert(
                                [UInt8(truncatingIfNeeded: streams), UInt8(truncatingIfNeeded: streams >> 8)] + plain[1..<9])
                            bodies.append(String(decoding: body, as: UTF8.self))
                        }
                        // The first item of a fresh stream is handed to the App at once.
                        if !firstReliableSeen, seq == 1, kind == .message, !body.contains(UInt8(ascii: "{")) {
                            fuzzRequire(
                                deliveries.messages.count == delivered + 1 && deliveries.messages.last == bodies.last,
                                "the first message of the stream (epoch \(epoch)) was not delivered exactly once")
                        }
                        firstReliableSeen = true
                    }
                }
            }
            fuzzRequire(
                deliveries.messages.count <= reliable.count,
                "\(deliveries.messages.count) messages delivered from \(reliable.count) distinct ones")
            if deliveries.messages.count > delivered {
                fuzzRequire(deliveries.messages[delivered...].allSatisfy(bodies.contains), "a delivered message was never sent")
            }
        }
        tearDown()
        return accepted
    }
}

/// The harness's data directory, removed at exit.
nonisolated(unsafe) var sessionDataDirectory: String?
