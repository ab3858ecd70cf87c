// Key material (X25519 secrets, transport keys, SRTP master keys) in its own heap buffer,
// zeroed with sodium_memzero when its last reference goes, so released keys do not linger in
// freed memory the way the buffers of plain byte arrays do.
internal import CMediaShims

/// Secret bytes that are zeroed when released. Immutable after init, so any thread may read it;
/// creating one costs one allocation and a copy.
/// Sendable: `buffer` is a `let`; its bytes change only in init, deinit and `wipe()`, which is meant for a key no
/// other thread still reads.
package final class SecretKeyBytes: @unchecked Sendable, Equatable {
    private let buffer: UnsafeMutableRawBufferPointer

    /// Length in bytes.
    package var count: Int { buffer.count }

    /// Copies `bytes` (the caller's array is not changed; prefer `init(wiping:)`).
    package init(_ bytes: [UInt8]) {
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, bytes.count), alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        bytes.withUnsafeBytes { buffer.copyMemory(from: $0) }
    }

    /// `count` bytes written once by `initialize` (random key material, a key read in place), with
    /// no other copy made. `count` must be at least 1.
    package init(count: Int, initialize: (UnsafeMutableRawBufferPointer) -> Void) {
        precondition(count > 0, "empty key material")
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        initialize(buffer)
    }

    /// Copies `bytes`, then zeroes the caller's array in place.
    package convenience init(wiping bytes: inout [UInt8]) {
        self.init(bytes)
        Sodium.wipe(&bytes)
    }

    /// Reads the bytes in place, without copying them out; the pointer is valid only in `body`.
    package func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(buffer))
    }

    /// A plain copy, for writing the profile and for tests: that copy is not zeroed for you.
    package var exposedCopy: [UInt8] { Array(UnsafeRawBufferPointer(buffer)) }

    /// Zeroes the bytes now (also done when released).
    package func wipe() { sodium_memzero(buffer.baseAddress!, buffer.count) }

    /// Whether every byte is zero (tests of `wipe`).
    package var isZero: Bool { buffer.allSatisfy { $0 == 0 } }

    /// Constant-time equality (`sodium_memcmp`).
    package static func == (a: SecretKeyBytes, b: SecretKeyBytes) -> Bool {
        a.count == b.count && sodium_memcmp(a.buffer.baseAddress!, b.buffer.baseAddress!, a.count) == 0
    }

    deinit {
        wipe()
        buffer.deallocate()
    }
}
