import Dispatch
import Foundation
import MediaCore
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Protects `packet` in a buffer with exactly the room the suite needs; returns the SRTP bytes.
private func protect(_ context: SRTPContext, _ packet: [UInt8], rtcp: Bool = false) throws -> [UInt8] {
    let room =
        rtcp
        ? context.maxProtectedSize(forRTCP: packet.count)
        : context.maxProtectedSize(for: packet.count)
    var buffer = packet + [UInt8](repeating: 0, count: room - packet.count)
    // Through the public span form: in place, in the array's own storage.
    var span = buffer.mutableSpan
    var bytes = span.mutableBytes
    let length =
        rtcp
        ? try context.protectRTCP(&bytes, length: packet.count)
        : try context.protect(&bytes, length: packet.count)
    return Array(buffer[..<length])
}

/// Unprotects `packet` in place in a copy; returns the RTP/RTCP bytes.
private func unprotect(_ context: SRTPContext, _ packet: [UInt8], rtcp: Bool = false) throws -> [UInt8] {
    var buffer = packet
    var span = buffer.mutableSpan
    var bytes = span.mutableBytes
    let length =
        rtcp
        ? try context.unprotectRTCP(&bytes, length: packet.count)
        : try context.unprotect(&bytes, length: packet.count)
    return Array(buffer[..<length])
}

/// The error `body` throws, as an `SRTPError` (nil if it does not throw or throws something else).
private func srtpError(_ body: () throws -> Void) -> SRTPError? {
    do { try body() } catch let error as SRTPError { return error } catch { return nil }
    return nil
}

/// An RTP packet: version 2, payload type 96, the given sequence number and SSRC, and a payload
/// derived from both so every packet is distinct.
private func rtpPacket(sequence: UInt16, ssrc: UInt32, payloadLength: Int = 160) -> [UInt8] {
    var p: [UInt8] = [
        0x80, 96, UInt8(sequence >> 8), UInt8(sequence & 0xff),
        0, 0, UInt8(sequence >> 8), UInt8(sequence & 0xff),
        UInt8(ssrc >> 24), UInt8(ssrc >> 16 & 0xff), UInt8(ssrc >> 8 & 0xff), UInt8(ssrc & 0xff),
    ]
    for i in 0..<payloadLength { p.append(UInt8(truncatingIfNeeded: i &* 7 &+ Int(sequence) &+ Int(ssrc))) }
    return p
}

/// An RTCP receiver report (PT 201) with one report block, from `ssrc`.
private func rtcpPacket(ssrc: UInt32, fill: UInt8 = 0x5a) -> [UInt8] {
    var p: [UInt8] = [
        0x81, 201, 0x00, 0x07,
        UInt8(ssrc >> 24), UInt8(ssrc >> 16 & 0xff), UInt8(ssrc >> 8 & 0xff), UInt8(ssrc & 0xff),
    ]
    p += [UInt8](repeating: fill, count: 24)
    return p
}

@Suite struct SRTPContextTests {
    // MARK: Known answers (libsrtp test/srtp_driver.c)

    @Test(arguments: [nil, [UInt32(0xcafebabe)]] as [[UInt32]?])
    func aesCM128HMACSHA1_80MatchesLibsrtpReferenceVectors(ssrcs: [UInt32]?) throws {
        let key = try SRTPKeyMaterial(suite: .aesCM128HMACSHA1_80, keyAndSalt: LibsrtpVectors.aesCMKeyAndSalt)
        let sender = try SRTPContext(material: key, direction: .outbound, ssrcs: ssrcs)
        #expect(try protect(sender, LibsrtpVectors.rtpPlaintext) == LibsrtpVectors.aesCMSRTP)
        #expect(try protect(sender, LibsrtpVectors.rtcpPlaintext, rtcp: true) == LibsrtpVectors.aesCMSRTCP)

        let receiver = try SRTPContext(material: key, direction: .inbound, ssrcs: ssrcs)
        #expect(try unprotect(receiver, LibsrtpVectors.aesCMSRTP) == LibsrtpVectors.rtpPlaintext)
        #expect(try unprotect(receiver, LibsrtpVectors.aesCMSRTCP, rtcp: true) == LibsrtpVectors.rtcpPlaintext)
    }

