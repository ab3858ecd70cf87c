// The one base64 (RFC 4648): the standard and URL-safe alphabets, padded and bare, and the
// canonical reading that links rely on (one spelling per value).
import MediaCore
import Testing

@Suite struct Base64Tests {
    /// RFC 4648 §10's vectors, padded and without padding, both ways.
    @Test func rfcVectorsBothWays() {
        let vectors = [
            ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ]
        for (plain, encoded) in vectors {
            let bytes = Array(plain.utf8)
            #expect(Base64.encode(bytes) == encoded)
            #expect(Base64.encode(bytes, padded: false) == encoded.replacingOccurrences(of: "=", with: ""))
            #expect(Base64.decode(encoded) == bytes)
            #expect(Base64.decode(encoded.replacingOccurrences(of: "=", with: "")) == bytes)
        }
    }

    /// The two alphabets differ in two characters, and each refuses the other's.
    @Test func standardAndURLAlphabets() {
        let bytes: [UInt8] = [0xFB, 0xFF, 0xBF]
        #expect(Base64.encode(bytes) == "+/+/")
        #expect(Base64.encodeURL(bytes) == "-_-_")
        #expect(Base64.decode("+/+/") == bytes && Base64.decodeURL("-_-_") == bytes)
        #expect(Base64.decode("-_-_") == nil && Base64.decodeURL("+/+/") == nil)
    }

    /// Bad lengths, padding in the wrong place or amount, other characters: nil, never a crash.
    /// A canonical reading also refuses padding and nonzero bits past the last byte.
    @Test func malformedTextIsRefused() {
        for bad in ["Z", "Zg=", "Zg===", "Zg==Zg==", "Z=g=", "Zm9v!", "Zm 9v", "====", "Zm9vY"] {
            #expect(Base64.decode(bad) == nil, "\(bad)")
        }
        #expect(Base64.decodeURL("Zg") == [0x66])
        #expect(Base64.decodeURL("Zh") == nil, "the same byte spelled with a nonzero spare bit")
        #expect(Base64.decode("Zh") == [0x66], "the lenient reading ignores spare bits")
        #expect(Base64.decodeURL("Zg==") == nil)
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0...40, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(Base64.decodeURL(Base64.encodeURL(bytes)) == bytes)
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
            let text = String(
                decoding: (0..<Int.random(in: 0...12, using: &generator)).map { _ in UInt8.random(in: 32...126, using: &generator)
                }, as: UTF8.self)
            _ = Base64.decode(text)
            _ = Base64.decodeURL(text)
        }
    }
}
