import Foundation
import MediaCore

extension FuzzEntries {
    /// STUN (RFC 8489) and the TURN client (RFC 8656) on any bytes. Byte 0 picks the mode.
    ///
    /// Even: the rest is one STUN message for the codec. Parsing never crashes; a parsed message
    /// encodes again and parses back to the same method, class, transaction ID and attributes
    /// (MESSAGE-INTEGRITY and FINGERPRINT aside, which encoding recomputes); signed by the harness
    /// with a key and a FINGERPRINT it validates, not under another key, and with any one byte
    /// changed its integrity or fingerprint fails. The bytes also go to a TURN client as a datagram
    /// from its server.
    ///
    /// Odd: the rest is records (`[length: UInt16 BE][op][bytes]`) fed to a fresh socketless
    /// `TURNClient` (its requests seen through its send tap). Byte 0's bits 1 and 2 decide whether
    /// the harness first answers the client's challenge and signs its allocation (then a
    /// permission and channel 0x4000 to 127.0.0.1:7000 are requested). Ops: raw bytes from the
    /// server; the bytes with the newest pending transaction ID patched in; a response to a pending
    /// request signed with the right key whose attributes come from the input; ChannelData on
    /// channel 0x4000-0x4003; a Data indication. Properties: every datagram is counted once (the
    /// kinds add up to `received`); a response is accepted only with a matching transaction ID and
    /// method, and only when its MESSAGE-INTEGRITY is valid under the key the request was signed
    /// with (unsigned: only the 401/438 challenges, or anything answering the first, unsigned
    /// request); a correctly signed answer is always accepted; peer data reaches `onPeerData`
    /// exactly, and only on a bound channel or from a permitted peer while allocated.
    /// Thread rule: any thread. Cost: a few HMACs per input.
    @Sendable public static func stun(_ data: UnsafeRawBufferPointer) {
        guard let mode = data.first else { return }
        let rest = UnsafeRawBufferPointer(rebasing: data[1...])
        if mode & 1 == 0 {
            stunCodec(Array(rest))
            let harness = STUNClientHarness(script: 0)
            harness.deliver(Array(rest))
            harness.finish()
        } else {
            let harness = STUNClientHarness(script: mode >> 1)
            for record in fuzzRecords(rest, limit: 32) { harness.run(Array(record)) }
            harness.finish()
        }
    }

    /// The seed inputs of fuzz-stun: valid messages for the codec, and client scripts that reach
    /// an allocation, signed answers, ChannelData and Data indications.
    public static func stunSeeds() -> [(name: String, bytes: [UInt8])] {
        var out: [(String, [UInt8])] = []
        var binding = STUNMessage(method: .binding, class: .request)
        binding.appendText(STUNMessage.AttributeType.software, "revue seed")
        out.append(("binding-request", [0] + binding.encode(fingerprint: true)))
        var success = STUNMessage(method: .binding, class: .successResponse)
        success.appendXORAddress(STUNMessage.AttributeType.xorMappedAddress, SocketAddress(ipv4: 192, 0, 2, 1, port: 3478))
        out.append(("binding-success", [0] + success.encode(fingerprint: true)))
        var allocated = STUNMessage(method: .allocate, class: .successResponse)
        allocated.appendXORAddress(
            STUNMessage.AttributeType.xorRelayedAddress,
            SocketAddress(ipv6: [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 7, count: 12), port: 50_000))
        allocated.appendUInt32(STUNMessage.AttributeType.lifetime, 600)
        out.append(("allocate-success-signed", [0] + allocated.encode(integrity: STUNClientHarness.key, fingerprint: true)))
        var challenge = STUNMessage(method: .allocate, class: .errorResponse)
        challenge.appendErrorCode(401, reason: "Unauthorized")
        challenge.appendText(STUNMessage.AttributeType.realm, STUNClientHarness.realm)
        challenge.appendText(STUNMessage.AttributeType.nonce, "n")
        out.append(("allocate-challenge", [0] + challenge.encode()))
        func record(_ op: UInt8, _ bytes: [UInt8]) -> [UInt8] {
            let n = bytes.count + 1
            return [UInt8(n >> 8), UInt8(n & 0xFF), op] + bytes
        }
        let attributes: [UInt8] = [0x00, 0x0D, 0x00, 0x04, 0, 0, 2, 88, 0x80, 0x22, 0x00, 0x03, 0x61, 0x62, 0x63, 0]
        out.append(
            (
                "client-allocated",
                [0b111] + record(2, [0] + attributes) + record(3, [0] + Array("media".utf8))
                    + record(4, Array("indicated".utf8)) + record(1, [0x01, 0x13, 0x00, 0x00] + [UInt8](repeating: 0, count: 16))
            ))
        out.append(
            (
                "client-challenged",
                [0b011] + record(2, [1] + [0x00, 0x09, 0x00, 0x04, 0, 0, 4, 38]) + record(0, [0x40, 0x00, 0x00, 0x01, 9])
            ))
        out.append(
            (
                "client-fresh",
                [0b001] + record(1, [0x01, 0x13, 0x00, 0x00] + [UInt8](repeating: 0, count: 16)) + record(0, [0x17])
            ))
        return out
    }

