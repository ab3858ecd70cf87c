import MediaCore

extension FuzzEntries {
    /// The DTLS-SRTP transport (`DTLSTransport`, OpenSSL underneath) on arbitrary datagrams. Byte 0
    /// picks the mode; the rest is records (`[length: UInt16 BE][bytes]`), each one datagram.
    ///
    /// Even: every record goes to a passive (server) transport that expects a fingerprint no
    /// certificate has. Properties: nothing traps; every datagram is counted once; the transport
    /// never reaches `.connected` and never hands out keys.
    ///
    /// Odd: a genuine active transport runs a handshake with the passive one, and each record is
    /// injected into the passive side's input between the genuine datagrams (bit 1 of byte 0: into
    /// the active side's too). Properties: nothing traps; whenever a side reaches `.connected` the
    /// certificate it saw is the genuine peer's; when both connect, the keys agree (one side's send
    /// key is the other's receive key).
    /// Thread rule: any thread. Cost: one or two key pairs and certificates per input (about a
    /// millisecond each) plus at most one handshake.
    @Sendable public static func dtls(_ data: UnsafeRawBufferPointer) {
        guard let mode = data.first else { return }
        let records = fuzzRecords(UnsafeRawBufferPointer(rebasing: data[1...]), limit: 32)
        var now = MonotonicTime(nanoseconds: 1_000_000_000)
        if mode & 1 == 0 {
            var configuration = DTLSTransport.Configuration(role: .passive)
            configuration.handshakeTimeout = 60
            guard let passive = try? DTLSTransport(configuration: configuration) else { return }
            passive.setRemoteFingerprint(DTLSFingerprint(bytes: [UInt8](repeating: 0, count: 32))!)
            passive.onDatagram = { _ in }
            for record in records {
                passive.handle(datagram: record, now: now)
                now += .milliseconds(10)
                passive.handleTimeout(now: now)
                fuzzRequire(
                    passive.state != .connected && passive.state != .awaitingFingerprint,
                    "a stranger's datagrams finished a handshake: \(passive.state)")
            }
            fuzzRequire(passive.takeKeys() == nil, "keys without a verified handshake")
            fuzzRequire(passive.statistics.datagramsReceived == records.count, "datagrams not counted once")
            return
        }
        guard let active = try? DTLSTransport(configuration: DTLSTransport.Configuration(role: .active)),
            let passive = try? DTLSTransport(configuration: DTLSTransport.Configuration(role: .passive))
        else { return }
        active.setRemoteFingerprint(passive.fingerprint)
        passive.setRemoteFingerprint(active.fingerprint)
        var toPassive: [[UInt8]] = [], toActive: [[UInt8]] = []
        active.onDatagram = { toPassive.append(Array($0)) }
        passive.onDatagram = { toActive.append(Array($0)) }
        active.start(now: now)
        func pump() {
            var steps = 0
            while (!toPassive.isEmpty || !toActive.isEmpty) && steps < 64 {
                steps += 1
                if !toPassive.isEmpty { passive.handle(datagram: toPassive.removeFirst(), now: now) }
                if !toActive.isEmpty { active.handle(datagram: toActive.removeFirst(), now: now) }
            }
        }
        for record in records {
            passive.handle(datagram: record, now: now)
            if mode & 2 != 0 { active.handle(datagram: record, now: now) }
            if let first = toPassive.first { passive.handle(datagram: first, now: now); toPassive.removeFirst() }
            if let first = toActive.first { active.handle(datagram: first, now: now); toActive.removeFirst() }
        }
        pump()
        for (side, peer) in [(active, passive), (passive, active)] where side.state == .connected {
            fuzzRequire(side.peerFingerprint == peer.fingerprint, "connected to a certificate that is not the peer's")
        }
        let a = active.takeKeys(), p = passive.takeKeys()
        if let a, let p {
            fuzzRequire(a.send == p.receive && a.receive == p.send && a.suite == p.suite, "the two sides derived different keys")
        }
        fuzzRequire((a == nil) == (active.state != .connected) || active.state == .closed, "active keys and state disagree")
        fuzzRequire((p == nil) == (passive.state != .connected) || passive.state == .closed, "passive keys and state disagree")
    }

    /// The seed inputs of fuzz-dtls: a genuine ClientHello and a genuine first server flight as
    /// stranger datagrams, records with each content type, and injection runs.
    public static func dtlsSeeds() -> [(name: String, bytes: [UInt8])] {
        func records(_ datagrams: [[UInt8]]) -> [UInt8] {
            datagrams.flatMap { [UInt8($0.count >> 8), UInt8($0.count & 0xFF)] + $0 }
        }
        var out: [(String, [UInt8])] = []
        guard let active = try? DTLSTransport(configuration: DTLSTransport.Configuration(role: .active)),
            let passive = try? DTLSTransport(configuration: DTLSTransport.Configuration(role: .passive))
        else { return out }
        var clientFlights: [[UInt8]] = [], serverFlights: [[UInt8]] = []
        active.onDatagram = { clientFlights.append(Array($0)) }
        passive.onDatagram = { serverFlights.append(Array($0)) }
        let now = MonotonicTime(nanoseconds: 1)
        active.start(now: now)
        let hello = clientFlights
        for d in hello { passive.handle(datagram: d, now: now) }
        out.append(("stranger-client-hello", [0] + records(hello)))
        out.append(("stranger-server-flight", [0] + records(serverFlights)))
        let header: (UInt8, [UInt8]) -> [UInt8] = { type, body in
            [type, 0xFE, 0xFD, 0, 0, 0, 0, 0, 0, 0, 1, UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
        }
        out.append(
            (
                "stranger-record-types",
                [0]
                    + records([
                        header(20, [1]), header(21, [2, 40]), header(22, [1, 0, 0, 0]),
                        header(23, [1, 2, 3]), header(24, [1, 0, 0]),
                    ])
            ))
        out.append(("inject-alert", [1] + records([header(21, [2, 42]), header(22, [])])))
        out.append(("inject-both-hello-replay", [3] + records(hello + [header(20, [1])])))
        return out
    }
}