    @Test(arguments: [nil, [UInt32(0xcafebabe)]] as [[UInt32]?])
    func aeadAES128GCMMatchesLibsrtpReferenceVectors(ssrcs: [UInt32]?) throws {
        let key = try SRTPKeyMaterial(suite: .aeadAES128GCM, keyAndSalt: LibsrtpVectors.gcmKeyAndSalt)
        let sender = try SRTPContext(material: key, direction: .outbound, ssrcs: ssrcs)
        #expect(try protect(sender, LibsrtpVectors.rtpPlaintext) == LibsrtpVectors.gcmSRTP)
        #expect(try protect(sender, LibsrtpVectors.rtcpPlaintext, rtcp: true) == LibsrtpVectors.gcmSRTCP)

        let receiver = try SRTPContext(material: key, direction: .inbound, ssrcs: ssrcs)
        #expect(try unprotect(receiver, LibsrtpVectors.gcmSRTP) == LibsrtpVectors.rtpPlaintext)
        #expect(try unprotect(receiver, LibsrtpVectors.gcmSRTCP, rtcp: true) == LibsrtpVectors.rtcpPlaintext)
    }

    // MARK: Round trips and sizes

    @Test(arguments: SRTPSuite.allCases)
    func roundTripsRTPAndRTCPWithTheSuiteOverhead(suite: SRTPSuite) throws {
        let key = SRTPKeyMaterial.random(for: suite)
        let sender = try SRTPContext(material: key, direction: .outbound)
        let receiver = try SRTPContext(material: key, direction: .inbound)
        for sequence in UInt16(100)..<120 {
            let packet = rtpPacket(sequence: sequence, ssrc: 0x1234_5678, payloadLength: Int(sequence) * 3)
            let protected = try protect(sender, packet)
            #expect(protected.count == packet.count + suite.rtpOverhead)
            #expect(protected[..<12] == packet[..<12], "the RTP header stays in the clear")
            #expect(protected[12..<packet.count] != packet[12...], "the payload is encrypted")
            #expect(try unprotect(receiver, protected) == packet)
        }
        for round in 0..<5 {
            let packet = rtcpPacket(ssrc: 0x1234_5678, fill: UInt8(round))
            let protected = try protect(sender, packet, rtcp: true)
            #expect(protected.count == packet.count + suite.rtcpOverhead)
            #expect(try unprotect(receiver, protected, rtcp: true) == packet)
        }
    }

    @Test func suiteSizesFollowTheRFCs() {
        #expect(SRTPSuite.aesCM128HMACSHA1_80.rtpOverhead == 10)
        #expect(SRTPSuite.aesCM128HMACSHA1_32.rtpOverhead == 4)
        // RFC 5764 4.1.2: SRTCP keeps the 80-bit tag with the _32 suite; plus E flag and index.
        #expect(SRTPSuite.aesCM128HMACSHA1_32.rtcpOverhead == 14)
        #expect(SRTPSuite.aesCM128HMACSHA1_80.rtcpOverhead == 14)
        #expect(SRTPSuite.aeadAES128GCM.rtpOverhead == 16)
        #expect(SRTPSuite.aeadAES256GCM.rtcpOverhead == 20)
        #expect(SRTPSuite.aeadAES128GCM.keyAndSaltLength == 28)
        #expect(SRTPSuite.aeadAES256GCM.keyAndSaltLength == 44)
        #expect(SRTPSuite.aesCM128HMACSHA1_80.keyAndSaltLength == 30)
        #expect(SRTPContext.overhead(.aesCM128HMACSHA1_32) == 4)
        #expect(SRTPContext.rtcpOverhead(.aeadAES128GCM) == 20)
        #expect(SRTPSuite.default == .aeadAES128GCM)
    }