    /// The codec properties on one message (see `stun`).
    static func stunCodec(_ bytes: [UInt8]) {
        let anyKey = Array(bytes.prefix(16))
        _ = STUNMessage.hasValidFingerprint(bytes)
        _ = STUNMessage.hasValidIntegrity(bytes, key: anyKey)
        guard let m = try? STUNMessage(parsing: bytes) else { return }
        _ = try? m.xorAddress(STUNMessage.AttributeType.xorMappedAddress)
        _ = m.errorCode
        let kept = m.attributes.filter {
            $0.type != STUNMessage.AttributeType.messageIntegrity && $0.type != STUNMessage.AttributeType.fingerprint
        }
        let encoded = m.encode()
        guard let again = try? STUNMessage(parsing: encoded) else {
            return fuzzRequire(false, "a parsed message re-encodes to bytes that do not parse")
        }
        fuzzRequire(
            again.method == m.method && again.messageClass == m.messageClass && again.transactionID == m.transactionID,
            "the header changed through encode and parse")
        fuzzRequire(again.attributes == kept, "attributes changed through encode and parse")
        // Signing adds 32 bytes; the length field has 16 bits.
        guard encoded.count + 32 - 20 <= 65_535 else { return }
        let key = STUNClientHarness.key
        let signed = m.encode(integrity: key, fingerprint: true)
        fuzzRequire(
            STUNMessage.hasValidIntegrity(signed, key: key) && STUNMessage.hasValidFingerprint(signed),
            "a message signed by the harness does not validate")
        fuzzRequire(!STUNMessage.hasValidIntegrity(signed, key: key.map { $0 ^ 0x01 }), "valid under another key")
        let at = Int(bytes.count > 0 ? bytes[bytes.count - 1] : 0) * 251 % signed.count
        var flipped = signed
        flipped[at] ^= UInt8(truncatingIfNeeded: 1 << (at % 8))
        fuzzRequire(
            !(STUNMessage.hasValidIntegrity(flipped, key: key) && STUNMessage.hasValidFingerprint(flipped)),
            "byte \(at) changed and both integrity and fingerprint still hold")
    }
}

/// A socketless TURN client with a scripted server (see `FuzzEntries.stun`).
final class STUNClientHarness: @unchecked Sendable {
    static let realm = "fuzz.realm", user = "fuzz", password = "pw"
    static let key = STUNMessage.longTermKey(username: user, realm: realm, password: password)
    static let server = SocketAddress(ipv4: 127, 0, 0, 1, port: 3478)
    static let peer = SocketAddress(ipv4: 127, 0, 0, 1, port: 7000)

    let client: TURNClient
    /// What the client sent, in order, and handed to `onPeerData` (the client calls both
    /// synchronously on the harness's thread).
    final class Log: @unchecked Sendable {
        var sent: [[UInt8]] = []
        var delivered: [(SocketAddress, [UInt8])] = []
    }
    let log = Log()
    var boundChannel: UInt16?

