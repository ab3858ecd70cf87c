import MediaCore

extension FuzzEntries {
    /// SDP parser (RFC 8866 plus the RFC 4566/8285/4568/4585 attributes this engine reads): any text
    /// that parses writes back as text that parses again and writes back identically.
    @Sendable public static func sdp(_ data: UnsafeRawBufferPointer) {
        let text = String(decoding: data, as: UTF8.self)
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
        fuzzRequire(rewritten == written, "SDP text is not stable:\n\(written.debugDescription)\n->\n\(rewritten.debugDescription)")
    }
}
