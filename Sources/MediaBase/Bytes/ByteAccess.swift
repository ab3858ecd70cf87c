// Big-endian accessors shared by the engine's parsers and writers (network byte
// order, RFC 3550 §5.1). Bounds are the caller's job: every call site checks the length first.

extension UnsafeRawBufferPointer {
    @inlinable @inline(__always) package func u8(_ at: Int) -> UInt8 { self[at] }
    @inlinable @inline(__always) package func u16(_ at: Int) -> UInt16 {
        UInt16(self[at]) << 8 | UInt16(self[at + 1])
    }
    @inlinable @inline(__always) package func u24(_ at: Int) -> UInt32 {
        UInt32(self[at]) << 16 | UInt32(self[at + 1]) << 8 | UInt32(self[at + 2])
    }
    @inlinable @inline(__always) package func u32(_ at: Int) -> UInt32 {
        UInt32(bigEndian: loadUnaligned(fromByteOffset: at, as: UInt32.self))
    }
    @inlinable @inline(__always) package func u64(_ at: Int) -> UInt64 {
        UInt64(bigEndian: loadUnaligned(fromByteOffset: at, as: UInt64.self))
    }
    /// A sub-view `[from, from+count)` sharing this buffer's memory (no copy).
    @inlinable @inline(__always) package func view(_ from: Int, _ count: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: self[from..<(from + count)])
    }
}

extension RawSpan {
    // Positional reads for fixed layouts (`SpanReader` reads the same fields in sequence). Each
    // read is bounds-checked by the span itself and traps past its end; `order` is a constant at
    // every call site, so the choice folds away.

    /// The byte at `at`.
    @inlinable @inline(__always) package func u8(_ at: Int) -> UInt8 { unsafe unsafeLoad(fromByteOffset: at, as: UInt8.self) }
    /// The two bytes at `at` as an integer in `order`.
    @inlinable @inline(__always) package func u16(_ at: Int, _ order: ByteOrder = .big) -> UInt16 {
        let raw = unsafe unsafeLoadUnaligned(fromByteOffset: at, as: UInt16.self)
        return order == .big ? UInt16(bigEndian: raw) : UInt16(littleEndian: raw)
    }
    /// The three bytes at `at` as an integer in `order`.
    @inlinable @inline(__always) package func u24(_ at: Int, _ order: ByteOrder = .big) -> UInt32 {
        order == .big
            ? UInt32(u8(at)) << 16 | UInt32(u16(at + 1, .big))
            : UInt32(u16(at, .little)) | UInt32(u8(at + 2)) << 16
    }
    /// The four bytes at `at` as an integer in `order`.
    @inlinable @inline(__always) package func u32(_ at: Int, _ order: ByteOrder = .big) -> UInt32 {
        let raw = unsafe unsafeLoadUnaligned(fromByteOffset: at, as: UInt32.self)
        return order == .big ? UInt32(bigEndian: raw) : UInt32(littleEndian: raw)
    }
    /// The eight bytes at `at` as an integer in `order`.
    @inlinable @inline(__always) package func u64(_ at: Int, _ order: ByteOrder = .big) -> UInt64 {
        let raw = unsafe unsafeLoadUnaligned(fromByteOffset: at, as: UInt64.self)
        return order == .big ? UInt64(bigEndian: raw) : UInt64(littleEndian: raw)
    }
}

extension OutputRawSpan {
    /// Lets a writer that takes a raw buffer fill the free capacity; `write` returns the bytes it
    /// wrote, which become initialized. The writers trap rather than write past the buffer; a
    /// writer that throws leaves the span as it was.
    @inlinable @inline(__always) @discardableResult
    package mutating func appendWriting<E: Error>(_ write: (UnsafeMutableRawBufferPointer) throws(E) -> Int) throws(E) -> Int {
        try withUnsafeMutableBytes { (buffer, initialized) throws(E) in
            let n = try write(UnsafeMutableRawBufferPointer(rebasing: buffer[initialized...]))
            precondition(n <= buffer.count - initialized, "writer reported more bytes than the span's free capacity")
            initialized += n
            return n
        }
    }
}

extension MutableRawSpan {
    /// Lends `input`'s bytes and this span's memory to `body` as raw buffers: how a span form
    /// (`encrypt(_:metadata:into:)`, `RTXPacket.wrap`, ...) calls the raw-buffer form the engine
    /// uses. Cost: none.
    @inlinable @inline(__always)
    package mutating func withRawBuffers<R, E: Error>(
        reading input: RawSpan, _ body: (UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        try input.withUnsafeBytes { (i) throws(E) -> R in
            try withUnsafeMutableBytes { (o) throws(E) -> R in try body(i, o) }
        }
    }
}

extension UnsafeMutableRawBufferPointer {
    @inlinable @inline(__always) package func put8(_ at: Int, _ v: UInt8) { self[at] = v }
    @inlinable @inline(__always) package func put16(_ at: Int, _ v: UInt16) {
        self[at] = UInt8(truncatingIfNeeded: v >> 8); self[at + 1] = UInt8(truncatingIfNeeded: v)
    }
    @inlinable @inline(__always) package func put24(_ at: Int, _ v: UInt32) {
        self[at] = UInt8(truncatingIfNeeded: v >> 16)
        self[at + 1] = UInt8(truncatingIfNeeded: v >> 8)
        self[at + 2] = UInt8(truncatingIfNeeded: v)
    }
    @inlinable @inline(__always) package func put32(_ at: Int, _ v: UInt32) {
        storeBytes(of: v.bigEndian, toByteOffset: at, as: UInt32.self)
    }
    @inlinable @inline(__always) package func put64(_ at: Int, _ v: UInt64) {
        storeBytes(of: v.bigEndian, toByteOffset: at, as: UInt64.self)
    }
    /// Copies `bytes` to offset `at` (the caller checked the room).
    @inlinable @inline(__always) package func copy(_ bytes: UnsafeRawBufferPointer, to at: Int) {
        guard bytes.count > 0 else { return }
        UnsafeMutableRawBufferPointer(rebasing: self[at..<(at + bytes.count)]).copyMemory(from: bytes)
    }
    /// Zeroes `[at, at+count)`.
    @inlinable @inline(__always) package func zero(_ at: Int, _ count: Int) {
        guard count > 0 else { return }
        UnsafeMutableRawBufferPointer(rebasing: self[at..<(at + count)]).initializeMemory(as: UInt8.self, repeating: 0)
    }
    /// A sub-view `[from, end)` sharing this buffer's memory.
    @inlinable @inline(__always) package func tail(_ from: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(rebasing: self[from...])
    }
}