    init(script: UInt8) {
        let log = self.log
        client = TURNClient(
            socketlessServer: ICEServer(kind: .turn, address: Self.server, username: Self.user, password: Self.password),
            sendTap: { bytes in log.sent.append(bytes) })
        client.onPeerData = { peer, bytes in log.delivered.append((peer, Array(bytes))) }
        client.allocate()
        if script & 1 != 0, let request = lastRequest()?.message {
            var challenge = STUNMessage(method: .allocate, class: .errorResponse, transactionID: request.transactionID)
            challenge.appendErrorCode(401, reason: "Unauthorized")
            challenge.appendText(STUNMessage.AttributeType.realm, Self.realm)
            challenge.appendText(STUNMessage.AttributeType.nonce, "nonce-1")
            deliver(challenge.encode())
            if script & 2 != 0, let signed = lastRequest()?.message {
                var ok = STUNMessage(method: .allocate, class: .successResponse, transactionID: signed.transactionID)
                ok.appendXORAddress(STUNMessage.AttributeType.xorRelayedAddress, SocketAddress(ipv4: 127, 0, 0, 1, port: 50_000))
                ok.appendXORAddress(STUNMessage.AttributeType.xorMappedAddress, SocketAddress(ipv4: 127, 0, 0, 1, port: 40_000))
                ok.appendUInt32(STUNMessage.AttributeType.lifetime, 600)
                deliver(ok.encode(integrity: Self.key, fingerprint: true))
                fuzzRequire(
                    client.state
                        == .allocated(
                            relayed: SocketAddress(ipv4: 127, 0, 0, 1, port: 50_000),
                            mapped: SocketAddress(ipv4: 127, 0, 0, 1, port: 40_000)), "\(client.state)")
                client.createPermission(Self.peer)
                boundChannel = client.bindChannel(Self.peer)
                fuzzRequire(boundChannel == 0x4000, "the first channel is \(String(describing: boundChannel))")
            }
        }
    }

    /// Transaction IDs the client accepted an answer for.
    var answered = Set<[UInt8]>()

    /// The newest request the client sent and has not had answered, and the key it was signed
    /// with (nil: unsigned), from the REALM it carries.
    func lastRequest() -> (message: STUNMessage, key: [UInt8]?)? {
        for bytes in log.sent.reversed() {
            guard let m = try? STUNMessage(parsing: bytes), m.messageClass == .request, !answered.contains(m.transactionID) else {
                continue
            }
            return (m, Self.key(of: m))
        }
        return nil
    }

    static func key(of request: STUNMessage) -> [UInt8]? {
        guard request.value(STUNMessage.AttributeType.messageIntegrity) != nil,
            let realm = request.text(STUNMessage.AttributeType.realm)
        else { return nil }
        return STUNMessage.longTermKey(username: user, realm: realm, password: password)
    }

    /// Every request the client sent, by transaction ID: its method and signing key.
    func requests() -> [[UInt8]: (method: STUNMessage.Method, key: [UInt8]?)] {
        var out: [[UInt8]: (STUNMessage.Method, [UInt8]?)] = [:]
        for bytes in log.sent {
            guard let m = try? STUNMessage(parsing: bytes), m.messageClass == .request else { continue }
            out[m.transactionID] = (m.method, Self.key(of: m))
        }
        return out
    }

