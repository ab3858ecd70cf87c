/// The VP9 payload descriptor at the start of every VP9 RTP payload (RFC 9628 §4.2), in flexible
/// (F=1) and non-flexible (F=0) mode, with the scalability structure (§4.2.1).
///
/// ```
///      |I|P|L|F|B|E|V|Z|   I: PictureID; P: inter-picture predicted; L: layer indices;
///  I:  |M| PICTURE ID  |   F: flexible mode; B: start of frame; E: end of frame;
///  M:  | EXTENDED PID  |   V: scalability structure present; Z: not a reference for
///  L:  | TID |U| SID |D|      upper spatial layers
///      |   TL0PICIDX   |   (non-flexible mode only)
/// P,F: | P_DIFF      |N|   up to 3 times
///  V:  | SS ...        |
/// ```
/// Thread rule: a value type. Cost: parse and marshal touch the descriptor bytes only.
public struct VP9PayloadDescriptor: Sendable, Equatable {
    /// RFC 9628 §4.2 "P": the frame references an earlier picture (not a key frame when false
    /// on spatial layer 0).
    public var interPicturePredicted = false
    /// RFC 9628 §4.2 "F": flexible mode (references given as P_DIFF).
    public var flexibleMode = true
    /// RFC 9628 §4.2 "B": first packet of a layer frame.
    public var startOfFrame = false
    /// RFC 9628 §4.2 "E": last packet of a layer frame.
    public var endOfFrame = false
    /// RFC 9628 §4.2 "Z": not used as reference by upper spatial layers.
    public var notReferenceForUpperSpatial = false
    /// RFC 9628 §4.2 "PICTURE ID" (I bit): 7 bits, or 15 bits when `longPictureID` (M bit).
    public var pictureID: UInt16?
    /// RFC 9628 §4.2 "M": 15-bit PictureID.
    public var longPictureID = true
    /// RFC 9628 §4.2 layer indices (L bit).
    public var layer: Layer?
    /// RFC 9628 §4.2 "TL0PICIDX" (non-flexible mode with L only).
    public var tl0PicIdx: UInt8?
    // RFC 9628 §4.2 P_DIFF list (flexible mode with P only), at most 3 entries, each 1...127.
    private var referenceDiffs: InlineArray<3, UInt8> = .init(repeating: 0)
    /// Number of P_DIFF entries (RFC 9628 §4.2), 0...3.
    public private(set) var referenceCount = 0

    /// P_DIFF entry `i` (RFC 9628 §4.2): the referenced picture's PictureID is this much smaller.
    public func referenceDiff(at i: Int) -> UInt8 {
        precondition(i < referenceCount)
        return referenceDiffs[i]
    }

    /// Replaces the P_DIFF list (at most 3 entries, each 1...127). No allocation for literals
    /// of up to 3 elements beyond the array itself.
    public mutating func setReferences(_ diffs: [UInt8]) {
        precondition(diffs.count <= 3 && diffs.allSatisfy { $0 > 0 && $0 < 128 }, "bad VP9 P_DIFF list")
        for (i, d) in diffs.enumerated() { referenceDiffs[i] = d }
        referenceCount = diffs.count
    }

    /// Sets a single P_DIFF entry list of one element (no allocation).
    public mutating func setReference(_ diff: UInt8) {
        precondition(diff > 0 && diff < 128, "bad VP9 P_DIFF")
        referenceDiffs[0] = diff
        referenceCount = 1
    }

    /// Appends one P_DIFF entry (at most 3 in all; no allocation).
    public mutating func addReference(_ diff: UInt8) {
        precondition(diff > 0 && diff < 128 && referenceCount < 3, "bad VP9 P_DIFF")
        referenceDiffs[referenceCount] = diff
        referenceCount += 1
    }

