internal import CMediaShims

/// libsodium's status from its one `sodium_init()` call. A global `let` is initialised lazily and
/// exactly once, thread-safely, by the Swift runtime; sodium_init itself is also idempotent.
/// The one `sodium_init()` of the process (`Sodium.ready` reads it too).
let sodiumInitStatus: Int32 = sodium_init()

/// Cryptographically secure random bytes from libsodium (`randombytes_buf`, backed by the kernel's
/// `getrandom`): SRTP master keys, session keys, RTP SSRCs and initial sequence numbers.
///
/// Thread rule: every member may be called from any thread at once. Cost: a `getrandom`-backed
/// ChaCha20 stream, well under a microsecond for a few bytes; `bytes(_:)` allocates its array.
public enum RandomBytes {
    /// Makes sure libsodium is initialised; traps if it cannot be (no entropy source), since
    /// nothing secure can run after that.
    @inline(__always)
    package static func ensureInitialized() {
        precondition(sodiumInitStatus >= 0, "sodium_init failed: no secure random source")
    }

    /// Fills `buffer` with random bytes. Does not allocate.
    package static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        ensureInitialized()
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        randombytes_buf(base, buffer.count)
    }

    /// Fills every element of `bytes` with random bytes. Does not allocate.
    public static func fill(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { fill($0) }
    }

    /// A new array of `count` random bytes.
    public static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0, "RandomBytes.bytes: negative count \(count)")
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            fill(UnsafeMutableRawBufferPointer(buffer))
            initialized = count
        }
    }

    /// A uniformly random 32-bit value (`randombytes_random`).
    public static func uint32() -> UInt32 {
        ensureInitialized()
        return randombytes_random()
    }

    /// A uniformly random 64-bit value.
    public static func uint64() -> UInt64 {
        var value: UInt64 = 0
        withUnsafeMutableBytes(of: &value) { fill($0) }
        return value
    }

    /// A uniformly random value in `0..<upperBound` without modulo bias (`randombytes_uniform`).
    /// `upperBound` must be at least 1.
    public static func uniform(_ upperBound: UInt32) -> UInt32 {
        precondition(upperBound > 0, "RandomBytes.uniform: upper bound must be positive")
        ensureInitialized()
        return randombytes_uniform(upperBound)
    }

    /// A random RTP SSRC (RFC 3550 section 8.1: chosen at random).
    public static func ssrc() -> UInt32 { uint32() }

    /// A random initial RTP sequence number in the lower half of the 16-bit space
    /// (RFC 3550 section 5.1 asks for a random start; the lower half leaves SRTP's rollover
    /// estimate of RFC 3711 section 3.3.1 room to start safely, as pion does).
    public static func initialSequenceNumber() -> UInt16 { UInt16(uniform(1 << 15)) }
}

/// A `RandomNumberGenerator` drawing from libsodium, for `Int.random(in:using:)`,
/// `shuffled(using:)` and friends where the values must be unpredictable.
/// Thread rule: a stateless value; use one per call site. Cost: one `randombytes_buf` per value.
public struct SecureRandomNumberGenerator: RandomNumberGenerator, Sendable {
    /// Creates a generator; all share libsodium's process-wide source.
    public init() {}

    /// The next random 64-bit value.
    public mutating func next() -> UInt64 { RandomBytes.uint64() }
}

extension RandomBytes {
    /// Fills `bytes` with random bytes from the system's secure source. Does not allocate.
    public static func fill(_ bytes: inout MutableRawSpan) {
        bytes.withUnsafeMutableBytes { fill($0) }
    }
}