    func run(_ record: [UInt8]) {
        guard let op = record.first else { return }
        let body = Array(record.dropFirst())
        switch op % 5 {
        case 0:
            deliver(body)
        case 1:
            guard body.count >= 20, let pending = lastRequest()?.message else { return deliver(body) }
            var b = body
            b.replaceSubrange(4..<8, with: [0x21, 0x12, 0xA4, 0x42])
            b.replaceSubrange(8..<20, with: pending.transactionID)
            deliver(b)
        case 2:
            guard let (pending, key) = lastRequest(), let flags = body.first else { return }
            var m = STUNMessage(
                method: pending.method, class: flags & 1 == 0 ? .successResponse : .errorResponse,
                transactionID: pending.transactionID)
            var at = 1
            while at + 4 <= body.count, m.attributes.count < 16 {
                let type = UInt16(body[at]) << 8 | UInt16(body[at + 1])
                let n = min(Int(body[at + 2]) << 8 | Int(body[at + 3]), body.count - at - 4, 512)
                m.attributes.append(.init(type: type, value: Array(body[(at + 4)..<(at + 4 + n)])))
                at += 4 + n
            }
            let signed = m.encode(integrity: key ?? Self.key, fingerprint: flags & 2 == 0)
            let before = client.statistics.responsesAccepted
            let live = client.pendingTransactions > 0
            deliver(signed)
            // Signed answers are accepted exactly when the request was signed (an unsigned one has
            // no key to check them with) and still pending.
            let expected = live && key != nil ? before + 1 : before
            fuzzRequire(
                client.statistics.responsesAccepted == expected,
                "a signed answer accepted \(client.statistics.responsesAccepted - before) times")
        case 3:
            let channel = 0x4000 + UInt16(body.first ?? 0) % 4
            let payload = Array(body.dropFirst())
            let before = log.delivered.count
            let live = isAllocated && channel == boundChannel
            deliver(TURNChannelData.encode(channel: channel, data: payload, padded: body.count % 2 == 0))
            let after = log.delivered
            if live {
                fuzzRequire(
                    after.count == before + 1 && after.last!.0 == Self.peer && after.last!.1 == payload,
                    "ChannelData not delivered exactly")
            } else {
                fuzzRequire(after.count == before, "ChannelData delivered on an unbound channel or without an allocation")
            }
        default:
            var m = STUNMessage(method: .data, class: .indication)
            let from = body.first.map { $0 & 1 == 0 ? Self.peer : SocketAddress(ipv4: 10, 0, 0, $0, port: 7000) } ?? Self.peer
            m.appendXORAddress(STUNMessage.AttributeType.xorPeerAddress, from)
            m.attributes.append(.init(type: STUNMessage.AttributeType.data, value: Array(body.dropFirst())))
            let before = log.delivered.count
            let permitted = isAllocated && boundChannel != nil && from == Self.peer
            deliver(m.encode(fingerprint: true))
            let after = log.delivered
            fuzzRequire(
                after.count == before + (permitted ? 1 : 0),
                "a Data indication from \(from) delivered \(after.count - before) times")
            if permitted { fuzzRequire(after.last!.1 == Array(body.dropFirst()), "Data indication payload changed") }
        }
    }

    var isAllocated: Bool {
        if case .allocated = client.state { return true }
        return false
    }

    /// Hands `bytes` to the client as a datagram from its server and checks the counters and
    /// what was trusted.
    func deliver(_ bytes: [UInt8]) {
        let known = requests()
        let before = client.statistics
        let consumed = bytes.withUnsafeBytes { client.handleDatagram($0, from: Self.server) }
        let after = client.statistics
        fuzzRequire(
            after.received == before.received + 1 && after.received == after.receivedByKind,
            "a datagram was not counted exactly once: \(after)")
        if after.unmatchedResponses > before.unmatchedResponses { fuzzRequire(!consumed, "an unmatched response was consumed") }
        guard after.responsesAccepted > before.responsesAccepted, let m = try? STUNMessage(parsing: bytes) else { return }
        guard let request = known[m.transactionID] else { return fuzzRequire(false, "accepted a response to no request of ours") }
        fuzzRequire(!answered.contains(m.transactionID), "accepted a second answer to one request")
        answered.insert(m.transactionID)
        fuzzRequire(request.method == m.method, "accepted a response of another method")
        if m.value(STUNMessage.AttributeType.fingerprint) != nil {
            fuzzRequire(STUNMessage.hasValidFingerprint(bytes), "accepted a response with a bad FINGERPRINT")
        }
        if let key = request.key, STUNMessage.hasValidIntegrity(bytes, key: key) { return }
        let code = m.errorCode?.code
        fuzzRequire(
            m.messageClass == .errorResponse && m.value(STUNMessage.AttributeType.messageIntegrity) == nil
                && (request.key == nil || code == 401 || code == 438),
            "accepted an unsigned or badly signed \(m.messageClass) (request signed: \(request.key != nil), code \(String(describing: code)))"
        )
    }

    func finish() {
        client.close()
    }
}
