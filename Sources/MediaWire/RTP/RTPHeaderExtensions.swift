/// The RFC 8285 header extension elements of one RTP packet, stored inline (no heap allocation).
///
/// RFC 8285 §4.2 (one-byte form, profile 0xBEDE: IDs 1-14, 1-16 data bytes) and §4.3 (two-byte
/// form, profile 0x100X: IDs 1-255, 0-255 data bytes) carry small elements such as the RFC 6464
/// audio level or abs-send-time inside the RFC 3550 §5.3.1 header extension. This value keeps up
/// to `maxElements` elements and `maxDataBytes` data bytes; parsing a larger block throws
/// `RTPError.extensionCapacity`. When marshalling, the one-byte form is used whenever every
/// element fits it, unless `form` asks otherwise.
/// Thread rule: a value type. Cost: about 300 bytes inline; set/get are O(elements).
public struct RTPHeaderExtensions: Sendable, Equatable {
    /// Which RFC 8285 layout an extension block uses.
    public enum Form: Sendable, Equatable {
        /// RFC 8285 §4.2: profile 0xBEDE, one byte of ID (4 bits) and length-1 (4 bits).
        case oneByte
        /// RFC 8285 §4.3: profile 0x100X, one byte ID and one byte length.
        case twoByte
    }

    /// Most elements one block can hold here.
    public static let maxElements = 16
    /// Most data bytes (sum of element lengths) one block can hold here.
    public static let maxDataBytes = 256
    /// RFC 8285 §4.2 "defined by profile" value of the one-byte form.
    public static let oneByteProfile: UInt16 = 0xBEDE
    /// RFC 8285 §4.3 profile of the two-byte form, upper 12 bits (low 4 bits are "appbits").
    public static let twoByteProfile: UInt16 = 0x1000

    /// Forces a layout when marshalling; `nil` picks one-byte when every element fits it.
    /// After parsing it holds the form the packet used.
    public var form: Form?
    /// The 4 "appbits" of a two-byte profile (RFC 8285 §4.3); written only in the two-byte form.
    public var appBits: UInt8 = 0

    private var ids = InlineArray<16, UInt8>(repeating: 0)
    private var lengths = InlineArray<16, UInt8>(repeating: 0)
    private var offsets = InlineArray<16, UInt16>(repeating: 0)
    private var data = InlineArray<256, UInt8>(repeating: 0)
    /// Number of elements held.
    public private(set) var count = 0
    private var dataUsed = 0

    /// An empty set (marshals to nothing).
    public init() {}

    /// True when there is no element (the packet gets no header extension).
    public var isEmpty: Bool { count == 0 }

    /// The element IDs in the order they were added or parsed.
    public var elementIDs: [UInt8] { (0..<count).map { ids[$0] } }

    private func index(of id: UInt8) -> Int? {
        for i in 0..<count where ids[i] == id { return i }
        return nil
    }

    /// Whether an element with this ID is present.
    public func contains(id: UInt8) -> Bool { index(of: id) != nil }

    /// The data length of the element with this ID, or nil.
    public func length(id: UInt8) -> Int? { index(of: id).map { Int(lengths[$0]) } }

    /// Byte `at` of the element `id`'s data, or nil when absent or too short. No allocation.
    public func byte(id: UInt8, at: Int) -> UInt8? {
        guard let i = index(of: id), at >= 0, at < Int(lengths[i]) else { return nil }
        return data[Int(offsets[i]) + at]
    }

    /// A copy of the element's data (allocates; for tests and control paths).
    public func data(id: UInt8) -> [UInt8]? {
        guard let i = index(of: id) else { return nil }
        let o = Int(offsets[i])
        return (0..<Int(lengths[i])).map { data[o + $0] }
    }

    /// Removes the element with this ID, if present. Cost: moves the later elements' data.
    public mutating func remove(id: UInt8) {
        guard let i = index(of: id) else { return }
        let o = Int(offsets[i]), n = Int(lengths[i])
        var k = o
        while k + n < dataUsed { data[k] = data[k + n]; k += 1 }
        dataUsed -= n
        var j = i
        while j + 1 < count {
            ids[j] = ids[j + 1]; lengths[j] = lengths[j + 1]
            offsets[j] = offsets[j + 1] - UInt16(n)
            j += 1
        }
        count -= 1
    }