    @Test func suiteNamesParseAndPrint() {
        for suite in SRTPSuite.allCases {
            #expect(SRTPSuite(sdpName: suite.sdpName) == suite)
            #expect("\(suite)" == suite.sdpName)
        }
        #expect(SRTPSuite(sdpName: "AEAD_AES_128_GCM") == .aeadAES128GCM)
        #expect(SRTPSuite(sdpName: "AEAD_AES_256_GCM") == .aeadAES256GCM)
        #expect(SRTPSuite(sdpName: "AES_CM_128_HMAC_SHA1_80") == .aesCM128HMACSHA1_80)
        #expect(SRTPSuite(sdpName: "AES_CM_128_HMAC_SHA1_32") == .aesCM128HMACSHA1_32)
        #expect(SRTPSuite(sdpName: "aes_cm_128_hmac_sha1_80") == nil)
        #expect(SRTPSuite(sdpName: "F8_128_HMAC_SHA1_80") == nil)
    }

    // MARK: Tampering

    @Test(arguments: SRTPSuite.allCases)
    func everyFlippedBitOfAnRTPPacketFailsAuthentication(suite: SRTPSuite) throws {
        let key = SRTPKeyMaterial.random(for: suite)
        let sender = try SRTPContext(material: key, direction: .outbound)
        let receiver = try SRTPContext(material: key, direction: .inbound)
        let packet = rtpPacket(sequence: 7, ssrc: 0xdead_beef, payloadLength: 40)
        let protected = try protect(sender, packet)
        for bit in 0..<(protected.count * 8) {
            var tampered = protected
            tampered[bit / 8] ^= UInt8(1 << (bit % 8))
            let error = srtpError { _ = try unprotect(receiver, tampered) }
            // Flipping the CSRC count or extension bit makes the header claim more bytes than the
            // authenticated data; libsrtp then rejects it as malformed before checking the tag.
            let structural = bit / 8 == 0 && (bit % 8 < 4 || bit % 8 == 4)
            if structural {
                #expect(error == .authFail || error == .badParam, "bit \(bit): \(String(describing: error))")
            } else {
                #expect(error == .authFail, "bit \(bit): \(String(describing: error))")
            }
        }
        // Failed packets leave no trace: the genuine packet still verifies afterwards.
        #expect(try unprotect(receiver, protected) == packet)
    }

    @Test(arguments: SRTPSuite.allCases)
    func everyFlippedBitOfAnRTCPPacketFailsAuthentication(suite: SRTPSuite) throws {
        let key = SRTPKeyMaterial.random(for: suite)
        let sender = try SRTPContext(material: key, direction: .outbound)
        let receiver = try SRTPContext(material: key, direction: .inbound)
        let packet = rtcpPacket(ssrc: 0x0bad_cafe)
        let protected = try protect(sender, packet, rtcp: true)
        for bit in 0..<(protected.count * 8) {
            var tampered = protected
            tampered[bit / 8] ^= UInt8(1 << (bit % 8))
            let error = srtpError { _ = try unprotect(receiver, tampered, rtcp: true) }
            // Clearing the E flag (RFC 3711 3.4) claims the packet is unencrypted; an AES-CM
            // policy that requires encryption refuses it before the tag check (cant_check).
            let eFlag = bit == packet.count * 8 + 7
            if eFlag && suite != .aeadAES128GCM && suite != .aeadAES256GCM {
                #expect(error == .cantCheck, "E flag: \(String(describing: error))")
            } else {
                #expect(error == .authFail, "bit \(bit): \(String(describing: error))")
            }
        }
        #expect(try unprotect(receiver, protected, rtcp: true) == packet)
    }

    @Test func packetFromAnotherKeyFailsAuthentication() throws {
        let sender = try SRTPContext(material: .random(), direction: .outbound)
        let receiver = try SRTPContext(material: .random(), direction: .inbound)
        let protected = try protect(sender, rtpPacket(sequence: 1, ssrc: 42))
        #expect(srtpError { _ = try unprotect(receiver, protected) } == .authFail)
    }

