import RevueSession

extension FuzzEntries {
    /// Session transport datagrams (docs/session.md, `Transport/Wire.swift`): the input is a
    /// sequence of datagrams (`[length: UInt16 BE][datagram]` records) received in order by one
    /// peer that holds a fixed test identity and one established session, derived once per process
    /// by a real Noise IK handshake between two fixed identities (`SessionFixture`).
    ///
    /// Each datagram goes through the steps of `SessionCore.handle` with the same parts it uses
    /// (SessionCore itself needs a socket and the main actor): the type byte, the `ByteReader`
    /// layouts, the Noise IK responder (`NoiseIKHandshake.readMessage1`) on an initiation, the
    /// initiator's `readMessage2` on a response to its pending handshake, and on transport data
    /// the replay window, the AEAD open and the frame parse. Properties:
    /// - an accepted initiation authenticates the fixture's initiator, and the same datagram with
    ///   any one byte changed is rejected;
    /// - an accepted response gives exactly the fixture's transport keys;
    /// - an accepted data packet re-seals to the same bytes, a forged one leaves the replay window
    ///   as it was, and the same packet a second time is rejected as a replay.
    /// The replay windows are fresh for every input, so inputs do not depend on each other.
    @Sendable public static func session(_ data: UnsafeRawBufferPointer) {
        let fixture = SessionFixture.shared
        var receiver = SessionReceiver(fixture: fixture)
        for record in fuzzRecords(data, limit: 64) {
            receiver.receive([UInt8](record), relayed: false)
        }
    }

    /// Seed datagrams for fuzz-session, made by the fixture's two real peers: a handshake in both
    /// directions, data packets with every frame type, relayed and rendezvous datagrams.
    /// Each element is one input (a name and its records).
    public static func sessionSeeds() -> [(String, [[UInt8]])] { SessionFixture.shared.seeds() }

    /// How many of `datagrams` the fuzz-session receiver authenticates (handshakes and data
    /// packets), so the seed writer can check that its seeds reach past authentication.
    public static func sessionAccepted(_ datagrams: [[UInt8]]) -> Int {
        var receiver = SessionReceiver(fixture: SessionFixture.shared)
        for d in datagrams { receiver.receive(d, relayed: false) }
        return receiver.accepted
    }
}

/// Two fixed identities and the session between them, made once per process.
struct SessionFixture: Sendable {
    static let shared = SessionFixture()

    let initiator = KeyPair(secret: (0..<32).map { UInt8($0) &* 7 &+ 1 })
    let responder = KeyPair(secret: (0..<32).map { UInt8($0) &* 13 &+ 5 })
    let initiatorIndex: UInt32 = 0x0102_0304
    let responderIndex: UInt32 = 0x0A0B_0C0D
    /// Message 1 as sent (header included).
    let initiation: [UInt8]
    /// Message 2 as sent.
    let response: [UInt8]
    /// Initiator to responder, and back.
    let initiatorToResponder: [UInt8]
    let responderToInitiator: [UInt8]

    /// The initiator's handshake after writing message 1, and that message (header included).
    /// The ephemeral key is fixed, so every call gives the same.
    static func pending(initiator: KeyPair, responder: KeyPair, index: UInt32) -> (handshake: NoiseIKHandshake, message: [UInt8]) {
        var header = ByteWriter()
        header.u8(PacketType.handshakeInitiation.rawValue)
        header.u8(revueProtocolVersion)
        header.u32(index)
        var hs = NoiseIKHandshake(initiator: true, prologue: header.bytes, localStatic: initiator,
                                  remoteStatic: responder.publicKey, ephemeral: KeyPair(secret: [UInt8](repeating: 0x42, count: 32)))
        var payload = ByteWriter()
        payload.u8(HandshakeKind.connect.rawValue)
        payload.u64(1_700_000_000_000_000_000)
        let message = header.bytes + hs.writeMessage1(payload: payload.bytes)!
        return (hs, message)
    }

