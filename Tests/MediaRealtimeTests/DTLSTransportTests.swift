import Foundation
import MediaCore
import MediaTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Two transports joined by an in-memory link that drops a share of the datagrams with a seeded
/// generator. OpenSSL's retransmission timer runs on the real clock, so the link sleeps until the
/// earliest deadline when nothing is in flight.
private final class LossyLink {
    var toPassive: [[UInt8]] = []
    var toActive: [[UInt8]] = []
    var random: TestRandom
    let loss: Double
    var dropped = 0
    var delivered = 0

    init(loss: Double, seed: UInt64) {
        self.loss = loss
        random = TestRandom(state: seed)
    }

    private func lose() -> Bool {
        Double(random.next() >> 11) / Double(1 << 53) < loss
    }

    func connect(_ active: DTLSTransport, _ passive: DTLSTransport) {
        active.onDatagram = { [unowned self] d in
            if lose() { dropped += 1 } else { toPassive.append(Array(d)) }
        }
        passive.onDatagram = { [unowned self] d in
            if lose() { dropped += 1 } else { toActive.append(Array(d)) }
        }
    }

    /// Runs until both sides leave the handshake states or `seconds` of real time pass.
    func run(_ active: DTLSTransport, _ passive: DTLSTransport, seconds: Double = 20) {
        let stop = MonotonicTime.now + .seconds(seconds)
        func running(_ t: DTLSTransport) -> Bool { t.state == .new || t.state == .connecting }
        while running(active) || running(passive) {
            let now = MonotonicTime.now
            if now > stop { return }
            if !toPassive.isEmpty {
                let d = toPassive.removeFirst()
                delivered += 1
                passive.handle(datagram: d, now: now)
                continue
            }
            if !toActive.isEmpty {
                let d = toActive.removeFirst()
                delivered += 1
                active.handle(datagram: d, now: now)
                continue
            }
            let next =
                [active.nextDeadline(now: now), passive.nextDeadline(now: now)].compactMap { $0 }.min() ?? now + .milliseconds(1)
            if next > now { usleep(UInt32(min(next - now, .milliseconds(50)).inNanoseconds / 1000) + 100) }
            let later = MonotonicTime.now
            active.handleTimeout(now: later)
            passive.handleTimeout(now: later)
        }
    }
}

private func configuration(_ role: DTLSTransport.Role, profiles: [SRTPSuite]? = nil) -> DTLSTransport.Configuration {
    var c = DTLSTransport.Configuration(role: role)
    c.initialRetransmissionTimeout = 0.01
    c.maxRetransmissionTimeout = 0.2
    c.handshakeTimeout = 30
    if let profiles { c.srtpProfiles = profiles }
    return c
}

/// A distinct RTP packet: version 2, payload type 96.
private func rtp(sequence: UInt16, ssrc: UInt32) -> [UInt8] {
    var p: [UInt8] = [
        0x80, 96, UInt8(sequence >> 8), UInt8(sequence & 0xff), 0, 0, 0x10, 0,
        UInt8(ssrc >> 24), UInt8(ssrc >> 16 & 0xff), UInt8(ssrc >> 8 & 0xff), UInt8(ssrc & 0xff),
    ]
    p += (0..<100).map { UInt8(truncatingIfNeeded: Int($0) &* 7 &+ Int(sequence)) }
    return p
}

/// Protects `packet` with `sender` and unprotects it with `receiver`; the bytes that come out.
private func roundTrip(_ packet: [UInt8], _ sender: SRTPContext, _ receiver: SRTPContext) throws -> [UInt8] {
    var buffer = packet + [UInt8](repeating: 0, count: sender.rtpOverhead)
    let protected = try buffer.withUnsafeMutableBytes {
        var span = $0.mutableBytes
        return try sender.protect(&span, length: packet.count)
    }
    #expect(protected == packet.count + sender.rtpOverhead)
    #expect(Array(buffer[12..<packet.count]) != Array(packet[12...]), "payload was not encrypted")
    let plain = try buffer.withUnsafeMutableBytes {
        var span = $0.mutableBytes
        return try receiver.unprotect(&span, length: protected)
    }
    return Array(buffer[0..<plain])
}

