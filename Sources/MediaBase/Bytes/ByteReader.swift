// The engine's one byte reader: a cursor over a `RawSpan` that every parser (RTP, RTCP, STUN,
// the containers, the session wire) reads fields with. Network formats are big-endian (RFC 3550
// §5.1, RFC 8489 §5), the file containers and the session wire little-endian, so each read names
// its byte order, big-endian by default.

/// The byte order of a multi-byte field.
@frozen @usableFromInline package enum ByteOrder: Sendable {
    /// Most significant byte first: network byte order (RTP, RTCP, STUN, SRTP, SFrame).
    case big
    /// Least significant byte first (WAV, IVF, Ogg, Y4M and the session wire).
    case little
}

/// A forward cursor over a `RawSpan`: reads unsigned fields of 1, 2, 3, 4 and 8 bytes in either
/// byte order, skips, and lends sub-spans. Every read checks the bytes left first and returns nil
/// (moving nothing) when too few remain, so a truncated packet is rejected, never read past its
/// end. Non-escapable: it cannot outlive the bytes it reads. A value on one thread; the reads
/// inline to a bounds check and a load, and nothing allocates but `array(_:)`.
@frozen @usableFromInline package struct SpanReader: ~Escapable {
    /// The bytes read from.
    @usableFromInline package let span: RawSpan
    /// Bytes consumed so far: the offset of the next read in `span` (set it to move the cursor;
    /// the next read checks it).
    @usableFromInline package var offset: Int

    /// A reader at the start of `span`.
    @inlinable @inline(__always) @_lifetime(copy span)
    package init(_ span: RawSpan) {
        self.span = span
        self.offset = 0
    }

    /// Bytes not yet read.
    @inlinable @inline(__always) package var remaining: Int { span.byteCount &- offset }

    /// Whether every byte has been read.
    @inlinable @inline(__always) package var isAtEnd: Bool { offset >= span.byteCount }

    /// The bytes not yet read, as a span (the cursor does not move).
    @inlinable @inline(__always) package var rest: RawSpan {
        @_lifetime(copy self) get { span.extracting(droppingFirst: offset) }
    }

    /// The next byte, or nil at the end.
    @inlinable @inline(__always) package mutating func u8() -> UInt8? {
        guard remaining >= 1 else { return nil }
        defer { offset &+= 1 }
        return span.u8(offset)
    }

    /// The next two bytes as an integer in `order`, or nil if fewer remain.
    @inlinable @inline(__always) package mutating func u16(_ order: ByteOrder = .big) -> UInt16? {
        guard remaining >= 2 else { return nil }
        defer { offset &+= 2 }
        return span.u16(offset, order)
    }

    /// The next three bytes as an integer in `order`, or nil if fewer remain.
    @inlinable @inline(__always) package mutating func u24(_ order: ByteOrder = .big) -> UInt32? {
        guard remaining >= 3 else { return nil }
        defer { offset &+= 3 }
        return span.u24(offset, order)
    }

    /// The next four bytes as an integer in `order`, or nil if fewer remain.
    @inlinable @inline(__always) package mutating func u32(_ order: ByteOrder = .big) -> UInt32? {
        guard remaining >= 4 else { return nil }
        defer { offset &+= 4 }
        return span.u32(offset, order)
    }

    /// The next eight bytes as an integer in `order`, or nil if fewer remain.
    @inlinable @inline(__always) package mutating func u64(_ order: ByteOrder = .big) -> UInt64? {
        guard remaining >= 8 else { return nil }
        defer { offset &+= 8 }
        return span.u64(offset, order)
    }

    /// Moves past `count` bytes; false (moving nothing) if fewer remain or `count` is negative.
    @inlinable @inline(__always) @discardableResult
    package mutating func skip(_ count: Int) -> Bool {
        guard count >= 0, remaining >= count else { return false }
        offset &+= count
        return true
    }

    /// The next `count` bytes as a sub-span of the same memory (no copy), moving past them; nil
    /// if fewer remain or `count` is negative.
    @inlinable @inline(__always) @_lifetime(copy self)
    package mutating func take(_ count: Int) -> RawSpan? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset &+= count }
        return span.extracting(offset..<(offset &+ count))
    }

    /// The next `count` bytes copied into an array, moving past them; nil if fewer remain or
    /// `count` is negative. Allocates.
    @inlinable package mutating func array(_ count: Int) -> [UInt8]? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset &+= count }
        return span.array(offset, count)
    }
}

extension RawSpan {
    /// Copies `[from, from+count)` into a new array (the span checks the range). Allocates.
    @inlinable package func array(_ from: Int, _ count: Int) -> [UInt8] {
        let part = extracting(from..<(from + count))
        return unsafe part.withUnsafeBytes { Array($0) }
    }
}
