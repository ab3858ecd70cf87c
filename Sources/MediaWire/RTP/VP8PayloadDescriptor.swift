/// The VP8 payload descriptor at the start of every VP8 RTP payload (RFC 7741 §4.2).
///
/// ```
///   |X|R|N|S|R| PID |   X: extension byte follows; N: non-reference frame;
///   |I|L|T|K| RSV   |   S: start of a VP8 partition; PID: partition index
///   |M| PictureID   |   I: PictureID present (M: 15-bit form)
///   |   PictureID   |
///   |   TL0PICIDX   |   L: present
///   |TID|Y| KEYIDX  |   T or K: present
/// ```
/// Thread rule: a value type. Cost: parse and marshal touch at most 6 bytes.
public struct VP8PayloadDescriptor: Sendable, Equatable {
    /// RFC 7741 §4.2 "N": the frame can be discarded without affecting later frames.
    public var nonReference = false
    /// RFC 7741 §4.2 "S": this packet starts a VP8 partition.
    public var startOfPartition = false
    /// RFC 7741 §4.2 "PID": partition index, 0...7.
    public var partitionIndex: UInt8 = 0
    /// RFC 7741 §4.2 "PictureID" (I bit): 7 bits, or 15 bits when `longPictureID` (M bit).
    public var pictureID: UInt16?
    /// RFC 7741 §4.2 "M": the PictureID is 15 bits long.
    public var longPictureID = true
    /// RFC 7741 §4.2 "TL0PICIDX" (L bit): running index of temporal base layer frames.
    public var tl0PicIdx: UInt8?
    /// RFC 7741 §4.2 "TID" (T bit): temporal layer index, 0...3.
    public var temporalLayerID: UInt8?
    /// RFC 7741 §4.2 "Y": layer sync, the frame depends only on the base layer (meaningful with TID).
    public var layerSync = false
    /// RFC 7741 §4.2 "KEYIDX" (K bit): running index of key frames, 0...31.
    public var keyIndex: UInt8?

    /// Makes a descriptor.
    public init(
        nonReference: Bool = false, startOfPartition: Bool = false, partitionIndex: UInt8 = 0,
        pictureID: UInt16? = nil, longPictureID: Bool = true, tl0PicIdx: UInt8? = nil,
        temporalLayerID: UInt8? = nil, layerSync: Bool = false, keyIndex: UInt8? = nil
    ) {
        self.nonReference = nonReference
        self.startOfPartition = startOfPartition
        self.partitionIndex = partitionIndex
        self.pictureID = pictureID
        self.longPictureID = longPictureID
        self.tl0PicIdx = tl0PicIdx
        self.temporalLayerID = temporalLayerID
        self.layerSync = layerSync
        self.keyIndex = keyIndex
    }

    /// RFC 7741 §4.2: a packet starts a frame when S=1 and PID=0.
    public var startsFrame: Bool { startOfPartition && partitionIndex == 0 }

    private var hasExtension: Bool {
        pictureID != nil || tl0PicIdx != nil || temporalLayerID != nil || keyIndex != nil
    }

    /// Bytes `marshal(into:)` writes (1 to 6).
    public var marshalSize: Int {
        guard hasExtension else { return 1 }
        var n = 2
        if pictureID != nil { n += longPictureID ? 2 : 1 }
        if tl0PicIdx != nil { n += 1 }
        if temporalLayerID != nil || keyIndex != nil { n += 1 }
        return n
    }

    /// Appends the descriptor to `out` and returns its size (`marshalSize`); traps when `out` has
    /// too little free capacity. Cost: no allocation.
    @discardableResult
    public func marshal(into out: inout OutputRawSpan) -> Int {
        let size = marshalSize
        precondition(out.freeCapacity >= size, "buffer too small for VP8 payload descriptor")
        precondition(partitionIndex < 8, "VP8 partition index \(partitionIndex) exceeds 3 bits")
        out.appendU8((hasExtension ? 0x80 : 0) | (nonReference ? 0x20 : 0) | (startOfPartition ? 0x10 : 0) | partitionIndex)
        guard hasExtension else { return 1 }
        let t = temporalLayerID != nil, k = keyIndex != nil
        out.appendU8((pictureID != nil ? 0x80 : 0) | (tl0PicIdx != nil ? 0x40 : 0) | (t ? 0x20 : 0) | (k ? 0x10 : 0))
        if let pid = pictureID {
            if longPictureID { out.appendU16(0x8000 | (pid & 0x7FFF)) } else { out.appendU8(UInt8(pid & 0x7F)) }
        }
        if let l = tl0PicIdx { out.appendU8(l) }
        if t || k { out.appendU8(((temporalLayerID ?? 0) & 3) << 6 | (layerSync ? 0x20 : 0) | ((keyIndex ?? 0) & 0x1F)) }
        return size
    }