    /// Equal when every field the descriptor carries is equal.
    public static func == (a: Self, b: Self) -> Bool {
        a.interPicturePredicted == b.interPicturePredicted && a.flexibleMode == b.flexibleMode
            && a.startOfFrame == b.startOfFrame && a.endOfFrame == b.endOfFrame
            && a.notReferenceForUpperSpatial == b.notReferenceForUpperSpatial
            && a.pictureID == b.pictureID && (a.pictureID == nil || a.longPictureID == b.longPictureID)
            && a.layer == b.layer && a.tl0PicIdx == b.tl0PicIdx && a.references == b.references
            && a.scalabilityStructure == b.scalabilityStructure
    }
    /// RFC 9628 §4.2.1 scalability structure (V bit).
    public var scalabilityStructure: VP9ScalabilityStructure?

    /// RFC 9628 §4.2 layer indices.
    public struct Layer: Sendable, Equatable {
        /// TID, 0...7.
        public var temporalID: UInt8
        /// U: switching up point.
        public var switchingUpPoint: Bool
        /// SID, 0...7.
        public var spatialID: UInt8
        /// D: inter-layer dependency on the spatial layer below.
        public var interLayerDependency: Bool
        /// Makes layer indices.
        public init(
            temporalID: UInt8 = 0, switchingUpPoint: Bool = false, spatialID: UInt8 = 0,
            interLayerDependency: Bool = false
        ) {
            self.temporalID = temporalID; self.switchingUpPoint = switchingUpPoint
            self.spatialID = spatialID; self.interLayerDependency = interLayerDependency
        }
    }

    /// Makes a descriptor (flexible mode by default).
    public init(
        interPicturePredicted: Bool = false, flexibleMode: Bool = true, startOfFrame: Bool = false,
        endOfFrame: Bool = false, pictureID: UInt16? = nil, longPictureID: Bool = true,
        layer: Layer? = nil, tl0PicIdx: UInt8? = nil, referenceDiffs: [UInt8] = [],
        scalabilityStructure: VP9ScalabilityStructure? = nil
    ) {
        precondition(referenceDiffs.count <= 3, "VP9 allows at most 3 P_DIFF entries")
        self.interPicturePredicted = interPicturePredicted
        self.flexibleMode = flexibleMode
        self.startOfFrame = startOfFrame
        self.endOfFrame = endOfFrame
        self.pictureID = pictureID
        self.longPictureID = longPictureID
        self.layer = layer
        self.tl0PicIdx = tl0PicIdx
        self.setReferences(referenceDiffs)
        self.scalabilityStructure = scalabilityStructure
    }

    /// The P_DIFF entries as an array (allocates; for tests and logs).
    public var references: [UInt8] { (0..<referenceCount).map { referenceDiffs[$0] } }

    /// Bytes `marshal(into:)` writes.
    public var marshalSize: Int {
        var n = 1
        if pictureID != nil { n += longPictureID ? 2 : 1 }
        if layer != nil { n += flexibleMode ? 1 : 2 }
        if flexibleMode && interPicturePredicted { n += referenceCount }
        if let ss = scalabilityStructure { n += ss.marshalSize }
        return n
    }

    /// Appends the descriptor to `out` and returns its size (`marshalSize`). Traps when `out` has
    /// too little free capacity or for a flexible predicted frame without P_DIFF (RFC 9628 §4.2
    /// requires one). Cost: no allocation.
    @discardableResult
    public func marshal(into out: inout OutputRawSpan) -> Int {
        let size = marshalSize
        precondition(out.freeCapacity >= size, "buffer too small for VP9 payload descriptor")
        precondition(
            !(flexibleMode && interPicturePredicted) || referenceCount > 0,
            "flexible-mode predicted VP9 frame needs a P_DIFF")
        out.appendU8(
            (pictureID != nil ? 0x80 : 0) | (interPicturePredicted ? 0x40 : 0) | (layer != nil ? 0x20 : 0)
                | (flexibleMode ? 0x10 : 0) | (startOfFrame ? 0x08 : 0) | (endOfFrame ? 0x04 : 0)
                | (scalabilityStructure != nil ? 0x02 : 0) | (notReferenceForUpperSpatial ? 0x01 : 0))
        if let pid = pictureID {
            if longPictureID { out.appendU16(0x8000 | (pid & 0x7FFF)) } else { out.appendU8(UInt8(pid & 0x7F)) }
        }
        if let l = layer {
            out.appendU8(
                (l.temporalID & 7) << 5 | (l.switchingUpPoint ? 0x10 : 0) | (l.spatialID & 7) << 1
                    | (l.interLayerDependency ? 1 : 0))
            if !flexibleMode { out.appendU8(tl0PicIdx ?? 0) }
        }
        if flexibleMode && interPicturePredicted {
            for i in 0..<referenceCount {
                out.appendU8((referenceDiffs[i] & 0x7F) << 1 | (i + 1 < referenceCount ? 1 : 0))
            }
        }
        if let ss = scalabilityStructure { ss.marshal(into: &out) }
        return size
    }

