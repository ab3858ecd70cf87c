import Synchronization

/// The receiving side of SFrame (RFC 9605 section 4.4.4): the keys it may see, by KID (a bounded
/// number, so a peer cannot make it hold keys without end), and for each KID a replay window over
/// the counters it has accepted. A frame is accepted only when its KID is known, its tag checks
/// under that key, and its counter is new for the KID: above every counter seen so far, or within
/// the `replayWindow` counters below the highest and not seen yet (frames may arrive out of
/// order). The window moves only after the tag checks, so forged frames cannot push it.
///
/// Key rotation: add the new KID before the sender switches, remove the old one once its frames
/// have stopped; frames of both decrypt meanwhile.
///
/// Senders bound to streams (`bindsSenders`): when one receiver holds the keys of several
/// senders (every participant of a room behind an SFU), a frame must also be under a KID its
/// stream's sender announced (`bind(ssrc:keyIDs:)`). Without that, a participant could have its
/// frames shown as another's (its own key opens them whatever stream they arrive on), and a
/// server could swap whose media goes on which stream.
///
/// Every rejection is counted in `statistics` by its reason.
/// Thread rule: safe from any thread; every call runs under an internal `Mutex` (uncontended in a
/// receive stream: its worker decrypts, the controlling thread rarely changes keys). Cost:
/// `addKey` derives the key (HKDF, allocates); decrypting into a caller buffer allocates nothing
/// and costs a linear look-up over at most `maxKeys` KIDs and one AES pass (plus a SHA-256 pass
/// for the CTR suites); a rejected frame may allocate for the thrown error. The array-returning
/// `decrypt` allocates its result.
public final class SFrameReceiver: Sendable {
    /// Counters of a receiver since it was made.
    public struct Statistics: Sendable, Equatable {
        /// Frames whose tag checked and whose plaintext was written.
        public var framesDecrypted: UInt64 = 0
        /// Frames whose tag did not check (altered, or another key).
        public var authenticationFailures: UInt64 = 0
        /// Frames whose KID named no key held.
        public var unknownKeys: UInt64 = 0
        /// Frames whose counter was already accepted or older than the window.
        public var replays: UInt64 = 0
        /// Frames too short for their header and tag.
        public var malformed: UInt64 = 0
        /// Frames under a KID their stream's sender did not announce (`bindsSenders` only).
        public var wrongSender: UInt64 = 0

        /// Every rejected frame.
        public var framesRejected: UInt64 { authenticationFailures + unknownKeys + replays + malformed + wrongSender }
    }

    /// One key held and its replay window.
    private struct Entry {
        let key: SFrameKey
        /// The highest counter accepted, nil before the first frame.
        var highest: UInt64?
        /// Bit i set: counter `highest - i` was accepted (bit 0 is `highest` itself).
        var seen: (UInt64, UInt64) = (0, 0)
    }

    /// What the lock guards: the keys and the counters.
    private struct State {
        var entries: [Entry] = []
        var statistics = Statistics()
        /// Each bound stream's SSRC and the KIDs its sender announced (`bindsSenders`).
        var bindings: [(ssrc: UInt32, keyIDs: [UInt64])] = []
    }

    /// How many counters below the highest one a frame may still arrive with.
    public static let replayWindow = 128

    /// The suite every key of this receiver uses.
    public let suite: SFrameCipherSuite
    /// The most keys held at once (`addKey` throws `.tooManyKeys` beyond); also the most streams
    /// bound at once.
    public let maxKeys: Int
    /// Frames are accepted only from bound streams, under a KID bound to their stream (see the
    /// type's comment); a frame given without its SSRC is refused then.
    public let bindsSenders: Bool
    private let state: Mutex<State>

    /// A receiver for `suite` holding at most `maxKeys` keys (at least 1), none yet; with
    /// `bindsSenders`, each frame must come on a stream bound to its KID.
    public init(suite: SFrameCipherSuite, maxKeys: Int = 16, bindsSenders: Bool = false) {
        precondition(maxKeys >= 1, "an SFrame receiver needs room for a key")
        self.suite = suite
        self.maxKeys = maxKeys
        self.bindsSenders = bindsSenders
        var s = State()
        s.entries.reserveCapacity(maxKeys)
        state = Mutex(s)
    }

    /// Adds (or replaces, with a fresh replay window) the key for `keyID`, derived from `baseKey`.
    /// Throws `.tooManyKeys` when `maxKeys` other keys are held, `.invalidKey` for an empty base key.
    public func addKey(keyID: UInt64, baseKey: [UInt8]) throws(SFrameError) {
        let key = try SFrameKey(suite: suite, keyID: keyID, baseKey: baseKey)
        try state.withLock { (s: inout State) throws(SFrameError) in
            if let i = s.entries.firstIndex(where: { $0.key.keyID == keyID }) {
                s.entries[i] = Entry(key: key)
            } else {
                guard s.entries.count < maxKeys else { throw .tooManyKeys }
                s.entries.append(Entry(key: key))
            }
        }
    }