    // MARK: Replay

    @Test(arguments: SRTPSuite.allCases)
    func replayedRTPPacketIsRejected(suite: SRTPSuite) throws {
        let key = SRTPKeyMaterial.random(for: suite)
        let sender = try SRTPContext(material: key, direction: .outbound)
        let receiver = try SRTPContext(material: key, direction: .inbound)
        let first = try protect(sender, rtpPacket(sequence: 1000, ssrc: 9))
        let second = try protect(sender, rtpPacket(sequence: 1001, ssrc: 9))
        _ = try unprotect(receiver, first)
        _ = try unprotect(receiver, second)
        #expect(srtpError { _ = try unprotect(receiver, first) } == .replayFail)
        #expect(srtpError { _ = try unprotect(receiver, second) } == .replayFail)
    }

    @Test func packetOlderThanTheReplayWindowIsReplayOld() throws {
        let key = SRTPKeyMaterial.random()
        var options = SRTPContext.Options()
        options.replayWindowSize = 64
        let sender = try SRTPContext(material: key, direction: .outbound, options: options)
        let receiver = try SRTPContext(material: key, direction: .inbound, options: options)
        let first = try protect(sender, rtpPacket(sequence: 9, ssrc: 5))
        let late = try protect(sender, rtpPacket(sequence: 10, ssrc: 5))
        let inWindow = try protect(sender, rtpPacket(sequence: 150, ssrc: 5))
        let newest = try protect(sender, rtpPacket(sequence: 200, ssrc: 5))
        _ = try unprotect(receiver, first)
        _ = try unprotect(receiver, newest)
        #expect(srtpError { _ = try unprotect(receiver, late) } == .replayOld)
        // Reordered but inside the window: accepted once.
        _ = try unprotect(receiver, inWindow)
        #expect(srtpError { _ = try unprotect(receiver, inWindow) } == .replayFail)
    }

    @Test func replayedRTCPPacketIsRejected() throws {
        let key = SRTPKeyMaterial.random(for: .aesCM128HMACSHA1_80)
        let sender = try SRTPContext(material: key, direction: .outbound)
        let receiver = try SRTPContext(material: key, direction: .inbound)
        let protected = try protect(sender, rtcpPacket(ssrc: 77), rtcp: true)
        _ = try unprotect(receiver, protected, rtcp: true)
        #expect(srtpError { _ = try unprotect(receiver, protected, rtcp: true) } == .replayFail)
    }

    @Test func senderRefusesToReuseAnIndexUnlessRepeatsAreAllowed() throws {
        let key = SRTPKeyMaterial.random()
        let packet = rtpPacket(sequence: 3, ssrc: 3)
        let strict = try SRTPContext(material: key, direction: .outbound)
        _ = try protect(strict, packet)
        #expect(srtpError { _ = try protect(strict, packet) } == .replayFail)

        var options = SRTPContext.Options()
        options.allowRepeatTransmission = true
        let lenient = try SRTPContext(material: key, direction: .outbound, options: options)
        let once = try protect(lenient, packet)
        let again = try protect(lenient, packet)
        #expect(once == again, "a retransmission protects to the same bytes")
    }

    // MARK: Bad parameters

    @Test func bufferWithoutRoomForTheTagThrows() throws {
        let key = SRTPKeyMaterial.random(for: .aesCM128HMACSHA1_80)
        let sender = try SRTPContext(material: key, direction: .outbound)
        let packet = rtpPacket(sequence: 1, ssrc: 1)
        var short = packet + [UInt8](repeating: 0, count: 9)
        let rtpError = srtpError {
            _ = try short.withUnsafeMutableBytes {
                var span = $0.mutableBytes
                return try sender.protect(&span, length: packet.count)
            }
        }
        #expect(rtpError == .bufferTooSmall)
        #expect(short[..<packet.count] == packet[...], "nothing was written")

        let report = rtcpPacket(ssrc: 1)
        var shortRTCP = report + [UInt8](repeating: 0, count: 13)
        let rtcpError = srtpError {
            _ = try shortRTCP.withUnsafeMutableBytes {
                var span = $0.mutableBytes
                return try sender.protectRTCP(&span, length: report.count)
            }
        }
        #expect(rtcpError == .bufferTooSmall)
        // Exactly enough room works.
        #expect(try protect(sender, packet).count == packet.count + 10)
    }