    /// Parses the descriptor at the start of `payload`; returns it and its size. Throws
    /// `emptyPayload`, `truncated` when fields run past the payload or no VP9 data follows, and
    /// `badPayloadDescriptor` for more than 3 P_DIFFs or a zero P_DIFF (RFC 9628 §4.2).
    public static func parse(_ p: RawSpan) throws(RTPError) -> (VP9PayloadDescriptor, Int) {
        guard p.byteCount > 0 else { throw RTPError(.emptyPayload, "VP9 RTP payload is empty") }
        var d = VP9PayloadDescriptor()
        let b0 = p.u8(0)
        d.interPicturePredicted = b0 & 0x40 != 0
        d.flexibleMode = b0 & 0x10 != 0
        d.startOfFrame = b0 & 0x08 != 0
        d.endOfFrame = b0 & 0x04 != 0
        d.notReferenceForUpperSpatial = b0 & 0x01 != 0
        var at = 1
        func need(_ k: Int, _ what: String) throws(RTPError) {
            guard p.byteCount >= at + k else {
                throw RTPError(
                    .truncated,
                    "VP9 payload descriptor of \(p.byteCount) bytes ends before its \(what) at offset \(at) (RFC 9628 §4.2)")
            }
        }
        if b0 & 0x80 != 0 {
            try need(1, "PictureID")
            if p.u8(at) & 0x80 != 0 {
                try need(2, "15-bit PictureID")
                d.pictureID = p.u16(at) & 0x7FFF; d.longPictureID = true; at += 2
            } else {
                d.pictureID = UInt16(p.u8(at)); d.longPictureID = false; at += 1
            }
        }
        if b0 & 0x20 != 0 {
            try need(d.flexibleMode ? 1 : 2, "layer indices")
            let l = p.u8(at)
            d.layer = Layer(
                temporalID: l >> 5, switchingUpPoint: l & 0x10 != 0, spatialID: (l >> 1) & 7,
                interLayerDependency: l & 1 != 0)
            at += 1
            if !d.flexibleMode { d.tl0PicIdx = p.u8(at); at += 1 }
        }
        if d.flexibleMode && d.interPicturePredicted {
            var more = true
            while more {
                try need(1, "P_DIFF")
                guard d.referenceCount < 3 else {
                    throw RTPError(.badPayloadDescriptor, "VP9 payload descriptor has more than 3 P_DIFF entries (RFC 9628 §4.2)")
                }
                let r = p.u8(at); at += 1
                guard r >> 1 != 0 else {
                    throw RTPError(.badPayloadDescriptor, "VP9 payload descriptor has P_DIFF 0 (RFC 9628 §4.2)")
                }
                d.referenceDiffs[d.referenceCount] = r >> 1
                d.referenceCount += 1
                more = r & 1 != 0
            }
        }
        if b0 & 0x02 != 0 {
            let (ss, n) = try VP9ScalabilityStructure.parse(p.extracting(at...))
            d.scalabilityStructure = ss
            at += n
        }
        // RFC 9628 §4.2 allows an SS-only packet; otherwise VP9 data must follow.
        guard p.byteCount > at || (d.scalabilityStructure != nil && !d.startOfFrame) else {
            throw RTPError(.truncated, "VP9 RTP payload of \(p.byteCount) bytes holds only its \(at)-byte descriptor")
        }
        return (d, at)
    }
}

