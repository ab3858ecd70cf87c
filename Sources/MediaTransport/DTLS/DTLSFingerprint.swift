/// The SHA-256 fingerprint of a DTLS certificate, as SDP carries it in
/// `a=fingerprint:sha-256 AB:CD:...` (RFC 8122 section 5, RFC 5763 section 5).
///
/// A DTLS-SRTP peer proves its identity only through this value: its certificate is self-signed,
/// and `DTLSTransport` compares the digest of the certificate it was shown with the fingerprint
/// from the remote description before any key is used.
/// Thread rule: an immutable value, freely shared. Cost: parsing and formatting allocate a string
/// or a 32-byte array.
package struct DTLSFingerprint: Hashable, Sendable, CustomStringConvertible {
    /// The 32 digest bytes.
    package let bytes: [UInt8]

    /// A fingerprint from 32 digest bytes; nil for any other length.
    package init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        self.bytes = bytes
    }

    /// Parses the value of an `a=fingerprint` attribute: `sha-256` (any letter case), one space or
    /// more, then 32 two-digit hex bytes separated by colons (either case). Nil for any other hash
    /// function or a malformed digest.
    package init?(sdpValue: String) {
        let parts = sdpValue.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "sha-256" else { return nil }
        let hexBytes = parts[1].split(separator: ":", omittingEmptySubsequences: false)
        guard hexBytes.count == 32 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        for h in hexBytes {
            guard h.utf8.count == 2, let b = UInt8(h, radix: 16) else { return nil }
            bytes.append(b)
        }
        self.bytes = bytes
    }

    /// The attribute value: `sha-256 ` and the digest in upper-case hex pairs joined by colons.
    package var sdpValue: String {
        let digits = Array("0123456789ABCDEF".utf8)
        var out = Array("sha-256 ".utf8)
        out.reserveCapacity(8 + 32 * 3)
        for (i, b) in bytes.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ":")) }
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The SDP attribute value, for logs.
    package var description: String { sdpValue }
}
