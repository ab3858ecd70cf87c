import MediaCore

extension FuzzEntries {
    /// SDP parser (RFC 8866 plus the RFC 4566/8285/4568/4585 attributes this engine reads): any text
    /// that parses writes back as text that parses again and writes back identically. The same
    /// text then goes through the JSEP reader (RFC 8829) as an offer and as an answer: what parses
    /// writes back as text that parses to the same value, and that text is a fixed point; our
    /// answer to any offer that parses is itself an answer that parses.
    @Sendable public static func sdp(_ data: UnsafeRawBufferPointer) {
        let text = String(decoding: data, as: UTF8.self)
        jsep(text)
        guard let description = try? SDPSessionDescription(parsing: text) else { return }
        for m in description.media {
            for map in m.rtpMaps { _ = m.formatParameters(for: map.payloadType)?.value(for: "useinbandfec") }
            for c in m.crypto { _ = SDPCrypto.keyAndSaltLength(suite: c.suite) }
        }
        let written = description.text
        let again: SDPSessionDescription
        do { again = try SDPSessionDescription(parsing: written) } catch {
            fuzzRequire(false, "written SDP does not parse: \(error)\n\(written)"); return
        }
        // The writer puts lines in RFC 8866 §5 order (the parser keeps input order), so the text,
        // not the value, must be a fixed point: written again, it is the same text.
        let rewritten = again.text
        fuzzRequire(
            rewritten == written, "SDP text is not stable:\n\(written.debugDescription)\n->\n\(rewritten.debugDescription)")
    }

    static let jsepTransport = JSEPTransportParameters(
        ice: JSEPICEParameters(usernameFragment: "fuzz", password: "fuzzfuzzfuzzfuzzfuzzfu"),
        fingerprints: [JSEPFingerprint(bytes: [UInt8](repeating: 0xAB, count: 32))],
        candidates: [JSEPCandidate("candidate:1 1 udp 2130706431 127.0.0.1 9 typ host")!], cname: "fuzz")

    static func jsep(_ text: String) {
        for type in [JSEPType.offer, .answer] {
            guard let d = try? JSEPSessionDescription(parsing: text, type: type) else { continue }
            for s in d.media {
                for c in s.codecs {
                    _ = (c.known, c.associatedPayloadType, c.profileID, c.usesDTX, c.minimumPacketTime)
                }
                _ = s.sendingSSRCs
                for c in s.candidates { _ = c.iceCandidate }
            }
            let written = d.sdp
            let again: JSEPSessionDescription
            do { again = try JSEPSessionDescription(parsing: written, type: type) } catch {
                fuzzRequire(false, "written JSEP \(type) does not parse: \(error)\n\(written)"); return
            }
            fuzzRequire(again == d, "JSEP \(type) changed when written and parsed again:\n\(written.debugDescription)")
            fuzzRequire(again.sdp == written, "JSEP \(type) text is not a fixed point:\n\(written.debugDescription)")
            if type == .offer {
                let tracks = [
                    JSEPTrack(kind: .audio, id: "a", streamID: "s", ssrc: 1),
                    JSEPTrack(kind: .video, id: "v", streamID: "s", ssrc: 2, retransmissionSSRC: 3),
                ]
                let answer = JSEPNegotiator.createAnswer(to: d, tracks: tracks, transport: jsepTransport, sessionID: 1)
                do { _ = try JSEPSessionDescription(parsing: answer.sdp, type: .answer) } catch {
                    fuzzRequire(false, "our answer does not parse: \(error)\n\(answer.sdp)")
                }
                fuzzRequire(
                    answer.media.count == d.media.count, "the answer has \(answer.media.count) sections for \(d.media.count)")
            }
        }
    }
}
