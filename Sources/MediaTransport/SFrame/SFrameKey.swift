internal import CMediaShims

/// One derived SFrame key (RFC 9605 section 4.4.2): `sframe_key` and `sframe_salt` computed from a
/// base key, a KID and a suite with HKDF, and the OpenSSL cipher keyed with `sframe_key`.
///
/// Thread rule: not thread-safe (the OpenSSL context carries per-frame state); `SFrameSender` and
/// `SFrameReceiver` only use it under their lock (hence `@unchecked Sendable`: it moves into their
/// `Mutex`, never shared unlocked). Cost: `init` runs HKDF and allocates the OpenSSL
/// context (microseconds); `seal`/`open` do not allocate and cost one AES pass plus, for the CTR
/// suites, one SHA-256 pass over header, metadata and ciphertext.
/// Sendable: the key bytes are `let`s; the OpenSSL context is used only under the owner's lock (above).
package final class SFrameKey: @unchecked Sendable {
    /// The suite the key was derived for.
    package let suite: SFrameCipherSuite
    /// The KID the key was derived for (part of the HKDF labels).
    package let keyID: UInt64
    /// `sframe_key` (Nk bytes); tests compare it to the RFC vectors.
    package let key: [UInt8]
    /// `sframe_salt` (12 bytes).
    package let salt: [UInt8]
    /// The salt as two numbers (bytes 0-3 and 4-11, big-endian), so a nonce costs one XOR.
    private let saltHigh: UInt32
    private let saltLow: UInt64
    /// The OpenSSL cipher (`cms_sframe_aead`), owned: freed in deinit.
    // Safe: the pointer never changes; the context behind it is used only under the owner's lock (see the type).
    nonisolated(unsafe) private let aead: OpaquePointer

    /// Derives the key for `keyID` from `baseKey` (any non-empty length; throws `.invalidKey` when
    /// empty, `.cryptoFailure` when OpenSSL fails).
    package convenience init(suite: SFrameCipherSuite, keyID: UInt64, baseKey: [UInt8]) throws(SFrameError) {
        guard !baseKey.isEmpty else { throw .invalidKey }
        var key = [UInt8](repeating: 0, count: suite.keyLength)
        var salt = [UInt8](repeating: 0, count: suite.nonceLength)
        guard Self.hkdf(suite, baseKey, Self.label("SFrame 1.0 Secret key ", keyID, suite), into: &key),
            Self.hkdf(suite, baseKey, Self.label("SFrame 1.0 Secret salt ", keyID, suite), into: &salt)
        else { throw .cryptoFailure }
        try self.init(suite: suite, keyID: keyID, derived: (key, salt))
    }

    private init(suite: SFrameCipherSuite, keyID: UInt64, derived: (key: [UInt8], salt: [UInt8])) throws(SFrameError) {
        let (key, salt) = derived
        self.suite = suite
        self.keyID = keyID
        guard let a = key.withUnsafeBufferPointer({ cms_sframe_aead_new(Int32(suite.rawValue), $0.baseAddress, $0.count) })
        else { throw .cryptoFailure }
        aead = a
        self.key = key
        self.salt = salt
        saltHigh = salt[0..<4].reduce(0) { $0 << 8 | UInt32($1) }
        saltLow = salt[4..<12].reduce(0) { $0 << 8 | UInt64($1) }
    }

    deinit { cms_sframe_aead_free(aead) }

    /// The HKDF info: the label text, the KID as 8 big-endian bytes, the suite as 2.
    package static func label(_ text: String, _ keyID: UInt64, _ suite: SFrameCipherSuite) -> [UInt8] {
        var l = Array(text.utf8)
        for i in (0..<8).reversed() { l.append(UInt8(truncatingIfNeeded: keyID >> (8 * UInt64(i)))) }
        l.append(UInt8(suite.rawValue >> 8))
        l.append(UInt8(truncatingIfNeeded: suite.rawValue))
        return l
    }

    /// HKDF (extract with an empty salt, expand `info`) of `ikm` into `out`; false when OpenSSL fails.
    private static func hkdf(_ suite: SFrameCipherSuite, _ ikm: [UInt8], _ info: [UInt8], into out: inout [UInt8]) -> Bool {
        let count = out.count
        return out.withUnsafeMutableBufferPointer { o in
            ikm.withUnsafeBufferPointer { k in
                info.withUnsafeBufferPointer { i in
                    cms_sframe_hkdf(
                        suite.usesSHA512 ? 1 : 0, k.baseAddress, k.count, i.baseAddress, i.count, o.baseAddress, count)
                }
            }
        } == 1
    }

    /// Writes the nonce for `counter` (salt XOR counter, the counter right-aligned) into a 12-byte tuple.
    @inline(__always)
    private func withNonce<R>(_ counter: UInt64, _ body: (UnsafePointer<UInt8>) -> R) -> R {
        // Three 32-bit words: a (UInt32, UInt64) tuple would have 4 bytes of padding in the middle.
        let low = saltLow ^ counter
        var words = (
            saltHigh.bigEndian, UInt32(truncatingIfNeeded: low >> 32).bigEndian, UInt32(truncatingIfNeeded: low).bigEndian
        )
        return withUnsafeBytes(of: &words) { body($0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
    }

    /// Encrypts `input` into `output` (same length; may be the same memory) under the nonce of
    /// `counter`, authenticating `aad1` then `aad2`, and writes the tag to `tag` (Nt bytes).
    /// Returns false when OpenSSL fails.
    package func seal(
        counter: UInt64, aad1: UnsafeRawBufferPointer, aad2: UnsafeRawBufferPointer,
        input: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer, tag: UnsafeMutableRawBufferPointer
    ) -> Bool {
        withNonce(counter) { nonce in
            cms_sframe_aead_seal(
                aead, nonce, aad1.baseAddress?.assumingMemoryBound(to: UInt8.self), aad1.count,
                aad2.baseAddress?.assumingMemoryBound(to: UInt8.self), aad2.count,
                input.baseAddress?.assumingMemoryBound(to: UInt8.self), input.count,
                output.baseAddress?.assumingMemoryBound(to: UInt8.self), tag.baseAddress!.assumingMemoryBound(to: UInt8.self))
        } == 1
    }

    /// Checks `tag` over `aad1`, `aad2` and `input`, then decrypts `input` into `output`. Returns 1
    /// when authentic, 0 when the tag does not match, -1 when OpenSSL fails.
    package func open(
        counter: UInt64, aad1: UnsafeRawBufferPointer, aad2: UnsafeRawBufferPointer,
        input: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer
    ) -> Int32 {
        withNonce(counter) { nonce in
            cms_sframe_aead_open(
                aead, nonce, aad1.baseAddress?.assumingMemoryBound(to: UInt8.self), aad1.count,
                aad2.baseAddress?.assumingMemoryBound(to: UInt8.self), aad2.count,
                input.baseAddress?.assumingMemoryBound(to: UInt8.self), input.count,
                tag.baseAddress!.assumingMemoryBound(to: UInt8.self),
                output.baseAddress?.assumingMemoryBound(to: UInt8.self))
        }
    }
}

extension SFrameKey {
    /// A key from an already derived `sframe_key` and salt (for the AEAD test vectors of RFC 9605
    /// appendix C.2, which start there). Throws `.invalidKey` for wrong lengths.
    package convenience init(suite: SFrameCipherSuite, keyID: UInt64, sframeKey: [UInt8], salt: [UInt8]) throws(SFrameError) {
        guard sframeKey.count == suite.keyLength, salt.count == suite.nonceLength else { throw .invalidKey }
        try self.init(suite: suite, keyID: keyID, derived: (sframeKey, salt))
    }
}