    /// The initiator's pending handshake (a fresh copy).
    func pending() -> NoiseIKHandshake { Self.pending(initiator: initiator, responder: responder, index: initiatorIndex).handshake }

    init() {
        precondition(Sodium.ready)
        let (hs, message) = Self.pending(initiator: initiator, responder: responder, index: initiatorIndex)
        initiation = message
        let header = Array(message[0..<6])
        var responderSide = NoiseIKHandshake(initiator: false, prologue: header, localStatic: responder, remoteStatic: nil,
                                             ephemeral: KeyPair(secret: [UInt8](repeating: 0x24, count: 32)))
        _ = responderSide.readMessage1(Array(initiation[6...]))!
        var w = ByteWriter()
        w.u8(PacketType.handshakeResponse.rawValue)
        w.u8(revueProtocolVersion)
        w.u32(responderIndex)
        w.u32(initiatorIndex)
        w.append(responderSide.writeMessage2(payload: [])!)
        response = w.bytes
        var done = hs
        _ = done.readMessage2(Array(response[10...]))!
        initiatorToResponder = done.transportKeys().send
        responderToInitiator = done.transportKeys().receive
        precondition(responderSide.transportKeys().receive == initiatorToResponder, "fixture handshake disagrees")
    }

    /// A transport data packet as `SessionCore.sendFrame` writes it.
    func data(to index: UInt32, key: [UInt8], counter: UInt64, frame: [UInt8]) -> [UInt8] {
        var w = ByteWriter()
        w.u8(PacketType.transportData.rawValue)
        w.u32(index)
        w.u64(counter)
        let sealed = Sodium.seal(key: key, nonce: counter, ad: w.bytes, plaintext: frame)
        w.append(sealed)
        return w.bytes
    }

    func seeds() -> [(String, [[UInt8]])] {
        func frame(_ build: (inout ByteWriter) -> Void) -> [UInt8] { var w = ByteWriter(); build(&w); return w.bytes }
        let ping = frame { $0.u8(FrameType.ping.rawValue); $0.u64(123_456_789) }
        let pong = frame { $0.u8(FrameType.pong.rawValue); $0.u64(123_456_789) }
        let message = frame { $0.u8(FrameType.reliable.rawValue); $0.u32(7); $0.u32(1); $0.u8(ReliableKind.message.rawValue); $0.append("hello".utf8) }
        let profile = frame {
            $0.u8(FrameType.reliable.rawValue); $0.u32(7); $0.u32(2); $0.u8(ReliableKind.profile.rawValue)
            $0.u8(1); $0.u16(5); $0.append("Alice".utf8); $0.append("on a call".utf8)
        }
        let ack = frame { $0.u8(FrameType.ack.rawValue); $0.u32(7); $0.u32(2) }
        let bye = frame { $0.u8(FrameType.bye.rawValue) }
        let toResponder = [ping, message, profile, ack].enumerated().map {
            data(to: responderIndex, key: initiatorToResponder, counter: UInt64($0.offset), frame: $0.element)
        }
        let toInitiator = data(to: initiatorIndex, key: responderToInitiator, counter: 0, frame: pong)
        func relayed(_ inner: [UInt8]) -> [UInt8] {
            var w = ByteWriter()
            w.u8(PacketType.relayDeliver.rawValue); w.u8(revueProtocolVersion); w.append(initiator.publicKey); w.append(inner)
            return w.bytes
        }
        var registered = ByteWriter()
        registered.u8(PacketType.rendezvousRegistered.rawValue); registered.u8(revueProtocolVersion); registered.u8(1)
        registered.u32(0x7F00_0001); registered.u16(33_445); registered.append(responder.publicKey)
        var lookup = ByteWriter()
        lookup.u8(PacketType.rendezvousLookupReply.rawValue); lookup.u8(revueProtocolVersion); lookup.append(initiator.publicKey)
        lookup.u8(1); lookup.u32(0x7F00_0001); lookup.u16(33_446); lookup.u8(0); lookup.u16(12)
        var lan = ByteWriter()
        lan.u8(PacketType.lanAnnounce.rawValue); lan.u8(revueProtocolVersion); lan.append(initiator.publicKey); lan.u16(33_447)
        return [
            ("handshake-initiation", [initiation]),
            ("handshake-response", [response]),
            ("data-all-frames", toResponder),
            ("data-replayed", [toResponder[1], toResponder[1]]),
            ("data-out-of-order", [toResponder[2], toResponder[0], toResponder[3]]),
            ("data-pong-bye", [toInitiator, data(to: initiatorIndex, key: responderToInitiator, counter: 1, frame: bye)]),
            ("relayed-handshake-and-data", [relayed(initiation), relayed(response), relayed(toResponder[0])]),
            ("rendezvous-and-lan", [registered.bytes, lookup.bytes, lan.bytes]),
        ]
    }
}

