import MediaCore

extension FuzzEntries {
    /// A fixed key per suite (public so the seed writer can protect seeds with it): the fuzzer cannot forge tags, so the unprotect paths past
    /// authentication are reached by protecting the input first (modes 2 and 3).
    public static let srtpKeys: [SRTPKeyMaterial] = SRTPSuite.allCases.map { suite in
        try! SRTPKeyMaterial(
            suite: suite, keyAndSalt: (0..<suite.keyAndSaltLength).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) })
    }

    /// One inbound and one outbound context per suite, reused across inputs: creating them costs
    /// about a millisecond. Each input's stream is removed afterwards, so no replay or rollover
    /// state carries over and every input behaves as in a fresh context.
    private static let srtpContexts: [(inbound: SRTPContext, outbound: SRTPContext)] = srtpKeys.map {
        (try! SRTPContext(material: $0, direction: .inbound), try! SRTPContext(material: $0, direction: .outbound))
    }

    /// SRTP/SRTCP unprotect entry (RFC 3711 §3.3-§3.4, RFC 7714): byte 0 picks the suite and
    /// mode; the rest is a datagram. Modes 0/1 unprotect it as SRTP/SRTCP as received; modes 2/3
    /// protect it as RTP/RTCP and unprotect the result, which must give the input back.
    @Sendable public static func srtp(_ data: UnsafeRawBufferPointer) {
        fuzzScratch.withLock { _ in srtpUnlocked(data) }
    }

    private static func srtpUnlocked(_ data: UnsafeRawBufferPointer) {
        guard let selector = data.first else { return }
        let (inbound, outbound) = srtpContexts[Int(selector >> 2) % srtpContexts.count]
        let body = UnsafeRawBufferPointer(rebasing: data[1...])
        let rtcp = selector & 1 == 1
        // The SSRC whose stream this input may create: RTP bytes 8-11, RTCP bytes 4-7.
        let at = rtcp ? 4 : 8
        let ssrc = body.count >= at + 4 ? (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(body[at + $1]) } : nil
        defer {
            if let ssrc {
                try? inbound.removeStream(ssrc: ssrc)
                try? outbound.removeStream(ssrc: ssrc)
            }
        }
        srtpRun(body, rtcp: rtcp, roundTrip: selector & 2 != 0, inbound, outbound)
    }

    private static func srtpRun(
        _ body: UnsafeRawBufferPointer, rtcp: Bool, roundTrip: Bool,
        _ inbound: SRTPContext, _ outbound: SRTPContext
    ) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: body.count + 64, alignment: 16)
        defer { buffer.deallocate() }
        buffer.copyMemory(from: body)
        var span = buffer.mutableBytes
        if !roundTrip {
            let n =
                rtcp
                ? try? inbound.unprotectRTCP(&span, length: body.count)
                : try? inbound.unprotect(&span, length: body.count)
            if let n { fuzzRequire(n >= 0 && n <= body.count, "unprotect returned \(n) for \(body.count) bytes") }
            return
        }
        let protected =
            rtcp
            ? try? outbound.protectRTCP(&span, length: body.count)
            : try? outbound.protect(&span, length: body.count)
        // A fresh stream must protect any RTP packet our parser accepts (a stale stream from an
        // earlier input would fail here with a replay error).
        if !rtcp, protected == nil, (try? RTPPacket(parsing: body.bytes)) != nil {
            fuzzRequire(false, "libsrtp refused to protect a valid \(body.count)-byte RTP packet")
        }
        guard let protected else { return }
        fuzzRequire(protected <= buffer.count, "protect wrote \(protected) bytes into \(buffer.count)")
        let n =
            rtcp
            ? try? inbound.unprotectRTCP(&span, length: protected)
            : try? inbound.unprotect(&span, length: protected)
        fuzzRequire(n == body.count, "unprotect of our own protect gave \(String(describing: n)), expected \(body.count)")
        fuzzRequire(
            UnsafeRawBufferPointer(rebasing: buffer[..<body.count]).elementsEqual(body),
            "SRTP round trip changed the packet")
    }
}