    /// Reserves `length` data bytes for element `id` (replacing an existing one) and returns the
    /// offset of its data. Traps on invalid IDs or when capacity is exceeded: IDs come from the
    /// caller's configuration, not from the network.
    private mutating func reserve(id: UInt8, length: Int) -> Int {
        precondition(id != 0, "RTP header extension ID 0 is reserved for padding (RFC 8285 §4.2)")
        precondition(length <= 255, "RTP header extension element longer than 255 bytes")
        remove(id: id)
        precondition(
            count < Self.maxElements && dataUsed + length <= Self.maxDataBytes,
            "RTPHeaderExtensions capacity exceeded")
        ids[count] = id; lengths[count] = UInt8(length); offsets[count] = UInt16(dataUsed)
        count += 1
        let o = dataUsed
        dataUsed += length
        return o
    }

    /// Sets element `id` to a copy of `bytes` (replacing an existing one). No allocation.
    public mutating func set(id: UInt8, bytes: RawSpan) {
        let o = reserve(id: id, length: bytes.byteCount)
        for k in 0..<bytes.byteCount { data[o + k] = bytes.u8(k) }
    }

    /// Sets element `id` to the given bytes (convenience for tests and control paths).
    public mutating func set(id: UInt8, _ bytes: [UInt8]) {
        set(id: id, bytes: bytes.span.bytes)
    }

    /// Sets element `id` to the low `length` bytes of `value`, big-endian. No allocation.
    public mutating func set(id: UInt8, bigEndian value: UInt32, length: Int) {
        precondition(length >= 1 && length <= 4)
        let o = reserve(id: id, length: length)
        for k in 0..<length { data[o + k] = UInt8(truncatingIfNeeded: value >> (8 * (length - 1 - k))) }
    }

    /// Reads the element as a big-endian unsigned number if it has exactly `length` bytes.
    public func bigEndianValue(id: UInt8, length: Int) -> UInt32? {
        guard let i = index(of: id), Int(lengths[i]) == length, length <= 4 else { return nil }
        var v: UInt32 = 0
        for k in 0..<length { v = v << 8 | UInt32(data[Int(offsets[i]) + k]) }
        return v
    }

    private var fitsOneByte: Bool {
        for i in 0..<count where ids[i] > 14 || lengths[i] == 0 || lengths[i] > 16 { return false }
        return true
    }

    /// The form `marshal` will write.
    public var effectiveForm: Form {
        if let form { return form }
        return fitsOneByte ? .oneByte : .twoByte
    }

    /// Bytes `marshal(into:)` writes: 0 when empty, else the 4-byte RFC 3550 §5.3.1 extension
    /// header plus the elements padded to a multiple of 4.
    public var marshalSize: Int {
        guard count > 0 else { return 0 }
        let perElement = effectiveForm == .oneByte ? 1 : 2
        let body = dataUsed + perElement * count
        return 4 + (body + 3) & ~3
    }

    /// Appends the extension block (profile, length in words, elements, zero padding) to `out`
    /// and returns its size (`marshalSize`). Traps when `out` has too little free capacity or a
    /// forced one-byte form cannot hold an element. Cost: no allocation.
    @discardableResult
    public func marshal(into out: inout OutputRawSpan) -> Int {
        let size = marshalSize
        guard size > 0 else { return 0 }
        precondition(out.freeCapacity >= size, "buffer too small for RTP header extension")
        let form = effectiveForm
        precondition(form == .twoByte || fitsOneByte, "element does not fit the one-byte form")
        out.appendU16(form == .oneByte ? Self.oneByteProfile : Self.twoByteProfile | UInt16(appBits & 0x0F))
        out.appendU16(UInt16((size - 4) / 4))
        var at = 4
        for i in 0..<count {
            let n = Int(lengths[i])
            if form == .oneByte {
                out.appendU8(ids[i] << 4 | UInt8(n - 1)); at += 1
            } else {
                out.appendU8(ids[i]); out.appendU8(UInt8(n)); at += 2
            }
            let o = Int(offsets[i])
            for k in 0..<n { out.appendU8(data[o + k]) }
            at += n
        }
        out.appendZeros(size - at)
        return size
    }