/// The receiving side of one fuzz input: what `SessionCore.handle` checks, in its order.
struct SessionReceiver {
    let fixture: SessionFixture
    /// Replay windows of the two sessions, by local index.
    var windows: [UInt32: ReplayWindow] = [:]
    /// Datagrams that authenticated so far.
    var accepted = 0

    init(fixture: SessionFixture) {
        self.fixture = fixture
        windows = [fixture.responderIndex: ReplayWindow(), fixture.initiatorIndex: ReplayWindow()]
    }

    mutating func receive(_ bytes: [UInt8], relayed: Bool) {
        guard let first = bytes.first, let type = PacketType(rawValue: first) else { return }
        switch type {
        case .handshakeInitiation: initiation(bytes)
        case .handshakeResponse: response(bytes)
        case .transportData: transportData(bytes)
        case .rendezvousRegistered:
            var r = ByteReader(bytes, offset: 1)
            guard r.u8() == revueProtocolVersion, r.u8() != nil, r.u32() != nil, r.u16() != nil, let key = r.take(32) else { return }
            fuzzRequire(key.count == 32, "node key of \(key.count) bytes")
        case .rendezvousLookupReply:
            var r = ByteReader(bytes, offset: 1)
            guard r.u8() == revueProtocolVersion, let key = r.take(32), r.u8() != nil, r.u32() != nil, r.u16() != nil,
                  r.u8() != nil, r.u16() != nil else { return }
            _ = Hex.encode(key)
        case .relayDeliver:
            // Relayed datagrams carry one inner datagram; a relay inside a relay is dropped.
            var r = ByteReader(bytes, offset: 1)
            guard !relayed, r.u8() == revueProtocolVersion, r.take(32) != nil else { return }
            let inner = r.rest()
            switch inner.first.flatMap(PacketType.init(rawValue:)) {
            case .handshakeInitiation:
                initiation(inner)
            case .handshakeResponse: response(inner)
            case .transportData: transportData(inner)
            default: break
            }
        case .lanAnnounce:
            var r = ByteReader(bytes, offset: 1)
            guard r.u8() == revueProtocolVersion, let key = r.take(32), r.u16() != nil else { return }
            _ = Hex.encode(key)
        default:
            return  // to-node packets: a peer drops them
        }
    }

    /// Noise IK message 1 to the fixture's responder. Returns the authenticated initiator key.
    @discardableResult
    mutating func initiation(_ bytes: [UInt8]) -> [UInt8]? {
        guard let (payload, rs) = Self.readInitiation(bytes, responder: fixture.responder) else { return nil }
        accepted += 1
        fuzzRequire(rs == fixture.initiator.publicKey, "initiation authenticated an unknown static key \(Hex.encode(rs))")
        var p = ByteReader(payload)
        if let kind = p.u8().flatMap(HandshakeKind.init(rawValue:)), p.u64() != nil, kind == .friendRequest, p.u32() != nil {
            _ = String(decoding: p.rest(), as: UTF8.self)
        }
        // Every byte is authenticated: the header through the prologue, e through the hash, the
        // rest by the AEAD tags. Change one (chosen by the payload) and the responder must refuse.
        let at = (payload.first.map(Int.init) ?? 0) &+ bytes.count / 2
        var changed = bytes
        changed[at % bytes.count] ^= 0x01
        if at % bytes.count != 0 {  // byte 0 is the type: changed, it is not an initiation at all
            fuzzRequire(Self.readInitiation(changed, responder: fixture.responder) == nil,
                        "initiation still accepted with byte \(at % bytes.count) changed")
        }
        return rs
    }