    @Test(arguments: SRTPSuite.allCases, [false, true])
    func protectWritesNothingPastTheRoomItAsksFor(suite: SRTPSuite, withMKI: Bool) throws {
        // libsrtp's header warns it may write up to SRTP_MAX_TRAILER_LEN past the packet; check
        // that with these suites it writes only the overhead we reserve, by watching guard bytes.
        var key = SRTPKeyMaterial.random(for: suite)
        if withMKI {
            guard suite != .aesCM128HMACSHA1_32 else { return }
            key.mki = .init(value: 9, length: 3)
        }
        let sender = try SRTPContext(material: key, direction: .outbound)
        let guardLength = 160
        for rtcp in [false, true] {
            for payload in [0, 1, 3, 17, 160, 1100] {
                let packet =
                    rtcp
                    ? rtcpPacket(ssrc: 0x6a6a) + [UInt8](repeating: 1, count: payload & ~3)
                    : rtpPacket(sequence: UInt16(payload), ssrc: 0x6a6a, payloadLength: payload)
                let room =
                    rtcp
                    ? sender.maxProtectedSize(forRTCP: packet.count)
                    : sender.maxProtectedSize(for: packet.count)
                var memory = packet + [UInt8](repeating: 0, count: room - packet.count)
                memory += [UInt8](repeating: 0xee, count: guardLength)
                let length = try memory.withUnsafeMutableBytes { raw in
                    var exact = UnsafeMutableRawBufferPointer(rebasing: raw[..<room]).mutableBytes
                    return rtcp
                        ? try sender.protectRTCP(&exact, length: packet.count)
                        : try sender.protect(&exact, length: packet.count)
                }
                #expect(length == room)
                #expect(memory[room...].allSatisfy { $0 == 0xee }, "\(suite) rtcp \(rtcp) payload \(payload)")
            }
        }
    }

    @Test func truncatedPacketIsABadParameter() throws {
        let receiver = try SRTPContext(material: .random(), direction: .inbound)
        let tooShort: [UInt8] = [0x80, 96, 0, 1, 0, 0]
        #expect(srtpError { _ = try unprotect(receiver, tooShort) } == .badParam)
        #expect(srtpError { _ = try unprotect(receiver, []) } == .badParam)
        #expect(srtpError { _ = try unprotect(receiver, [0x81, 200, 0, 1], rtcp: true) } == .badParam)
    }