    /// Forgets the key for `keyID` (later frames with it fail with `.unknownKey`). Returns whether
    /// it was held.
    @discardableResult
    public func removeKey(keyID: UInt64) -> Bool {
        state.withLock { s in
            guard let i = s.entries.firstIndex(where: { $0.key.keyID == keyID }) else { return false }
            s.entries.remove(at: i)
            return true
        }
    }

    /// Binds the stream `ssrc` to the KIDs its sender announced, replacing what it was bound to:
    /// from now on its frames decrypt only under those (with `bindsSenders`). Throws
    /// `.tooManyKeys` when `maxKeys` other streams are bound. Thread rule: any thread. Cost: a
    /// linear look-up over the bound streams; allocates the copy of `keyIDs`.
    public func bind(ssrc: UInt32, keyIDs: [UInt64]) throws(SFrameError) {
        try state.withLock { (s: inout State) throws(SFrameError) in
            if let i = s.bindings.firstIndex(where: { $0.ssrc == ssrc }) {
                s.bindings[i].keyIDs = keyIDs
            } else {
                guard s.bindings.count < maxKeys else { throw .tooManyKeys }
                s.bindings.append((ssrc, keyIDs))
            }
        }
    }

    /// Forgets the binding of `ssrc` (its frames are then refused, with `bindsSenders`).
    /// Thread rule: any thread. Cost: a linear look-up over the bound streams.
    public func unbind(ssrc: UInt32) {
        state.withLock { s in s.bindings.removeAll { $0.ssrc == ssrc } }
    }

    /// The bound streams and their KIDs, by SSRC. Thread rule: any thread. Cost: allocates.
    public var bindings: [UInt32: [UInt64]] {
        state.withLock { s in Dictionary(s.bindings.map { ($0.ssrc, $0.keyIDs) }, uniquingKeysWith: { $1 }) }
    }

    /// The KIDs held, in the order they were added.
    public var keyIDs: [UInt64] { state.withLock { s in s.entries.map { $0.key.keyID } } }

    /// Counters since the receiver was made.
    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// Checks and decrypts the SFrame ciphertext `frame` (`header || ciphertext || tag`), with
    /// `metadata` as the rest of the AAD, into `output` (which must not overlap `frame`). Returns
    /// the header and the plaintext length. Throws (and counts) `.malformedHeader`, `.unknownKey`,
    /// `.replay` or `.authenticationFailed`; `.bufferTooSmall` and `.cryptoFailure` are not counted.
    /// No allocation.
    public func decrypt(
        _ frame: RawSpan, metadata: RawSpan, into output: inout MutableRawSpan
    ) throws(SFrameError) -> (header: SFrameHeader, length: Int) {
        try metadata.withUnsafeBytes { (m) throws(SFrameError) in
            try output.withRawBuffers(reading: frame) { (f, o) throws(SFrameError) in try decrypt(f, metadata: m, into: o) }
        }
    }

    /// `decrypt(_:metadata:into:)` over raw buffers, for the engine's own callers.
    package func decrypt(
        _ frame: UnsafeRawBufferPointer, metadata: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) throws(SFrameError) -> (header: SFrameHeader, length: Int) {
        try decrypt(frame, metadata: metadata, into: output, recordingCounter: true)
    }

    /// `decrypt`, optionally without recording the counter as seen (`recordingCounter` false): for a
    /// frame read ahead of its turn, such as an Opus packet whose FEC repairs the one before it and
    /// which is decoded again at its own turn. Nothing is counted in `statistics` then either.
    package func decrypt(
        _ frame: UnsafeRawBufferPointer, metadata: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer,
        recordingCounter: Bool, ssrc: UInt32? = nil
    ) throws(SFrameError) -> (header: SFrameHeader, length: Int) {
        let tagLength = suite.tagLength
        var parsed = SFrameHeader(keyID: 0, counter: 0)
        // The closure returns the length or the error as a value, and throws nothing: a tuple
        // result or a typed throw through the generic `withLock` allocated on every call in
        // unoptimised builds.
        let outcome = state.withLock { (s: inout State) -> Result<Int, SFrameError> in
            var headerLength = 0
            guard let header = SFrameHeader.parse(frame, length: &headerLength) else {
                if recordingCounter { s.statistics.malformed += 1 }
                return .failure(.malformedHeader)
            }
            guard frame.count >= headerLength + tagLength else {
                if recordingCounter { s.statistics.malformed += 1 }
                return .failure(.malformedHeader)
            }
            var found = -1
            for j in 0..<s.entries.count where s.entries[j].key.keyID == header.keyID {
                found = j
                break
            }
            guard found >= 0 else {
                if recordingCounter { s.statistics.unknownKeys += 1 }
                return .failure(.unknownKey)
            }
            let i = found
            if bindsSenders {
                var bound = false
                if let ssrc {
                    for b in s.bindings where b.ssrc == ssrc {
                        bound = b.keyIDs.contains(header.keyID)
                        break
                    }
                }
                guard bound else {
                    if recordingCounter { s.statistics.wrongSender += 1 }
                    return .failure(.wrongSender)
                }
            }
            guard !Self.isReplay(header.counter, s.entries[i]) else {
                if recordingCounter { s.statistics.replays += 1 }
                return .failure(.replay)
            }
            let length = frame.count - headerLength - tagLength
            guard output.count >= length else { return .failure(.bufferTooSmall) }
            let result = s.entries[i].key.open(
                counter: header.counter, aad1: UnsafeRawBufferPointer(rebasing: frame[0..<headerLength]),
                aad2: metadata, input: UnsafeRawBufferPointer(rebasing: frame[headerLength..<(headerLength + length)]),
                tag: UnsafeRawBufferPointer(rebasing: frame[(headerLength + length)...]),
                output: UnsafeMutableRawBufferPointer(rebasing: output[0..<length]))
            if result < 0 { return .failure(.cryptoFailure) }
            if result == 0 {
                if recordingCounter { s.statistics.authenticationFailures += 1 }
                return .failure(.authenticationFailed)
            }
            if recordingCounter { Self.accept(header.counter, &s.entries[i]) }
            if recordingCounter { s.statistics.framesDecrypted += 1 }
            parsed = header
            return .success(length)
        }
        switch outcome {
        case .success(let length): return (parsed, length)
        case .failure(let error): throw error
        }
    }

