/// Base64 (RFC 4648) in the standard alphabet (§4) or the URL-safe one (§5): the one text form
/// of bytes for SDES inline keys, the WebSocket handshake, TURN credentials and room links.
/// Thread rule: stateless. Cost: one pass; one array and one string of the encoded length.
package enum Base64 {
    /// Which 64 characters: `+` and `/` (standard) or `-` and `_` (URL-safe).
    package enum Alphabet: Sendable {
        case standard, url
    }

    static let standardCharacters = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    static let urlCharacters = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// `bytes` as base64, with `=` padding to a multiple of 4 characters when `padded`.
    package static func encode(_ bytes: RawSpan, alphabet: Alphabet = .standard, padded: Bool = true) -> String {
        let table = alphabet == .standard ? standardCharacters : urlCharacters
        let count = bytes.byteCount
        var out: [UInt8] = []
        out.reserveCapacity((count + 2) / 3 * 4)
        var i = 0
        while i < count {
            let n = min(3, count - i)
            var v = UInt32(bytes.u8(i)) << 16
            if n > 1 { v |= UInt32(bytes.u8(i + 1)) << 8 }
            if n > 2 { v |= UInt32(bytes.u8(i + 2)) }
            for k in 0...n { out.append(table[Int(v >> UInt32(18 - 6 * k) & 63)]) }
            if padded { for _ in n..<3 { out.append(UInt8(ascii: "=")) } }
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `bytes` as base64 (see `encode(_:alphabet:padded:)` on a span).
    package static func encode(_ bytes: [UInt8], alphabet: Alphabet = .standard, padded: Bool = true) -> String {
        encode(bytes.span.bytes, alphabet: alphabet, padded: padded)
    }

    /// The value of one character in `alphabet`, nil for any other.
    package static func value(_ c: UInt8, _ alphabet: Alphabet) -> UInt32? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): UInt32(c - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): UInt32(c - UInt8(ascii: "a") + 26)
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(c - UInt8(ascii: "0") + 52)
        case UInt8(ascii: "+") where alphabet == .standard, UInt8(ascii: "-") where alphabet == .url: 62
        case UInt8(ascii: "/") where alphabet == .standard, UInt8(ascii: "_") where alphabet == .url: 63
        default: nil
        }
    }

    /// The bytes `text` spells, or nil: a character outside the alphabet, an impossible length
    /// (one character past a group of 4), or wrong padding (more than two `=`, anything after
    /// one, or a total that is not a multiple of 4). Padding is optional. `canonical`: no padding,
    /// and the bits past the last byte must be zero, so each value has exactly one spelling.
    package static func decode(_ text: some StringProtocol, alphabet: Alphabet = .standard, canonical: Bool = false)
        -> [UInt8]?
    {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count * 3 / 4)
        var accumulator: UInt32 = 0, bits = 0, characters = 0, padding = 0
        for c in text.utf8 {
            if c == UInt8(ascii: "=") && !canonical {
                padding += 1
                continue
            }
            guard padding == 0, let v = value(c, alphabet) else { return nil }
            characters += 1
            accumulator = accumulator << 6 | v
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
            accumulator &= (1 << UInt32(bits)) - 1
        }
        if characters % 4 == 1 || padding > 2 || (padding > 0 && (characters + padding) % 4 != 0) { return nil }
        if canonical && accumulator != 0 { return nil }
        return out
    }

    /// `bytes` in the URL-safe alphabet without padding (RFC 4648 §5), as links and tokens carry
    /// them.
    package static func encodeURL(_ bytes: [UInt8]) -> String { encode(bytes, alphabet: .url, padded: false) }

    /// The bytes of `text` in the URL-safe alphabet, canonical (no padding, zero bits past the
    /// last byte: each value has one spelling); nil otherwise.
    package static func decodeURL(_ text: some StringProtocol) -> [UInt8]? { decode(text, alphabet: .url, canonical: true) }
}