/// A transport and the serial queue that owns it (the thread rule): every call goes through
/// `queue`, including datagrams the ICE agent hands over from its own queue.
private final class QueueOwnedDTLS: @unchecked Sendable {
    let queue = DispatchQueue(label: "dtls-owner")
    let transport: DTLSTransport
    private var timer: DispatchSourceTimer?

    init(_ configuration: DTLSTransport.Configuration) throws { transport = try DTLSTransport(configuration: configuration) }

    /// Routes the agent's non-ICE datagrams of the DTLS range here, sends ours on its selected
    /// pair, and drives the retransmission timer every 5 ms.
    func attach(to peer: ICETestPeer, remote: DTLSFingerprint) {
        queue.sync {
            transport.setRemoteFingerprint(remote)
            transport.onDatagram = { bytes in _ = peer.agent.path.send(bytes, on: peer.socket) }
        }
        peer.agent.startReading { [self] bytes, from in
            if let first = bytes.first, DTLSTransport.isDTLS(firstByte: first) {
                let copy = Array(bytes)
                queue.async { self.transport.handle(datagram: copy, now: .now) }
            } else {
                peer.received.withLock { $0.append((Array(bytes), from)) }
            }
        }
        let t = DispatchSource.makeTimerSource(queue: queue)
        t.schedule(deadline: .now(), repeating: .milliseconds(5))
        t.setEventHandler { [self] in transport.handleTimeout(now: .now) }
        t.resume()
        timer = t
    }

    func stop() { queue.sync { timer?.cancel() } }
}

