import MediaBase

// ChannelData framing (RFC 8656 §12.4, §12.5).

/// The ChannelData message: `[channel number u16][length u16][application data]`, padded to a
/// multiple of 4 bytes over TCP (RFC 8656 §12.5) and optionally over UDP.
/// Thread rule: stateless. Cost: reads four bytes; no allocation.
package enum TURNChannelData {
    /// Channel numbers a client may bind (RFC 8656 §12).
    package static let channelRange: ClosedRange<UInt16> = 0x4000...0x4FFF
    /// Size of the header in front of the data.
    package static let headerSize = 4

    /// True when a datagram or stream frame starting with `first` is ChannelData: RFC 7983 gives
    /// TURN channels the first-byte range 64...79.
    @inline(__always)
    package static func mayBeChannelData(firstByte first: UInt8) -> Bool { first & 0xF0 == 0x40 }

    /// The channel number of a ChannelData message and where its data lies in `bytes` (take it
    /// with `bytes.extracting(data)`); nil when `bytes` is shorter than its header or than the
    /// length it declares, or the channel is out of range. Trailing bytes (padding) are ignored.
    package static func parse(_ bytes: RawSpan) -> (channel: UInt16, data: Range<Int>)? {
        var r = SpanReader(bytes)
        guard let channel = r.u16(), let length = r.u16(), channelRange.contains(channel), r.remaining >= Int(length)
        else { return nil }
        return (channel, headerSize..<(headerSize + Int(length)))
    }

    /// The bytes on a stream a frame starting with this header occupies (header, data, padding).
    package static func paddedSize(dataLength: Int) -> Int { headerSize + (dataLength + 3) & ~3 }

    /// A whole ChannelData message (allocates; for tests and tools, not the hot path).
    package static func encode(channel: UInt16, data: [UInt8], padded: Bool) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(paddedSize(dataLength: data.count))
        out.appendU16(channel)
        out.appendU16(UInt16(truncatingIfNeeded: data.count))
        out += data
        if padded { out += [UInt8](repeating: 0, count: (4 - data.count % 4) % 4) }
        return out
    }
}
