import CMediaShims
import Foundation
// SRTP stage: SRTPContext.protect/unprotect against the same libsrtp calls in a bare loop.
import MediaCore

enum SRTPBenchSuite {
    /// A bare libsrtp session (the anchor): what SRTPContext wraps, without its lock and checks.
    final class RawSession {
        var session: srtp_t?
        init(_ material: SRTPKeyMaterial, outbound: Bool) {
            var policy = srtp_policy_t()
            switch material.suite {
            case .aeadAES128GCM:
                srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp); srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp)
            default:
                cms_srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtp);
                cms_srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtcp)
            }
            policy.ssrc.type = outbound ? ssrc_any_outbound : ssrc_any_inbound
            policy.window_size = 1024
            var key = material.keyAndSalt
            let status = key.withUnsafeMutableBufferPointer { k -> srtp_err_status_t in
                policy.key = k.baseAddress
                return srtp_create(&session, &policy)
            }
            precondition(status == srtp_err_status_ok, "srtp_create failed: \(status)")
        }
        deinit { if let session { srtp_dealloc(session) } }
    }

    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        let packets = max(1000, Int(100_000 * options.scale))
        for suite in [SRTPSuite.aeadAES128GCM, .aesCM128HMACSHA1_80] {
            for size in [200, 1200] {
                let material = SRTPKeyMaterial.random(for: suite)
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
                defer { buffer.deallocate() }
                buffer.initializeMemory(as: UInt8.self, repeating: 0x5A)
                var header = RTPHeader(payloadType: 96, ssrc: 0x1234_5678)
                let payload = size - RTPHeader.fixedSize - suite.rtpOverhead
                // Protect: a fresh context per repetition (the sequence starts over).
                func protectOurs() throws -> Double {
                    let ctx = try SRTPContext(material: material, direction: .outbound)
                    let t0 = nowNs()
                    for i in 0..<packets {
                        header.sequenceNumber = UInt16(truncatingIfNeeded: i)
                        buffer.appending { header.marshal(into: &$0) }
                        var bufferSpan = buffer.mutableBytes
                        _ = try ctx.protect(&bufferSpan, length: RTPHeader.fixedSize + payload)
                    }
                    return Double(packets) / (Double(nowNs() - t0) / 1e9)
                }
                func protectRaw() -> Double {
                    let raw = RawSession(material, outbound: true)
                    let t0 = nowNs()
                    for i in 0..<packets {
                        header.sequenceNumber = UInt16(truncatingIfNeeded: i)
                        buffer.appending { header.marshal(into: &$0) }
                        var length = Int32(RTPHeader.fixedSize + payload)
                        _ = srtp_protect(raw.session, buffer.baseAddress, &length)
                    }
                    return Double(packets) / (Double(nowNs() - t0) / 1e9)
                }
                try compare(
                    reporter, options, suite: "srtp", case: "protect \(size)B \(suite.rawValue)", metric: "packets/s",
                    unit: "1/s", higherIsBetter: true, anchorName: "srtp_protect loop", ours: protectOurs, anchor: protectRaw)

                // Unprotect: 4096 protected packets replayed into a fresh inbound context each round.
                let distinct = 4096
                let protected = UnsafeMutableRawBufferPointer.allocate(byteCount: distinct * 1500, alignment: 16)
                defer { protected.deallocate() }
                var lengths = [Int](repeating: 0, count: distinct)
                let sender = try SRTPContext(material: material, direction: .outbound)
                for i in 0..<distinct {
                    let slot = UnsafeMutableRawBufferPointer(rebasing: protected[(i * 1500)..<((i + 1) * 1500)])
                    slot.initializeMemory(as: UInt8.self, repeating: 0x5A)
                    header.sequenceNumber = UInt16(i)
                    slot.appending { header.marshal(into: &$0) }
                    var slotSpan = slot.mutableBytes
                    lengths[i] = try sender.protect(&slotSpan, length: RTPHeader.fixedSize + payload)
                }
                let rounds = max(1, packets / distinct)
                func unprotectOurs() throws -> Double {
                    var elapsed: UInt64 = 0
                    for _ in 0..<rounds {
                        let ctx = try SRTPContext(material: material, direction: .inbound)
                        let t0 = nowNs()
                        for i in 0..<distinct {
                            buffer.copyMemory(
                                from: UnsafeRawBufferPointer(rebasing: protected[(i * 1500)..<(i * 1500 + lengths[i])]))
                            var bufferSpan = buffer.mutableBytes
                            _ = try ctx.unprotect(&bufferSpan, length: lengths[i])
                        }
                        elapsed += nowNs() - t0
                    }
                    return Double(rounds * distinct) / (Double(elapsed) / 1e9)
                }
                func unprotectRaw() -> Double {
                    var elapsed: UInt64 = 0
                    for _ in 0..<rounds {
                        let raw = RawSession(material, outbound: false)
                        let t0 = nowNs()
                        for i in 0..<distinct {
                            buffer.copyMemory(
                                from: UnsafeRawBufferPointer(rebasing: protected[(i * 1500)..<(i * 1500 + lengths[i])]))
                            var length = Int32(lengths[i])
                            _ = srtp_unprotect(raw.session, buffer.baseAddress, &length)
                        }
                        elapsed += nowNs() - t0
                    }
                    return Double(rounds * distinct) / (Double(elapsed) / 1e9)
                }
                try compare(
                    reporter, options, suite: "srtp", case: "unprotect \(size)B \(suite.rawValue)", metric: "packets/s",
                    unit: "1/s", higherIsBetter: true, anchorName: "srtp_unprotect loop", ours: unprotectOurs,
                    anchor: unprotectRaw)
            }
        }
    }
}