    /// Parses the descriptor at the start of `payload`; returns it and its size.
    /// Throws `emptyPayload` for an empty payload and `truncated` when the flags announce more
    /// bytes than the payload has (RFC 7741 §4.2). A descriptor with no VP8 data after it is
    /// `truncated` too (RFC 7741 §4.1: every packet carries payload).
    public static func parse(_ p: RawSpan) throws(RTPError) -> (VP8PayloadDescriptor, Int) {
        guard p.byteCount > 0 else { throw RTPError(.emptyPayload, "VP8 RTP payload is empty") }
        var d = VP8PayloadDescriptor()
        let b0 = p.u8(0)
        d.nonReference = b0 & 0x20 != 0
        d.startOfPartition = b0 & 0x10 != 0
        d.partitionIndex = b0 & 0x07
        var at = 1
        if b0 & 0x80 != 0 {
            guard p.byteCount > at else {
                throw RTPError(.truncated, "VP8 payload descriptor has X set but ends after 1 byte (RFC 7741 §4.2)")
            }
            let x = p.u8(1)
            at = 2
            if x & 0x80 != 0 {
                guard p.byteCount > at else { throw RTPError(.truncated, "VP8 payload descriptor ends before its PictureID") }
                if p.u8(at) & 0x80 != 0 {
                    guard p.byteCount > at + 1 else {
                        throw RTPError(.truncated, "VP8 payload descriptor ends inside its 15-bit PictureID")
                    }
                    d.pictureID = p.u16(at) & 0x7FFF
                    d.longPictureID = true
                    at += 2
                } else {
                    d.pictureID = UInt16(p.u8(at))
                    d.longPictureID = false
                    at += 1
                }
            }
            if x & 0x40 != 0 {
                guard p.byteCount > at else { throw RTPError(.truncated, "VP8 payload descriptor ends before its TL0PICIDX") }
                d.tl0PicIdx = p.u8(at); at += 1
            }
            if x & 0x30 != 0 {
                guard p.byteCount > at else {
                    throw RTPError(.truncated, "VP8 payload descriptor ends before its TID/KEYIDX byte")
                }
                let tk = p.u8(at); at += 1
                if x & 0x20 != 0 { d.temporalLayerID = tk >> 6; d.layerSync = tk & 0x20 != 0 }
                if x & 0x10 != 0 { d.keyIndex = tk & 0x1F }
            }
        }
        guard p.byteCount > at else {
            throw RTPError(.truncated, "VP8 RTP payload of \(p.byteCount) bytes holds only its \(at)-byte descriptor")
        }
        return (d, at)
    }
}

/// The VP8 payload header at the start of a frame's first partition (RFC 7741 §4.3), plus the
/// key frame's dimensions from the uncompressed data chunk (RFC 6386 §9.1).
/// Thread rule: a value type. Cost: reads at most 10 bytes.
public struct VP8PayloadHeader: Sendable, Equatable {
    /// RFC 7741 §4.3 "P" inverted: P=0 means key frame.
    public var isKeyframe: Bool
    /// RFC 7741 §4.3 "VER": the VP8 version (profile) 0...3.
    public var version: UInt8
    /// RFC 7741 §4.3 "H": the frame is meant to be shown.
    public var showFrame: Bool
    /// RFC 7741 §4.3 Size0..2: first partition size in bytes.
    public var firstPartitionSize: Int
    /// Key frames only (RFC 6386 §9.1): width in pixels (14 bits).
    public var width: Int?
    /// Key frames only (RFC 6386 §9.1): height in pixels (14 bits).
    public var height: Int?

    /// Parses the header from the first bytes of a frame (after the payload descriptor of its
    /// first packet). Throws `truncated` when fewer than 3 bytes (10 for a key frame) are given
    /// and `badPayloadDescriptor` when a key frame lacks the start code 9d 01 2a.
    public init(parsing p: RawSpan) throws(RTPError) {
        guard p.byteCount >= 3 else {
            throw RTPError(.truncated, "VP8 payload header needs 3 bytes, got \(p.byteCount) (RFC 7741 §4.3)")
        }
        let b0 = p.u8(0)
        isKeyframe = b0 & 0x01 == 0
        version = (b0 >> 1) & 0x07
        showFrame = b0 & 0x10 != 0
        firstPartitionSize = Int(b0 >> 5) | Int(p.u8(1)) << 3 | Int(p.u8(2)) << 11
        width = nil
        height = nil
        if isKeyframe {
            guard p.byteCount >= 10 else {
                throw RTPError(.truncated, "VP8 key frame header needs 10 bytes, got \(p.byteCount) (RFC 6386 §9.1)")
            }
            guard p.u8(3) == 0x9D, p.u8(4) == 0x01, p.u8(5) == 0x2A else {
                throw RTPError(.badPayloadDescriptor, "VP8 key frame lacks the start code 9d 01 2a (RFC 6386 §9.1)")
            }
            width = (Int(p.u8(6)) | Int(p.u8(7)) << 8) & 0x3FFF
            height = (Int(p.u8(8)) | Int(p.u8(9)) << 8) & 0x3FFF
        }
    }
}