    @Test func replayWindowOutOfRangeIsABadParameter() {
        var options = SRTPContext.Options()
        options.replayWindowSize = 10
        #expect(throws: SRTPError.badParam) {
            _ = try SRTPContext(material: .random(), direction: .inbound, options: options)
        }
        options.replayWindowSize = 0x8000
        #expect(throws: SRTPError.badParam) {
            _ = try SRTPContext(material: .random(), direction: .inbound, options: options)
        }
    }

    @Test(arguments: SRTPSuite.allCases)
    func mkiIsCarriedInEveryPacketAndChecked(suite: SRTPSuite) throws {
        var key = SRTPKeyMaterial.random(for: suite)
        key.mki = .init(value: 0x0102, length: 4)
        if suite == .aesCM128HMACSHA1_32 {
            // libsrtp 2.5 finds the MKI with the RTP tag length (4) even in SRTCP (tag 10), so this
            // combination is refused up front rather than failing on every RTCP packet.
            #expect(throws: SRTPError.badParam) { _ = try SRTPContext(material: key, direction: .outbound) }
            return
        }
        let sender = try SRTPContext(material: key, direction: .outbound)
        let receiver = try SRTPContext(material: key, direction: .inbound)
        #expect(sender.rtpOverhead == suite.rtpOverhead + 4)
        #expect(sender.rtcpOverhead == suite.rtcpOverhead + 4)
        let aead = suite == .aeadAES128GCM || suite == .aeadAES256GCM
        let mkiBytes: [UInt8] = [0, 0, 1, 2]

        let packet = rtpPacket(sequence: 1, ssrc: 0x4d4b49)
        let protected = try protect(sender, packet)
        #expect(protected.count == packet.count + suite.rtpTagLength + 4)
        // RFC 3711 3.1: MKI before the tag; RFC 7714 (AEAD): the tag is part of the ciphertext,
        // the MKI follows it.
        let rtpMKIAt = aead ? packet.count + suite.rtpTagLength : packet.count
        #expect(Array(protected[rtpMKIAt..<rtpMKIAt + 4]) == mkiBytes)
        #expect(try unprotect(receiver, protected) == packet)

        let report = rtcpPacket(ssrc: 0x4d4b49)
        let protectedReport = try protect(sender, report, rtcp: true)
        #expect(protectedReport.count == report.count + suite.rtcpOverhead + 4)
        // The MKI follows the E flag and SRTCP index word.
        let rtcpMKIAt = aead ? report.count + suite.rtcpTagLength + 4 : report.count + 4
        #expect(Array(protectedReport[rtcpMKIAt..<rtcpMKIAt + 4]) == mkiBytes)
        #expect(try unprotect(receiver, protectedReport, rtcp: true) == report)

        // Same key bytes under another MKI: the packet names a key the receiver does not have.
        var otherMKI = key
        otherMKI.mki = .init(value: 0x0103, length: 4)
        let stranger = try SRTPContext(material: otherMKI, direction: .inbound)
        #expect(srtpError { _ = try unprotect(stranger, protected) } == .badMKI)
    }

    @Test func errorsDescribeThemselves() {
        #expect(SRTPError.authFail.description.contains("authentication"))
        #expect(SRTPError.replayOld.description.contains("replay"))
        #expect(SRTPError(rawValue: 7) == .authFail)
        #expect(SRTPError(rawValue: 999).description == "SRTP error 999")
    }

    // MARK: Streams

    @Test func specificSSRCContextAcceptsOnlyItsStreams() throws {
        let key = SRTPKeyMaterial.random()
        let sender = try SRTPContext(material: key, direction: .outbound)
        let receiver = try SRTPContext(material: key, direction: .inbound, ssrcs: [0xaaaa])
        let known = try protect(sender, rtpPacket(sequence: 1, ssrc: 0xaaaa))
        let unknown = try protect(sender, rtpPacket(sequence: 1, ssrc: 0xbbbb))
        _ = try unprotect(receiver, known)
        #expect(srtpError { _ = try unprotect(receiver, unknown) } == .noSuchSSRC)

        try receiver.addStream(ssrc: 0xbbbb)
        #expect(try unprotect(receiver, unknown) == rtpPacket(sequence: 1, ssrc: 0xbbbb))
        #expect(throws: SRTPError.badParam) { try receiver.addStream(ssrc: 0xbbbb) }

        try receiver.removeStream(ssrc: 0xbbbb)
        let next = try protect(sender, rtpPacket(sequence: 2, ssrc: 0xbbbb))
        #expect(srtpError { _ = try unprotect(receiver, next) } == .noSuchSSRC)
        #expect(throws: SRTPError.noSuchSSRC) { try receiver.removeStream(ssrc: 0xcccc) }
    }

    @Test func rolloverCounterAdvancesWhenTheSequenceWraps() throws {
        let key = SRTPKeyMaterial.random()
        let sender = try SRTPContext(material: key, direction: .outbound)
        let receiver = try SRTPContext(material: key, direction: .inbound)
        #expect(throws: SRTPError.self) { _ = try sender.rolloverCounter(ssrc: 0x77) }
        for sequence: UInt16 in [65533, 65534, 65535, 0, 1] {
            let packet = rtpPacket(sequence: sequence, ssrc: 0x77)
            #expect(try unprotect(receiver, try protect(sender, packet)) == packet)
        }
        #expect(try sender.rolloverCounter(ssrc: 0x77) == 1)
        #expect(try receiver.rolloverCounter(ssrc: 0x77) == 1)

        // A receiver that joins late is told the ROC and can then decrypt.
        let late = try SRTPContext(material: key, direction: .inbound, ssrcs: [0x77])
        try late.setRolloverCounter(1, ssrc: 0x77)
        let packet = rtpPacket(sequence: 2, ssrc: 0x77)
        #expect(try unprotect(late, try protect(sender, packet)) == packet)
    }

    // MARK: Threads

    @Test func senderAndReceiverOnDifferentThreadsInteroperate() throws {
        let key = SRTPKeyMaterial.random()
        let sender = try SRTPContext(material: key, direction: .outbound)
        let receiver = try SRTPContext(material: key, direction: .inbound)
        let count = 5000
        let received = Mutex((ok: 0, failed: 0))
        let receiveQueue = DispatchQueue(label: "srtp-test-receiver")
        let done = DispatchGroup()
        done.enter()
        let senderThread = Thread {
            for i in 0..<count {
                let packet = rtpPacket(
                    sequence: UInt16(truncatingIfNeeded: 40000 + i), ssrc: 0x5151,
                    payloadLength: 20 + i % 1000)
                guard let protected = try? protect(sender, packet) else {
                    received.withLock { $0.failed += 1 }
                    continue
                }
                receiveQueue.async {
                    let ok = (try? unprotect(receiver, protected)) == packet
                    received.withLock { if ok { $0.ok += 1 } else { $0.failed += 1 } }
                }
            }
            receiveQueue.async { done.leave() }
        }
        senderThread.start()
        #expect(done.wait(timeout: .now() + 60) == .success)
        let result = received.withLock { $0 }
        #expect(result.ok == count)
        #expect(result.failed == 0)
    }

    @Test func oneContextIsSafeToShareBetweenThreads() throws {
        let key = SRTPKeyMaterial.random(for: .aesCM128HMACSHA1_80)
        let sender = try SRTPContext(material: key, direction: .outbound)
        let receiver = try SRTPContext(material: key, direction: .inbound)
        let threads = 4
        let perThread = 500
        let failures = Atomic<Int>(0)
        // Four threads protect their own SSRCs on one context, then unprotect on another.
        DispatchQueue.concurrentPerform(iterations: threads) { t in
            let ssrc = UInt32(0x1000 + t)
            for i in 0..<perThread {
                let packet = rtpPacket(sequence: UInt16(i), ssrc: ssrc, payloadLength: 100 + t)
                if (try? protect(sender, packet)).flatMap({ try? unprotect(receiver, $0) }) != packet {
                    failures.add(1, ordering: .relaxed)
                }
            }
        }
        #expect(failures.load(ordering: .relaxed) == 0)
        for t in 0..<threads {
            #expect(try sender.rolloverCounter(ssrc: UInt32(0x1000 + t)) == 0)
        }
    }
}

