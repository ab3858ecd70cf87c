import MediaCore

extension FuzzEntries {
    /// A fixed key per suite (public so the seed writer can protect seeds with it): the fuzzer cannot forge tags, so the unprotect paths past
    /// authentication are reached by protecting the input first (modes 2 and 3).
    public static let srtpKeys: [SRTPKeyMaterial] = SRTPSuite.allCases.map { suite in
        try! SRTPKeyMaterial(suite: suite, keyAndSalt: (0..<suite.keyAndSaltLength).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) })
    }

    /// SRTP/SRTCP unprotect entry (RFC 3711 §3.3-§3.4, RFC 7714): byte 0 picks the suite and
    /// mode; the rest is a datagram. Modes 0/1 unprotect it as SRTP/SRTCP as received; modes 2/3
    /// protect it as RTP/RTCP and unprotect the result, which must give the input back.
    @Sendable public static func srtp(_ data: UnsafeRawBufferPointer) {
        guard let selector = data.first else { return }
        let key = srtpKeys[Int(selector >> 2) % srtpKeys.count]
        let body = UnsafeRawBufferPointer(rebasing: data[1...])
        guard let inbound = try? SRTPContext(material: key, direction: .inbound) else {
            fuzzRequire(false, "SRTP inbound context for \(key.suite) failed"); return
        }
        let rtcp = selector & 1 == 1
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: body.count + 64, alignment: 16)
        defer { buffer.deallocate() }
        buffer.copyMemory(from: body)
        if selector & 2 == 0 {
            let n = rtcp ? try? inbound.unprotectRTCP(buffer, length: body.count)
                         : try? inbound.unprotect(buffer, length: body.count)
            if let n { fuzzRequire(n >= 0 && n <= body.count, "unprotect returned \(n) for \(body.count) bytes") }
            return
        }
        guard let outbound = try? SRTPContext(material: key, direction: .outbound) else {
            fuzzRequire(false, "SRTP outbound context for \(key.suite) failed"); return
        }
        let protected = rtcp ? try? outbound.protectRTCP(buffer, length: body.count)
                             : try? outbound.protect(buffer, length: body.count)
        guard let protected else { return }
        fuzzRequire(protected <= buffer.count, "protect wrote \(protected) bytes into \(buffer.count)")
        let n = rtcp ? try? inbound.unprotectRTCP(buffer, length: protected)
                     : try? inbound.unprotect(buffer, length: protected)
        fuzzRequire(n == body.count, "unprotect of our own protect gave \(String(describing: n)), expected \(body.count)")
        fuzzRequire(UnsafeRawBufferPointer(rebasing: buffer[..<body.count]).elementsEqual(body),
                    "SRTP round trip changed the packet")
    }
}
