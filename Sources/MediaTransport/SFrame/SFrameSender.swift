import Synchronization

/// The sending side of SFrame (RFC 9605 section 4.4.3): one current key (KID and base key) and a
/// counter that starts at 0 for each key and goes up by one per frame. Each frame becomes
/// `header || ciphertext || tag`, authenticated together with caller-supplied metadata. The counter
/// never wraps: after `UInt64.max` the sender throws `.counterExhausted` until `setKey` installs a
/// new key (whose counter starts again at 0, which is safe because the nonce only repeats under a
/// different key).
///
/// The media engine uses `encryptFrame(_:clearPrefix:into:)`: the first bytes of an encoded frame
/// stay in the clear in front of the SFrame header and are the metadata, so a forwarding server can
/// read them but not change them (see `SFrameMediaFormat`).
///
/// Thread rule: safe from any thread; every call runs under an internal `Mutex` (one atomic
/// exchange when, as in a send stream, one worker thread encrypts and a controlling thread rarely
/// rotates keys). Cost: `init` and `setKey` derive the key (HKDF, microseconds, allocate);
/// encrypting into a caller buffer allocates nothing and costs one AES pass over the frame (plus
/// one SHA-256 pass for the CTR suites). The array-returning `encrypt` allocates its result.
public final class SFrameSender: Sendable {
    /// Counters of a sender since it was made.
    public struct Statistics: Sendable, Equatable {
        /// Frames encrypted.
        public var framesEncrypted: UInt64 = 0
        /// Bytes added to those frames (headers and tags).
        public var overheadBytes: UInt64 = 0
    }

    /// What the lock guards: the current key, its next counter and the counters of the sender.
    private struct State {
        var key: SFrameKey
        var nextCounter: UInt64
        var exhausted = false
        var statistics = Statistics()
    }

    /// The suite every key of this sender uses.
    public let suite: SFrameCipherSuite
    private let state: Mutex<State>

    /// A sender with key `keyID` derived from `baseKey`, whose first frame uses counter
    /// `initialCounter` (0 normally; the RFC test vectors start elsewhere). Throws `.invalidKey`
    /// for an empty base key, `.cryptoFailure` when OpenSSL fails.
    public init(suite: SFrameCipherSuite, keyID: UInt64, baseKey: [UInt8], initialCounter: UInt64 = 0) throws(SFrameError) {
        self.suite = suite
        let key = try SFrameKey(suite: suite, keyID: keyID, baseKey: baseKey)
        state = Mutex(State(key: key, nextCounter: initialCounter))
    }

    /// Switches to a new key (key rotation): later frames carry `keyID` and count from 0 again.
    public func setKey(keyID: UInt64, baseKey: [UInt8]) throws(SFrameError) {
        let key = try SFrameKey(suite: suite, keyID: keyID, baseKey: baseKey)
        state.withLock {
            $0.key = key
            $0.nextCounter = 0
            $0.exhausted = false
        }
    }

    /// The KID of the current key.
    public var keyID: UInt64 { state.withLock { $0.key.keyID } }

    /// The counter the next frame will carry (nil once exhausted).
    public var nextCounter: UInt64? { state.withLock { $0.exhausted ? nil : $0.nextCounter } }

    /// Counters since the sender was made.
    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// The most bytes `encrypt` writes for `plaintextLength` bytes: the longest header plus the tag.
    public func maxEncryptedLength(plaintextLength: Int) -> Int {
        plaintextLength + SFrameHeader.maxLength + suite.tagLength
    }

    /// Encrypts `plaintext` into `output` as `header || ciphertext || tag` with AAD
    /// `header || metadata` and returns the bytes written. `output` must not overlap the inputs.
    /// Throws `.bufferTooSmall`, `.counterExhausted` or `.cryptoFailure`; a failed call uses no
    /// counter value. No allocation.
    public func encrypt(_ plaintext: RawSpan, metadata: RawSpan, into output: inout MutableRawSpan) throws(SFrameError)
        -> Int
    {
        try metadata.withUnsafeBytes { (m) throws(SFrameError) -> Int in
            try output.withRawBuffers(reading: plaintext) { (p, o) throws(SFrameError) in try encrypt(p, metadata: m, into: o) }
        }
    }