@Suite struct DTLSTransportTests {
    @Test(arguments: [[SRTPSuite.aeadAES128GCM, .aesCM128HMACSHA1_80], [.aesCM128HMACSHA1_80]])
    func handshakeOverLossyLinkDerivesMatchingSRTPKeys(profiles: [SRTPSuite]) throws {
        let active = try DTLSTransport(configuration: configuration(.active))
        let passive = try DTLSTransport(configuration: configuration(.passive, profiles: profiles))
        #expect(active.fingerprint != passive.fingerprint)
        active.setRemoteFingerprint(DTLSFingerprint(sdpValue: passive.fingerprint.sdpValue)!)
        passive.setRemoteFingerprint(active.fingerprint)
        let link = LossyLink(loss: 0.3, seed: profiles.count == 2 ? 7 : 11)
        link.connect(active, passive)
        active.start(now: .now)
        link.run(active, passive)

        #expect(active.state == .connected, "active: \(active.state)")
        #expect(passive.state == .connected, "passive: \(passive.state)")
        #expect(link.dropped > 0, "the link dropped nothing")
        #expect(active.statistics.retransmissions + passive.statistics.retransmissions > 0)
        #expect(active.suite == profiles[0] && passive.suite == profiles[0])
        #expect(active.peerFingerprint == passive.fingerprint && passive.peerFingerprint == active.fingerprint)

        let a = try #require(active.takeKeys())
        let p = try #require(passive.takeKeys())
        #expect(active.takeKeys() == nil, "keys are handed out once")
        #expect(a.suite == profiles[0] && a.send.suite == profiles[0])
        #expect(a.send == p.receive && a.receive == p.send && a.send != a.receive)
        let (aOut, aIn) = try a.makeContexts()
        let (pOut, pIn) = try p.makeContexts()
        for seq: UInt16 in 1...5 {
            let fromActive = rtp(sequence: seq, ssrc: 0x1111_2222)
            #expect(try roundTrip(fromActive, aOut, pIn) == fromActive)
            let fromPassive = rtp(sequence: seq, ssrc: 0x3333_4444)
            #expect(try roundTrip(fromPassive, pOut, aIn) == fromPassive)
        }
        // The active side's send key is not the passive side's send key.
        var buffer = rtp(sequence: 9, ssrc: 1) + [UInt8](repeating: 0, count: aOut.rtpOverhead)
        let n = try buffer.withUnsafeMutableBytes {
            var span = $0.mutableBytes
            return try aOut.protect(&span, length: 112)
        }
        #expect(throws: SRTPError.authFail) {
            try buffer.withUnsafeMutableBytes {
                var span = $0.mutableBytes
                _ = try aIn.unprotect(&span, length: n)
            }
        }
    }

    @Test func handshakeOverTheICEAgentsSelectedPairThenSRTPBothWays() throws {
        let a = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: true)
        let b = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: false)
        defer { a.close(); b.close() }
        exchangeICESignalling(a.agent, b.agent)
        let dtlsA = try QueueOwnedDTLS(configuration(.active))
        let dtlsB = try QueueOwnedDTLS(configuration(.passive))
        defer { dtlsA.stop(); dtlsB.stop() }
        dtlsA.attach(to: a, remote: dtlsB.transport.fingerprint)
        dtlsB.attach(to: b, remote: dtlsA.transport.fingerprint)
        a.agent.start()
        b.agent.start()
        #expect(pollUntil(3) { a.agent.path.route != nil && b.agent.path.route != nil })
        dtlsA.queue.sync { dtlsA.transport.start(now: .now) }
        #expect(
            pollUntil(5) {
                dtlsA.queue.sync { dtlsA.transport.state == .connected }
                    && dtlsB.queue.sync { dtlsB.transport.state == .connected }
            })
        let keysA = try #require(dtlsA.queue.sync { dtlsA.transport.takeKeys() })
        let keysB = try #require(dtlsB.queue.sync { dtlsB.transport.takeKeys() })
        let (outA, inA) = try keysA.makeContexts()
        let (outB, inB) = try keysB.makeContexts()
        // SRTP each way over the selected pair; the other side's receive context opens it.
        for (from, to, out, into, ssrc) in [(a, b, outA, inB, UInt32(0xA1A1_0001)), (b, a, outB, inA, 0xB2B2_0002)] {
            var sent: [[UInt8]] = []
            for seq: UInt16 in 1...5 {
                let packet = rtp(sequence: seq, ssrc: ssrc)
                sent.append(packet)
                var buffer = packet + [UInt8](repeating: 0, count: out.rtpOverhead)
                let n = try buffer.withUnsafeMutableBytes {
                    var span = $0.mutableBytes
                    return try out.protect(&span, length: packet.count)
                }
                _ = buffer.withUnsafeBytes { from.agent.path.send(UnsafeRawBufferPointer(rebasing: $0[0..<n]), on: from.socket) }
            }
            #expect(pollUntil(2) { to.received.withLock { $0.count } >= 5 })
            var opened: [[UInt8]] = []
            for (bytes, _) in to.received.withLock({ $0 }) {
                var buffer = bytes
                if let n = try? buffer.withUnsafeMutableBytes({
                    var span = $0.mutableBytes
                    return try into.unprotect(&span, length: bytes.count)
                }) {
                    opened.append(Array(buffer[0..<n]))
                }
            }
            #expect(opened == sent)
        }
    }

    @Test func handshakeTimeOnLoopbackWithoutLoss() throws {
        // A 1 s first retransmission timeout, so a busy machine does not add resent flights.
        var a = configuration(.active), p = configuration(.passive)
        a.initialRetransmissionTimeout = 1
        p.initialRetransmissionTimeout = 1
        let start = MonotonicTime.now
        let active = try DTLSTransport(configuration: a)
        let passive = try DTLSTransport(configuration: p)
        let made = MonotonicTime.now
        active.setRemoteFingerprint(passive.fingerprint)
        passive.setRemoteFingerprint(active.fingerprint)
        let link = LossyLink(loss: 0, seed: 1)
        link.connect(active, passive)
        active.start(now: made)
        link.run(active, passive)
        let done = MonotonicTime.now
        #expect(active.state == .connected && passive.state == .connected)
        print(
            "DTLS in-process: two endpoints (keys and certificates) in \(Double((made - start).inNanoseconds) / 1e6) ms, "
                + "handshake in \(Double((done - made).inNanoseconds) / 1e6) ms over \(link.delivered) datagrams, "
                + "\(active.statistics.retransmissions + passive.statistics.retransmissions) retransmissions")

        // close() sends close_notify; the peer moves to .closed and drops what follows.
        active.close()
        #expect(active.state == .closed && link.toPassive.count == 1)
        for d in link.toPassive { passive.handle(datagram: d, now: .now) }
        #expect(passive.state == .closed)
        passive.handle(datagram: link.toPassive[0], now: .now)
        #expect(passive.statistics.droppedAfterEnd == 1)
    }

    @Test func fingerprintMismatchFailsWithoutKeys() throws {
        let active = try DTLSTransport(configuration: configuration(.active))
        let passive = try DTLSTransport(configuration: configuration(.passive))
        let impostor = try DTLSTransport(configuration: configuration(.passive))
        active.setRemoteFingerprint(impostor.fingerprint)  // signalling named another certificate
        passive.setRemoteFingerprint(active.fingerprint)
        var states: [DTLSTransport.State] = []
        active.onStateChange = { states.append($0) }
        let link = LossyLink(loss: 0, seed: 3)
        link.connect(active, passive)
        active.start(now: .now)
        link.run(active, passive, seconds: 5)
        #expect(active.state == .failed(.fingerprintMismatch))
        #expect(states.last == .failed(.fingerprintMismatch) && !states.contains(.connected))
        #expect(active.takeKeys() == nil)
        #expect(active.peerFingerprint == passive.fingerprint)
    }

    @Test func fingerprintArrivingAfterTheHandshakeReleasesOrRefusesKeys() throws {
        let active = try DTLSTransport(configuration: configuration(.active))
        let passive = try DTLSTransport(configuration: configuration(.passive))
        let link = LossyLink(loss: 0, seed: 5)
        link.connect(active, passive)
        active.start(now: .now)
        link.run(active, passive, seconds: 5)
        #expect(active.state == .awaitingFingerprint && passive.state == .awaitingFingerprint)
        #expect(active.takeKeys() == nil && passive.takeKeys() == nil)
        passive.setRemoteFingerprint(active.fingerprint)
        #expect(passive.state == .connected && passive.takeKeys() != nil)
        active.setRemoteFingerprint(DTLSFingerprint(bytes: [UInt8](repeating: 0xAB, count: 32))!)
        #expect(active.state == .failed(.fingerprintMismatch) && active.takeKeys() == nil)
    }

    @Test func silentPeerTimesOutAtTheBound() throws {
        var c = configuration(.active)
        c.handshakeTimeout = 1
        let active = try DTLSTransport(configuration: c)
        active.setRemoteFingerprint(DTLSFingerprint(bytes: [UInt8](repeating: 1, count: 32))!)
        var sent = 0
        active.onDatagram = { _ in sent += 1 }
        let start = MonotonicTime.now
        active.start(now: start)
        var calls = 0
        while active.state == .connecting, calls < 10_000 {
            calls += 1
            let now = MonotonicTime.now
            guard let next = active.nextDeadline(now: now) else { break }
            // The deadline never lies past the overall bound.
            #expect(next <= start + .seconds(1))
            if next > now { usleep(UInt32((next - now).inNanoseconds / 1000) + 100) }
            let later = MonotonicTime.now
            active.handleTimeout(now: later)
            if active.state != .connecting { #expect(later >= start + .seconds(1)) }
        }
        #expect(active.state == .failed(.handshakeTimeout))
        #expect(sent >= 3, "the ClientHello was sent \(sent) times")
        #expect(active.statistics.retransmissions == sent - 1)
        #expect(active.takeKeys() == nil && active.nextDeadline(now: .now) == nil)
        // The overall bound holds on its own clock: a caller whose clock jumps past it fails at once.
        let other = try DTLSTransport(configuration: c)
        other.onDatagram = { _ in }
        let early = MonotonicTime(nanoseconds: 1_000)
        other.start(now: early)
        other.handleTimeout(now: early + .milliseconds(999))
        #expect(other.state == .connecting)
        other.handleTimeout(now: early + .seconds(1))
        #expect(other.state == .failed(.handshakeTimeout))
    }

    @Test func garbageDatagramsAreDroppedAndCountedAndTheHandshakeStillFinishes() throws {
        let active = try DTLSTransport(configuration: configuration(.active))
        let passive = try DTLSTransport(configuration: configuration(.passive))
        active.setRemoteFingerprint(passive.fingerprint)
        passive.setRemoteFingerprint(active.fingerprint)
        var random = TestRandom(state: 99)
        var garbage: [[UInt8]] = [
            [], [22], [0x80, 96, 0, 1], [0x00, 0x01, 0x00, 0x00],
            [22, 0xFE, 0xFD] + [UInt8](repeating: 0, count: 8) + [0xFF, 0xFF, 1, 2],
            [23, 0xFE, 0xFD, 0, 1, 0, 0, 0, 0, 0, 1, 0, 4, 1, 2, 3],
        ]  // short by one byte
        for _ in 0..<200 {
            let n = Int(random.next() % 1400)
            garbage.append((0..<n).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        }
        let link = LossyLink(loss: 0, seed: 9)
        link.connect(active, passive)
        // Garbage before, during and after the handshake, to both sides.
        for g in garbage.prefix(70) { passive.handle(datagram: g, now: .now) }
        #expect(passive.state == .new, "garbage started the passive side")
        active.start(now: .now)
        for g in garbage.dropFirst(70).prefix(70) { active.handle(datagram: g, now: .now) }
        link.run(active, passive, seconds: 5)
        for g in garbage.dropFirst(140) {
            active.handle(datagram: g, now: .now)
            passive.handle(datagram: g, now: .now)
        }
        #expect(active.state == .connected && passive.state == .connected, "\(active.state) \(passive.state)")
        let dropped = [active, passive].map {
            $0.statistics.notDTLSDropped + $0.statistics.malformedDropped + $0.statistics.unexpectedDropped
        }
        #expect(
            dropped.reduce(0, +) == 70 + 70 + 2 * (garbage.count - 140),
            "every garbage datagram is dropped before OpenSSL: \(active.statistics) \(passive.statistics)")
        #expect(active.statistics.malformedDropped > 0 && active.statistics.notDTLSDropped > 0)
        #expect(active.takeKeys() != nil && passive.takeKeys() != nil)
    }

    @Test func recordsThatCannotBeRightAreDroppedSoTheyCannotEndTheHandshake() throws {
        // Each of these ends a fresh OpenSSL handshake when it gets that far; the pre-check keeps
        // them away, so a stranger's datagram does not cost the real peer its handshake.
        func record(_ type: UInt8, epoch: UInt8 = 0, _ body: [UInt8]) -> [UInt8] {
            [type, 0xFE, 0xFD, 0, epoch, 0, 0, 0, 0, 0, 9, UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
        }
        func handshake(_ type: UInt8, length: Int, offset: Int = 0, fragment: [UInt8]) -> [UInt8] {
            let l = [UInt8(length >> 16), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
            let o = [UInt8(offset >> 16), UInt8(offset >> 8 & 0xFF), UInt8(offset & 0xFF)]
            let f = [UInt8(fragment.count >> 16), UInt8(fragment.count >> 8 & 0xFF), UInt8(fragment.count & 0xFF)]
            return [type] + l + [0, 0] + o + f + fragment
        }
        let malformed: [[UInt8]] = [
            record(20, [2]),  // ChangeCipherSpec must be the byte 1
            record(20, [1, 1]),
            record(21, [2, 40, 0]),  // an alert is two bytes
            record(21, [3, 40]),  // of level 1 or 2
            record(22, [1, 0, 0]),  // a handshake header is 12 bytes
            record(22, handshake(20, length: 12, fragment: [UInt8](repeating: 0, count: 12))),  // Finished in the clear
            record(22, handshake(99, length: 4, fragment: [1, 2, 3, 4])),  // unknown type
            record(22, handshake(1, length: 4, offset: 2, fragment: [1, 2, 3, 4])),  // past the message
            record(22, handshake(1, length: 40, fragment: [1, 2, 3, 4]) + [7]),  // trailing byte
        ]
        let unexpected: [[UInt8]] = [
            record(23, [1, 2, 3, 4]),  // application data in the clear
            record(24, [1, 0, 16] + [UInt8](repeating: 0, count: 32)),  // heartbeat
            record(22, handshake(16, length: 4, fragment: [0, 0, 0, 0])),  // not what a fresh side waits for
            record(20, [1]),
        ]
        let active = try DTLSTransport(configuration: configuration(.active))
        let passive = try DTLSTransport(configuration: configuration(.passive))
        active.setRemoteFingerprint(passive.fingerprint)
        passive.setRemoteFingerprint(active.fingerprint)
        let link = LossyLink(loss: 0, seed: 21)
        link.connect(active, passive)
        for d in malformed + unexpected { passive.handle(datagram: d, now: .now) }
        #expect(passive.state == .new)
        active.start(now: .now)
        for d in malformed + unexpected { active.handle(datagram: d, now: .now) }
        #expect(active.state == .connecting)
        link.run(active, passive, seconds: 5)
        #expect(active.state == .connected && passive.state == .connected, "\(active.state) \(passive.state)")
        for side in [active, passive] {
            #expect(side.statistics.malformedDropped == malformed.count, "\(side.statistics)")
            #expect(side.statistics.unexpectedDropped == unexpected.count, "\(side.statistics)")
        }
        // Once connected, application data in the clear is still refused.
        passive.handle(datagram: unexpected[0], now: .now)
        #expect(passive.statistics.unexpectedDropped == unexpected.count + 1 && passive.state == .connected)
    }

    @Test func wellFormedRecordsWithGarbageContentNeverYieldKeys() throws {
        // Records that pass the framing check but carry nonsense reach OpenSSL: the handshake may
        // fail with a typed error, but nothing traps and no keys appear.
        var random = TestRandom(state: 1234)
        for round in 0..<40 {
            let passive = try DTLSTransport(configuration: configuration(.passive))
            passive.setRemoteFingerprint(DTLSFingerprint(bytes: [UInt8](repeating: 2, count: 32))!)
            passive.onDatagram = { _ in }
            for _ in 0..<8 {
                let length = Int(random.next() % 300)
                var record: [UInt8] = [
                    UInt8(20 + random.next() % 5), 0xFE, round % 2 == 0 ? 0xFD : 0xFF,
                    0, 0, 0, 0, 0, 0, 0, UInt8(random.next() % 4), UInt8(length >> 8), UInt8(length & 0xff),
                ]
                record += (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                if record[0] == 22 && length > 12 { record[13] = 1 }  // looks like a ClientHello
                passive.handle(datagram: record, now: .now)
            }
            passive.handleTimeout(now: .now)
            #expect(passive.state != .connected && passive.state != .awaitingFingerprint)
            #expect(passive.takeKeys() == nil)
        }
    }

    @Test func fatalAlertFromThePeerIsTypedOnceItsGraceHasPassed() throws {
        let active = try DTLSTransport(configuration: configuration(.active))
        var sent = 0
        active.onDatagram = { _ in sent += 1 }
        let start = MonotonicTime.now
        active.start(now: start)
        #expect(sent >= 1 && active.state == .connecting)
        // A plaintext fatal handshake_failure alert (level 2, description 40) at epoch 0: held,
        // since anyone could have sent it; the peer says nothing more, so once the grace (2 s)
        // has passed the handshake fails with that alert.
        active.handle(datagram: [21, 0xFE, 0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 40], now: start)
        #expect(active.state == .connecting && active.statistics.plaintextAlertsHeld == 1)
        active.handleTimeout(now: start + .milliseconds(1900))
        #expect(active.state == .connecting)
        #expect(active.nextDeadline(now: start + .milliseconds(1900))! <= start + .seconds(2))
        active.handleTimeout(now: start + .seconds(2))
        guard case .failed(.alert(let code, let name)) = active.state else {
            Issue.record("expected a typed alert, got \(active.state)")
            return
        }
        #expect(code == 40 && name.lowercased().contains("handshake"), "\(code) \(name)")
        #expect(active.takeKeys() == nil)
        active.handle(datagram: [22, 0xFE, 0xFD] + [UInt8](repeating: 0, count: 10), now: .now)
        #expect(active.statistics.droppedAfterEnd == 1)
    }

    /// An attacker who knows the addresses (or sends through the TURN relay, which hands the
    /// same datagrams to the transport) forges fatal alerts in the clear at both sides while
    /// they shake hands, and again once they are connected: the handshake finishes and the
    /// association stays up.
    @Test func forgedPlaintextAlertsEndNoHandshakeAndNoAssociation() throws {
        let active = try DTLSTransport(configuration: configuration(.active))
        let passive = try DTLSTransport(configuration: configuration(.passive))
        active.setRemoteFingerprint(passive.fingerprint)
        passive.setRemoteFingerprint(active.fingerprint)
        let link = LossyLink(loss: 0, seed: 8)
        link.connect(active, passive)
        let forged: [[UInt8]] = [
            [21, 0xFE, 0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 40],  // handshake_failure
            [21, 0xFE, 0xFD, 0, 0, 0, 0, 0, 0, 0, 7, 0, 2, 2, 10],  // unexpected_message
            [21, 0xFE, 0xFD, 0, 0, 0, 0, 0, 0, 0, 9, 0, 2, 1, 0],  // close_notify (a warning)
        ]
        active.start(now: .now)
        for d in forged { passive.handle(datagram: d, now: .now) }  // before the ClientHello
        // The ClientHello reaches the passive side, then the forged alerts reach the active side
        // before the passive side's answer.
        if !link.toPassive.isEmpty { passive.handle(datagram: link.toPassive.removeFirst(), now: .now) }
        for d in forged { active.handle(datagram: d, now: .now) }
        #expect(active.state == .connecting && passive.state == .connecting)
        link.run(active, passive, seconds: 5)
        #expect(active.state == .connected && passive.state == .connected, "\(active.state) \(passive.state)")
        #expect(active.statistics.plaintextAlertsHeld == 3 && passive.statistics.plaintextAlertsHeld == 3)
        for d in forged {
            active.handle(datagram: d, now: .now)
            passive.handle(datagram: d, now: .now)
        }
        active.handleTimeout(now: .now + .seconds(5))
        passive.handleTimeout(now: .now + .seconds(5))
        #expect(active.state == .connected && passive.state == .connected)
        #expect(active.statistics.plaintextAlertsDropped == 3 && passive.statistics.plaintextAlertsDropped == 3)
        #expect(active.takeKeys() != nil && passive.takeKeys() != nil)
    }

    @Test func noCommonSRTPProfileFailsWithoutKeys() throws {
        let active = try DTLSTransport(configuration: configuration(.active, profiles: [.aesCM128HMACSHA1_80]))
        let passive = try DTLSTransport(configuration: configuration(.passive, profiles: [.aeadAES128GCM]))
        active.setRemoteFingerprint(passive.fingerprint)
        passive.setRemoteFingerprint(active.fingerprint)
        let link = LossyLink(loss: 0, seed: 4)
        link.connect(active, passive)
        active.start(now: .now)
        link.run(active, passive, seconds: 5)
        for side in [active, passive] {
            guard case .failed(.protocolError) = side.state else {
                Issue.record("expected a protocol error, got \(side.state)")
                continue
            }
            #expect(side.takeKeys() == nil)
        }
    }

    @Test func fingerprintSDPForm() throws {
        let t = try DTLSTransport(configuration: configuration(.passive))
        let value = t.fingerprint.sdpValue
        #expect(value.hasPrefix("sha-256 ") && value.count == 8 + 32 * 3 - 1)
        #expect(DTLSFingerprint(sdpValue: value) == t.fingerprint)
        #expect(DTLSFingerprint(sdpValue: "SHA-256 " + value.dropFirst(8).lowercased()) == t.fingerprint)
        #expect(DTLSFingerprint(sdpValue: "sha-1 " + value.dropFirst(8)) == nil)
        #expect(DTLSFingerprint(sdpValue: String(value.dropLast(3))) == nil)
        #expect(DTLSFingerprint(sdpValue: String(value.dropLast(1)) + "G") == nil)
        #expect(DTLSFingerprint(sdpValue: "") == nil)
        // The PEM form (the interop test checks the digest against `openssl x509 -fingerprint`).
        let pem = t.certificatePEM
        #expect(pem.hasPrefix("-----BEGIN CERTIFICATE-----"))
    }
}