    /// Decrypts a frame made by `SFrameSender.encryptFrame`: copies the first `clearPrefix` bytes
    /// and decrypts the SFrame ciphertext after them with those bytes as metadata. Returns the
    /// plaintext frame's length (prefix included). Errors as `decrypt`. No allocation.
    public func decryptFrame(_ frame: RawSpan, clearPrefix: Int, into output: inout MutableRawSpan) throws(SFrameError)
        -> Int
    {
        try output.withRawBuffers(reading: frame) { (f, o) throws(SFrameError) in
            try decryptFrame(f, clearPrefix: clearPrefix, into: o)
        }
    }

    /// `decryptFrame(_:clearPrefix:into:)` over raw buffers, for the engine's own callers.
    package func decryptFrame(
        _ frame: UnsafeRawBufferPointer, clearPrefix: Int, into output: UnsafeMutableRawBufferPointer
    ) throws(SFrameError) -> Int {
        try decryptFrame(frame, clearPrefix: clearPrefix, into: output, recordingCounter: true)
    }

    /// `decryptFrame`, optionally without recording the counter (see `decrypt(_:metadata:into:recordingCounter:)`),
    /// for a frame of the stream `ssrc` (checked against its binding with `bindsSenders`).
    package func decryptFrame(
        _ frame: UnsafeRawBufferPointer, clearPrefix: Int, into output: UnsafeMutableRawBufferPointer,
        recordingCounter: Bool, ssrc: UInt32? = nil
    ) throws(SFrameError) -> Int {
        let prefix = min(max(clearPrefix, 0), frame.count)
        guard output.count >= prefix else { throw .bufferTooSmall }
        let (_, length) = try decrypt(
            UnsafeRawBufferPointer(rebasing: frame[prefix...]),
            metadata: UnsafeRawBufferPointer(rebasing: frame[0..<prefix]),
            into: UnsafeMutableRawBufferPointer(rebasing: output[prefix...]), recordingCounter: recordingCounter, ssrc: ssrc)
        if prefix > 0 { output.baseAddress!.copyMemory(from: frame.baseAddress!, byteCount: prefix) }
        return prefix + length
    }

    /// Decrypts an array (allocates the result; for tests and tools).
    public func decrypt(_ frame: [UInt8], metadata: [UInt8] = []) throws(SFrameError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: max(frame.count, 1))
        let n = try out.withUnsafeMutableBytes { o in
            frame.withUnsafeBytes { f in
                metadata.withUnsafeBytes { m in Result { () throws(SFrameError) in try decrypt(f, metadata: m, into: o).length } }
            }
        }.get()
        out.removeLast(out.count - n)
        return out
    }

    /// Whether `counter` was already accepted for the key of `e`, or is older than the window.
    private static func isReplay(_ counter: UInt64, _ e: Entry) -> Bool {
        guard let highest = e.highest else { return false }
        if counter > highest { return false }
        let behind = highest - counter
        if behind >= UInt64(replayWindow) { return true }
        return behind < 64 ? e.seen.0 & (1 << behind) != 0 : e.seen.1 & (1 << (behind - 64)) != 0
    }

    /// Records `counter` as accepted: moves the window up for a new highest counter, or sets its bit.
    private static func accept(_ counter: UInt64, _ e: inout Entry) {
        guard let highest = e.highest, counter <= highest else {
            // A new highest counter: shift the window by the distance moved.
            var shift = UInt64(replayWindow)
            if let h = e.highest { shift = counter - h }
            if shift >= 128 {
                e.seen = (0, 0)
            } else if shift >= 64 {
                e.seen = (0, e.seen.0 << (shift - 64))
            } else if shift > 0 {
                e.seen = (e.seen.0 << shift, e.seen.1 << shift | e.seen.0 >> (64 - shift))
            }
            e.seen.0 |= 1
            e.highest = counter
            return
        }
        let behind = highest - counter
        if behind < 64 { e.seen.0 |= 1 << behind } else { e.seen.1 |= 1 << (behind - 64) }
    }
}