// MARK: - Interop with ffmpeg's independent SRTP implementation (libavformat/srtp.c)

#if canImport(Glibc)
    /// A UDP socket on 127.0.0.1 with an ephemeral port, for receiving what ffmpeg sends.
    private final class LoopbackUDPReceiver {
        let fd: Int32
        let port: UInt16

        init() throws {
            let socketFD = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            guard socketFD >= 0 else { throw POSIXError(.EIO) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(socketFD, $0, length) == 0 && getsockname(socketFD, $0, &length) == 0
                }
            }
            guard bound else { close(socketFD); throw POSIXError(.EADDRNOTAVAIL) }
            var bufferSize: Int32 = 1 << 20
            setsockopt(socketFD, SOL_SOCKET, SO_RCVBUF, &bufferSize, socklen_t(MemoryLayout<Int32>.size))
            var timeout = timeval(tv_sec: 0, tv_usec: 300_000)
            setsockopt(socketFD, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            fd = socketFD
            port = UInt16(bigEndian: address.sin_port)
        }

        /// Every datagram queued until the socket stays quiet for the receive timeout.
        func drain() -> [[UInt8]] {
            var datagrams: [[UInt8]] = []
            var buffer = [UInt8](repeating: 0, count: 2048)
            while true {
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n <= 0 { return datagrams }
                datagrams.append(Array(buffer[..<n]))
            }
        }

        deinit { close(fd) }
    }

    /// Runs ffmpeg to completion with `arguments`; returns its standard output.
    private func runFFmpeg(_ arguments: [String]) throws -> [UInt8] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        process.arguments = ["-hide_banner", "-nostdin", "-loglevel", "error"] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "ffmpeg \(arguments.joined(separator: " "))")
        return [UInt8](data)
    }

    @Suite struct SRTPFFmpegInteropTests {
        /// ffmpeg's name for each suite: for the 32-bit tag the RFC 5764 name, with which ffmpeg keeps
        /// the 80-bit SRTCP tag (its SDES name uses a 32-bit SRTCP tag).
        @Test(arguments: [
            (SRTPSuite.aesCM128HMACSHA1_80, "AES_CM_128_HMAC_SHA1_80"),
            (SRTPSuite.aesCM128HMACSHA1_32, "SRTP_AES128_CM_HMAC_SHA1_32"),
        ])
        func packetsFromFFmpegVerifyAndReprotectToTheSameBytes(suite: SRTPSuite, ffmpegSuite: String) throws {
            let key = SRTPKeyMaterial.random(for: suite)
            let receiver = try LoopbackUDPReceiver()
            let source = ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=8000:duration=1", "-c:a", "pcm_mulaw"]
            // ffmpeg's -srtp_out_params is the RFC 4568 key-salt: our inline form without "inline:".
            let params = String(key.inlineKeyParams.dropFirst("inline:".count))
            _ = try runFFmpeg(
                source + [
                    "-f", "rtp", "-srtp_out_suite", ffmpegSuite, "-srtp_out_params", params,
                    "srtp://127.0.0.1:\(receiver.port)?rtcpport=\(receiver.port)",
                ])
            let reference = try runFFmpeg(source + ["-f", "mulaw", "-"])
            let datagrams = receiver.drain()
            #expect(reference.count == 8000)

            let inbound = try SRTPContext(material: key, direction: .inbound)
            let outbound = try SRTPContext(material: key, direction: .outbound)
            var payload: [UInt8] = []
            var rtcpCount = 0
            for srtp in datagrams {
                // RFC 5761 section 4: RTCP packet types 200-204 in the second byte.
                let isRTCP = (200...204).contains(srtp[1])
                let plain = try unprotect(inbound, srtp, rtcp: isRTCP)
                if isRTCP {
                    rtcpCount += 1
                    #expect(plain[1] == 200, "a sender report")
                    // ffmpeg numbers SRTCP packets from 0, libsrtp from 1 (both allowed by RFC 3711
                    // section 3.4), so the ciphertexts differ; ours still verifies with the same key.
                    let ours = try protect(outbound, plain, rtcp: true)
                    #expect(ours.count == srtp.count && ours[..<8] == srtp[..<8])
                    let check = try SRTPContext(material: key, direction: .inbound)
                    #expect(try unprotect(check, ours, rtcp: true) == plain)
                } else {
                    #expect(plain[1] & 0x7f == 0, "PCMU")
                    payload += plain[12...]
                    #expect(try protect(outbound, plain) == srtp, "our SRTP bytes equal ffmpeg's")
                }
            }
            #expect(rtcpCount >= 1)
            #expect(payload == reference, "decrypted audio equals ffmpeg's own PCMU encoding")
        }
    }
#endif
