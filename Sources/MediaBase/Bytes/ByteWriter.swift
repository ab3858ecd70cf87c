// The engine's one byte writer: appends of 1, 2, 3, 4 and 8-byte fields in either byte order,
// on an `OutputRawSpan` (packets written into a caller's buffer: RTP, RTCP, SRTP, SFrame) and on
// a byte array (messages built whole: STUN, container headers, the session wire). Both forms
// have the same names, so a layout reads the same whichever it writes to.

extension OutputRawSpan {
    /// Appends one byte. Traps if the span is full. Cost: a store.
    @inlinable @inline(__always) package mutating func appendU8(_ v: UInt8) { append(v) }

    /// Appends `v` as two bytes in `order`. Traps on too little room. Cost: a store.
    @inlinable @inline(__always) package mutating func appendU16(_ v: UInt16, _ order: ByteOrder = .big) {
        unsafe append(order == .big ? v.bigEndian : v.littleEndian, as: UInt16.self)
    }

    /// Appends the low three bytes of `v` in `order`. Traps on too little room.
    @inlinable @inline(__always) package mutating func appendU24(_ v: UInt32, _ order: ByteOrder = .big) {
        if order == .big {
            append(UInt8(truncatingIfNeeded: v >> 16))
            appendU16(UInt16(truncatingIfNeeded: v), .big)
        } else {
            appendU16(UInt16(truncatingIfNeeded: v), .little)
            append(UInt8(truncatingIfNeeded: v >> 16))
        }
    }

    /// Appends `v` as four bytes in `order`. Traps on too little room. Cost: a store.
    @inlinable @inline(__always) package mutating func appendU32(_ v: UInt32, _ order: ByteOrder = .big) {
        unsafe append(order == .big ? v.bigEndian : v.littleEndian, as: UInt32.self)
    }

    /// Appends `v` as eight bytes in `order`. Traps on too little room. Cost: a store.
    @inlinable @inline(__always) package mutating func appendU64(_ v: UInt64, _ order: ByteOrder = .big) {
        unsafe append(order == .big ? v.bigEndian : v.littleEndian, as: UInt64.self)
    }

    /// Appends `count` zero bytes. Traps on too little room.
    @inlinable @inline(__always) package mutating func appendZeros(_ count: Int) {
        unsafe append(repeating: 0, count: count, as: UInt8.self)
    }

    /// Appends a copy of `bytes`. Traps on too little room. Cost: one copy.
    @inlinable @inline(__always) package mutating func appendBytes(_ bytes: RawSpan) {
        let n = bytes.byteCount
        guard n > 0 else { return }
        withUnsafeMutableBytes { buffer, initialized in
            precondition(n <= buffer.count - initialized, "too little room in the output span")
            unsafe bytes.withUnsafeBytes { src in
                unsafe UnsafeMutableRawBufferPointer(rebasing: buffer[initialized..<(initialized + n)]).copyMemory(from: src)
            }
            initialized += n
        }
    }
}

extension Array where Element == UInt8 {
    /// Appends one byte (named as the span form is). Amortized O(1).
    @inlinable @inline(__always) package mutating func appendU8(_ v: UInt8) { append(v) }

    /// Appends `v` as two bytes in `order`. Amortized O(1).
    @inlinable package mutating func appendU16(_ v: UInt16, _ order: ByteOrder = .big) {
        if order == .big {
            append(UInt8(truncatingIfNeeded: v >> 8)); append(UInt8(truncatingIfNeeded: v))
        } else {
            append(UInt8(truncatingIfNeeded: v)); append(UInt8(truncatingIfNeeded: v >> 8))
        }
    }

    /// Appends the low three bytes of `v` in `order`. Amortized O(1).
    @inlinable package mutating func appendU24(_ v: UInt32, _ order: ByteOrder = .big) {
        if order == .big {
            append(UInt8(truncatingIfNeeded: v >> 16)); appendU16(UInt16(truncatingIfNeeded: v), .big)
        } else {
            appendU16(UInt16(truncatingIfNeeded: v), .little); append(UInt8(truncatingIfNeeded: v >> 16))
        }
    }

    /// Appends `v` as four bytes in `order`. Amortized O(1).
    @inlinable package mutating func appendU32(_ v: UInt32, _ order: ByteOrder = .big) {
        if order == .big {
            appendU16(UInt16(truncatingIfNeeded: v >> 16), .big); appendU16(UInt16(truncatingIfNeeded: v), .big)
        } else {
            appendU16(UInt16(truncatingIfNeeded: v), .little); appendU16(UInt16(truncatingIfNeeded: v >> 16), .little)
        }
    }

    /// Appends `v` as eight bytes in `order`. Amortized O(1).
    @inlinable package mutating func appendU64(_ v: UInt64, _ order: ByteOrder = .big) {
        if order == .big {
            appendU32(UInt32(truncatingIfNeeded: v >> 32), .big); appendU32(UInt32(truncatingIfNeeded: v), .big)
        } else {
            appendU32(UInt32(truncatingIfNeeded: v), .little); appendU32(UInt32(truncatingIfNeeded: v >> 32), .little)
        }
    }
}

extension UnsafeMutableRawBufferPointer {
    /// Lends this buffer to `body` as an empty `OutputRawSpan` and returns the bytes it appended:
    /// how a path that owns raw memory (a socket batch, a pooled packet buffer) calls a span
    /// writer. Cost: none beyond `body`.
    @inlinable @inline(__always) @discardableResult
    package func appending<E: Error>(_ body: (inout OutputRawSpan) throws(E) -> Void) throws(E) -> Int {
        var out = unsafe OutputRawSpan(buffer: self, initializedCount: 0)
        try body(&out)
        return unsafe out.finalize(for: self)
    }
}

extension Array where Element == UInt8 {
    /// Appends what `body` writes into up to `capacity` more bytes, through an `OutputRawSpan`
    /// (how a span writer fills an array). Returns the bytes appended. Cost: at most one
    /// reallocation to make room.
    @inlinable @discardableResult
    package mutating func append<E: Error>(
        capacity: Int, _ body: (inout OutputRawSpan) throws(E) -> Void
    ) throws(E) -> Int {
        let start = count
        var written = 0
        var failure: E?
        append(contentsOf: repeatElement(0, count: capacity))
        withUnsafeMutableBytes { all in
            let free = UnsafeMutableRawBufferPointer(rebasing: all[start...])
            do throws(E) { written = try free.appending(body) } catch { failure = error }
        }
        removeLast(capacity - written)
        if let failure { throw failure }
        return written
    }
}