    /// `encrypt(_:metadata:into:)` over raw buffers, for the engine's own callers.
    package func encrypt(
        _ plaintext: UnsafeRawBufferPointer, metadata: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) throws(SFrameError) -> Int {
        try state.withLock { (s: inout State) throws(SFrameError) -> Int in
            guard !s.exhausted else { throw .counterExhausted }
            let header = SFrameHeader(keyID: s.key.keyID, counter: s.nextCounter)
            let headerLength = header.encodedLength
            let total = headerLength + plaintext.count + suite.tagLength
            guard output.count >= total else { throw .bufferTooSmall }
            output.appending { header.encode(into: &$0) }
            let body = UnsafeMutableRawBufferPointer(rebasing: output[headerLength..<(headerLength + plaintext.count)])
            let tag = UnsafeMutableRawBufferPointer(rebasing: output[(headerLength + plaintext.count)..<total])
            guard
                s.key.seal(
                    counter: header.counter, aad1: UnsafeRawBufferPointer(rebasing: output[0..<headerLength]),
                    aad2: metadata, input: plaintext, output: body, tag: tag)
            else { throw .cryptoFailure }
            if s.nextCounter == .max { s.exhausted = true } else { s.nextCounter += 1 }
            s.statistics.framesEncrypted += 1
            s.statistics.overheadBytes += UInt64(headerLength + suite.tagLength)
            return total
        }
    }

    /// Encrypts a media frame whose first `clearPrefix` bytes stay in the clear: writes those bytes,
    /// then the SFrame ciphertext of the rest with the prefix as metadata. Returns the bytes
    /// written (at most `frame.count + SFrameHeader.maxLength + suite.tagLength`). A frame shorter
    /// than `clearPrefix` is refused (`.frameShorterThanClearPrefix`): the receiver would look for
    /// the header inside the tag. No allocation.
    public func encryptFrame(_ frame: RawSpan, clearPrefix: Int, into output: inout MutableRawSpan) throws(SFrameError)
        -> Int
    {
        try output.withRawBuffers(reading: frame) { (f, o) throws(SFrameError) in
            try encryptFrame(f, clearPrefix: clearPrefix, into: o)
        }
    }

    /// `encryptFrame(_:clearPrefix:into:)` over raw buffers, for the engine's own callers.
    package func encryptFrame(
        _ frame: UnsafeRawBufferPointer, clearPrefix: Int, into output: UnsafeMutableRawBufferPointer
    ) throws(SFrameError) -> Int {
        guard clearPrefix <= frame.count else { throw .frameShorterThanClearPrefix }
        let prefix = max(clearPrefix, 0)
        guard output.count >= prefix else { throw .bufferTooSmall }
        if prefix > 0 { output.baseAddress!.copyMemory(from: frame.baseAddress!, byteCount: prefix) }
        let written = try encrypt(
            UnsafeRawBufferPointer(rebasing: frame[prefix...]),
            metadata: UnsafeRawBufferPointer(rebasing: frame[0..<prefix]),
            into: UnsafeMutableRawBufferPointer(rebasing: output[prefix...]))
        return prefix + written
    }

    /// Encrypts an array (allocates the result; for tests and tools).
    public func encrypt(_ plaintext: [UInt8], metadata: [UInt8] = []) throws(SFrameError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: maxEncryptedLength(plaintextLength: plaintext.count))
        let n = try out.withUnsafeMutableBytes { o in
            plaintext.withUnsafeBytes { p in
                metadata.withUnsafeBytes { m in Result { () throws(SFrameError) in try encrypt(p, metadata: m, into: o) } }
            }
        }.get()
        out.removeLast(out.count - n)
        return out
    }
}