    /// Parses an RFC 8285 extension block body (the bytes after the 4-byte extension header).
    /// Returns nil for profiles that are not RFC 8285 (the caller keeps the raw bytes).
    /// Throws `badExtensionElement` when an element runs past the block and `extensionCapacity`
    /// when the block holds more than this type stores.
    public init?(profile: UInt16, body: RawSpan) throws(RTPError) {
        if profile == Self.oneByteProfile {
            form = .oneByte
        } else if profile & 0xFFF0 == Self.twoByteProfile {
            form = .twoByte
            appBits = UInt8(profile & 0x0F)
        } else {
            return nil
        }
        var i = 0
        while i < body.byteCount {
            let b = body.u8(i)
            if b == 0 { i += 1; continue }  // padding byte, RFC 8285 §4.2/§4.3
            let id: UInt8, length: Int, start: Int
            if form == .oneByte {
                id = b >> 4
                // RFC 8285 §4.2: ID 15 stops processing of the block. ID 0 is only ever a
                // padding byte (0x00, skipped above); an ID 0 with a length is not a valid element
                // and ends the block too, as libwebrtc does, rather than being read as one.
                if id == 15 || id == 0 { break }
                length = Int(b & 0x0F) + 1
                start = i + 1
            } else {
                guard i + 1 < body.byteCount else {
                    throw RTPError(
                        .badExtensionElement, "two-byte header extension element \(b) at offset \(i) has no length byte")
                }
                id = b
                length = Int(body.u8(i + 1))
                start = i + 2
            }
            guard start + length <= body.byteCount else {
                throw RTPError(
                    .badExtensionElement,
                    "header extension element \(id) of \(length) bytes at offset \(i) runs past the \(body.byteCount)-byte extension block"
                )
            }
            guard count < Self.maxElements, dataUsed + length <= Self.maxDataBytes else {
                throw RTPError(
                    .extensionCapacity,
                    "header extension block holds more than \(Self.maxElements) elements or \(Self.maxDataBytes) bytes")
            }
            if index(of: id) == nil {  // a repeated ID keeps its first value
                ids[count] = id; lengths[count] = UInt8(length); offsets[count] = UInt16(dataUsed)
                for k in 0..<length { data[dataUsed + k] = body.u8(start + k) }
                count += 1
                dataUsed += length
            }
            i = start + length
        }
    }

    /// Equal when both hold the same extensions (same ids and bytes), in any order.
    public static func == (a: Self, b: Self) -> Bool {
        guard a.count == b.count else { return false }
        for i in 0..<a.count {
            guard let j = b.index(of: a.ids[i]), a.lengths[i] == b.lengths[j] else { return false }
            for k in 0..<Int(a.lengths[i]) where a.data[Int(a.offsets[i]) + k] != b.data[Int(b.offsets[j]) + k] {
                return false
            }
        }
        return true
    }
}

extension RTPHeaderExtensions {
    /// Offset of the data of one-byte header extension element `id` (RFC 8285 §4.2) in the RTP
    /// packet `packet`, or nil when absent. Cost: a walk over the extension block; no allocation.
    package static func elementOffset(id: UInt8, in packet: RawSpan) -> Int? {
        let length = packet.byteCount
        guard length >= 12, packet.u8(0) & 0x10 != 0 else { return nil }
        var at = 12 + 4 * Int(packet.u8(0) & 0x0F)
        guard at + 4 <= length, packet.u16(at) == oneByteProfile else { return nil }
        let end = min(length, at + 4 + 4 * Int(packet.u16(at + 2)))
        at += 4
        while at < end {
            let b = packet.u8(at)
            if b == 0 { at += 1; continue }
            let elementID = b >> 4, size = Int(b & 0x0F) + 1
            if elementID == 15 { return nil }
            if elementID == id { return at + 1 + size <= end ? at + 1 : nil }
            at += 1 + size
        }
        return nil
    }
}