/// The VP9 scalability structure (RFC 9628 §4.2.1): spatial layer count, optional resolutions and
/// an optional picture group description (parsed for its size and skipped).
/// Thread rule: a value type. Cost: inline storage for up to 8 layers.
public struct VP9ScalabilityStructure: Sendable, Equatable {
    /// N_S + 1: number of spatial layers, 1...8.
    public var spatialLayers: Int
    private var widths: InlineArray<8, UInt16> = .init(repeating: 0)
    private var heights: InlineArray<8, UInt16> = .init(repeating: 0)

    /// Width of spatial layer `i` (0 when `hasResolutions` is false).
    public func width(layer i: Int) -> Int { Int(widths[i]) }
    /// Height of spatial layer `i` (0 when `hasResolutions` is false).
    public func height(layer i: Int) -> Int { Int(heights[i]) }

    /// Equal when every field the descriptor carries is equal.
    public static func == (a: Self, b: Self) -> Bool {
        guard a.spatialLayers == b.spatialLayers, a.hasResolutions == b.hasResolutions,
            a.pictureGroupSize == b.pictureGroupSize
        else { return false }
        for i in 0..<a.spatialLayers where a.widths[i] != b.widths[i] || a.heights[i] != b.heights[i] {
            return false
        }
        return true
    }
    /// RFC 9628 §4.2.1 "Y": resolutions present.
    public var hasResolutions: Bool
    /// RFC 9628 §4.2.1 N_G: pictures in the group (0 when G is clear). Written as 0 groups.
    public var pictureGroupSize: Int = 0

    /// One spatial layer at `width` x `height`.
    public init(width: UInt16, height: UInt16) {
        spatialLayers = 1; hasResolutions = true
        widths[0] = width; heights[0] = height
    }

    /// Bytes `marshal(into:)` writes (no picture group written).
    public var marshalSize: Int { 1 + (hasResolutions ? 4 * spatialLayers : 0) }

    /// Appends the structure without a picture group description (G=0) to `out` and returns
    /// its size (`marshalSize`); traps when `out` has too little free capacity or
    /// `spatialLayers` is outside 1...8. Cost: no allocation.
    @discardableResult
    public func marshal(into out: inout OutputRawSpan) -> Int {
        precondition(out.freeCapacity >= marshalSize && spatialLayers >= 1 && spatialLayers <= 8)
        out.appendU8(UInt8(spatialLayers - 1) << 5 | (hasResolutions ? 0x10 : 0))
        if hasResolutions {
            for i in 0..<spatialLayers { out.appendU16(widths[i]); out.appendU16(heights[i]) }
        }
        return marshalSize
    }

    /// Parses the structure at the start of `p`; returns it and its size. Throws `truncated`.
    public static func parse(_ p: RawSpan) throws(RTPError) -> (VP9ScalabilityStructure, Int) {
        func trunc(_ what: String) -> RTPError {
            RTPError(.truncated, "VP9 scalability structure of \(p.byteCount) bytes ends inside its \(what) (RFC 9628 §4.2.1)")
        }
        guard p.byteCount >= 1 else { throw trunc("first byte") }
        var ss = VP9ScalabilityStructure(width: 0, height: 0)
        ss.hasResolutions = false
        ss.spatialLayers = Int(p.u8(0) >> 5) + 1
        ss.hasResolutions = p.u8(0) & 0x10 != 0
        let g = p.u8(0) & 0x08 != 0
        var at = 1
        if ss.hasResolutions {
            guard p.byteCount >= at + 4 * ss.spatialLayers else { throw trunc("resolutions") }
            for i in 0..<ss.spatialLayers { ss.widths[i] = p.u16(at); ss.heights[i] = p.u16(at + 2); at += 4 }
        }
        if g {
            guard p.byteCount > at else { throw trunc("N_G") }
            ss.pictureGroupSize = Int(p.u8(at)); at += 1
            for _ in 0..<ss.pictureGroupSize {
                guard p.byteCount > at else { throw trunc("picture group") }
                let r = Int((p.u8(at) >> 2) & 3); at += 1
                guard p.byteCount >= at + r else { throw trunc("picture group P_DIFFs") }
                at += r
            }
        }
        return (ss, at)
    }
}