    static func readInitiation(_ bytes: [UInt8], responder: KeyPair) -> (payload: [UInt8], initiator: [UInt8])? {
        var r = ByteReader(bytes, offset: 1)
        guard r.u8() == revueProtocolVersion, r.u32() != nil, r.remaining >= NoiseIKHandshake.message1Overhead + 9 else { return nil }
        var hs = NoiseIKHandshake(initiator: false, prologue: Array(bytes[0..<6]), localStatic: responder, remoteStatic: nil)
        guard let payload = hs.readMessage1(r.rest()), let rs = hs.remoteStatic else { return nil }
        guard hs.writeMessage2(payload: []) != nil else { return nil }
        return (payload, rs)
    }

    /// Noise IK message 2 to the fixture initiator's pending handshake.
    mutating func response(_ bytes: [UInt8]) {
        var r = ByteReader(bytes, offset: 1)
        guard r.u8() == revueProtocolVersion, r.u32() != nil, let receiverIndex = r.u32(),
              r.remaining >= NoiseIKHandshake.message2Overhead, receiverIndex == fixture.initiatorIndex else { return }
        var hs = fixture.pending()
        guard hs.readMessage2(r.rest()) != nil else { return }
        accepted += 1
        let keys = hs.transportKeys()
        fuzzRequire(keys.send == fixture.initiatorToResponder && keys.receive == fixture.responderToInitiator,
                    "an accepted response gave transport keys other than the responder's")
    }

    /// Transport data to one of the two sessions: replay check, AEAD open, frame.
    mutating func transportData(_ bytes: [UInt8]) {
        var r = ByteReader(bytes, offset: 1)
        guard let receiverIndex = r.u32(), let counter = r.u64(), r.remaining >= 16,
              var window = windows[receiverIndex] else { return }
        let key = receiverIndex == fixture.responderIndex ? fixture.initiatorToResponder : fixture.responderToInitiator
        guard window.wouldAccept(counter) else { return }
        let ad = Array(bytes[0..<13])
        guard let plain = Sodium.open(key: key, nonce: counter, ad: ad, ciphertext: bytes[13...]) else {
            // Forged: nothing recorded, so it cannot move the window.
            return
        }
        fuzzRequire(Sodium.seal(key: key, nonce: counter, ad: ad, plaintext: plain) == Array(bytes[13...]),
                    "an accepted data packet does not re-seal to itself (counter \(counter))")
        window.record(counter)
        accepted += 1
        fuzzRequire(!window.wouldAccept(counter), "counter \(counter) accepted again after it was recorded")
        fuzzRequire(window.highest >= counter, "replay window's highest \(window.highest) is below \(counter)")
        windows[receiverIndex] = window
        Self.frame(plain)
    }

    /// The frame inside a transport packet (`SessionCore.handleFrame`, `applyProfile`).
    static func frame(_ plain: [UInt8]) {
        var r = ByteReader(plain)
        guard let type = r.u8().flatMap(FrameType.init(rawValue:)) else { return }
        switch type {
        case .ping, .pong: _ = r.u64()
        case .reliable:
            guard r.u32() != nil, r.u32() != nil, let kind = r.u8().flatMap(ReliableKind.init(rawValue:)) else { return }
            let body = r.rest()
            switch kind {
            case .message: _ = String(decoding: body, as: UTF8.self)
            case .profile:
                var p = ByteReader(body)
                guard p.u8() != nil, let n = p.u16(), let name = p.take(Int(n)) else { return }
                _ = String(decoding: name, as: UTF8.self)
                _ = String(decoding: p.rest(), as: UTF8.self)
            }
        case .ack: _ = (r.u32(), r.u32())
        case .bye: break
        }
    }
}
