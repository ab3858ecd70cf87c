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

    /// The channel number and the data of a ChannelData message; nil when `bytes` is shorter
    /// than its header or than the length it declares, or the channel is out of range. Trailing
    /// bytes (padding) are ignored. The data is a slice of `bytes`.
    package static func parse(_ bytes: UnsafeRawBufferPointer) -> (channel: UInt16, data: UnsafeRawBufferPointer)? {
        guard bytes.count >= headerSize else { return nil }
        let channel = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        let length = Int(bytes[2]) << 8 | Int(bytes[3])
        guard channelRange.contains(channel), headerSize + length <= bytes.count else { return nil }
        return (channel, UnsafeRawBufferPointer(rebasing: bytes[headerSize..<(headerSize + length)]))
    }

    /// The bytes on a stream a frame starting with this header occupies (header, data, padding).
    package static func paddedSize(dataLength: Int) -> Int { headerSize + (dataLength + 3) & ~3 }

    /// A whole ChannelData message (allocates; for tests and tools, not the hot path).
    package static func encode(channel: UInt16, data: [UInt8], padded: Bool) -> [UInt8] {
        var out: [UInt8] = [UInt8(channel >> 8), UInt8(channel & 0xFF), UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data
        if padded { out += [UInt8](repeating: 0, count: (4 - data.count % 4) % 4) }
        return out
    }
}
