import MediaCore
import Testing

/// The first-packet payload descriptor fields read straight from the bytes as RFC 9628 §4.2 draws
/// them (independent of `VP9PayloadDescriptor.parse`):
/// `|I|P|L|F|B|E|V|Z|`, `|M| PICTURE ID |` (+ 8 bits when M), `|TID|U|SID|D|` when L, then in
/// flexible mode with P up to three `|P_DIFF|N|` bytes (N: another follows).
private struct RFCDescriptorBits {
    var p = false, f = false, b = false
    var pictureID = 0
    var tid = 0
    var pDiffs: [Int] = []

    init(_ x: [UInt8]) {
        p = x[0] & 0x40 != 0
        f = x[0] & 0x10 != 0
        b = x[0] & 0x08 != 0
        let i = x[0] & 0x80 != 0, l = x[0] & 0x20 != 0
        var at = 1
        if i {
            if x[at] & 0x80 != 0 {
                pictureID = Int(x[at] & 0x7F) << 8 | Int(x[at + 1]); at += 2
            } else {
                pictureID = Int(x[at]); at += 1
            }
        }
        if l { tid = Int(x[at] >> 5); at += 1 }
        if f && p {
            while true {
                pDiffs.append(Int(x[at] >> 1))
                let n = x[at] & 1 != 0
                at += 1
                if !n || pDiffs.count == 3 { break }
            }
        }
    }
}

/// One encoded picture: its frame bytes and the first packet's descriptor bits.
private struct SentPicture {
    var data: [UInt8]
    var bits: RFCDescriptorBits
}

/// Encodes `count` frames of VP9 at 320x240 with `layers` temporal layers through `VPXEncoder`
/// and packetizes each as `VideoSendStream` does.
private func sendVP9(layers: Int, count: Int, keyframesAt: Set<Int> = [0]) throws -> [SentPicture] {
    var conf = VPXEncoderConfiguration(codec: .vp9, width: 320, height: 240)
    conf.bitrate = 400_000
    conf.temporalLayers = layers
    let encoder = try VPXEncoder(conf)
    var packetizer = VP9Packetizer(pictureID: 0x7FFE)  // PictureIDs wrap during the run
    var out: [SentPicture] = []
    for i in 0..<count {
        let frame = VideoFrame(width: 320, height: 240)
        SyntheticVideo.render(frameIndex: i, into: frame)
        try encoder.encode(frame.view, pts: Int64(i) * 3000, forceKeyframe: keyframesAt.contains(i)) { e in
            let layer =
                e.temporalLayerCount > 1
                ? VP9PayloadDescriptor.Layer(temporalID: UInt8(e.temporalLayerId), switchingUpPoint: e.isLayerSync) : nil
            let plan = packetizer.packetize(
                frameSize: e.byteCount, maxPayloadSize: 1100, keyframe: e.isKeyframe,
                width: e.width, height: e.height, layer: layer)
            var first = [UInt8](repeating: 0, count: 1200)
            let n = first.withUnsafeMutableBytes { $0.appending { plan.writePayload(at: 0, of: e.data.bytes, into: &$0) } }
            out.append(SentPicture(data: Array(e.data), bits: RFCDescriptorBits(Array(first[0..<n]))))
        }
    }
    return out
}

/// Decodes `pictures` (indices into `sent`) in order and returns the last one's Y plane.
private func decodeLast(_ sent: [SentPicture], _ pictures: [Int]) throws -> [UInt8] {
    let d = try VPXDecoder(codec: .vp9)
    var y: [UInt8] = []
    for k in pictures {
        _ = try sent[k].data.withUnsafeBytes { raw in
            try d.decode(raw) { v in
                y = []
                for row in 0..<v.height { y += UnsafeBufferPointer(start: v.y + row * v.strideY, count: v.width) }
            }
        }
    }
    return y
}

@Suite struct VP9PacketizerReferenceTests {
    @Test(arguments: [1, 2, 3])
    func keyframesAreNotPredictedAndPDiffsNameOnlyLowerOrEqualLayers(layers: Int) throws {
        let sent = try sendVP9(layers: layers, count: 16, keyframesAt: [0, 9])
        try #require(sent.count == 16)
        for (k, s) in sent.enumerated() {
            #expect(s.bits.f && s.bits.b)
            // VP9 bitstream §6.2: frame_type (0 = key) is the bit after frame_marker, profile and
            // show_existing_frame.
            let key = s.data[0] & 0x04 == 0
            #expect(s.bits.p == !key, "picture \(k): P must be 0 exactly on key frames")
            if key { #expect(s.bits.pDiffs.isEmpty); continue }
            #expect(!s.bits.pDiffs.isEmpty && s.bits.pDiffs.allSatisfy { (1...k).contains($0) }, "picture \(k): \(s.bits.pDiffs)")
            for diff in s.bits.pDiffs {
                let ref = sent[k - diff]
                #expect(ref.bits.pictureID == (s.bits.pictureID - diff) & 0x7FFF)
                #expect(ref.bits.tid <= s.bits.tid, "picture \(k) (TID \(s.bits.tid)) references TID \(ref.bits.tid)")
            }
            if layers == 1 { #expect(s.bits.pDiffs == [1]) }
        }
        if layers == 3 {
            // Pattern 0,2,1,2 after the key frame at 0: LAST = latest TID 0, GOLDEN = latest TID 1.
            #expect(sent[1...5].map(\.bits.pDiffs) == [[1], [2], [3, 1], [4], [1, 3]])
        }
    }

    /// libvpx is the judge: with temporal layers (error-resilient, so no entropy carried between
    /// frames), every picture decoded from only the pictures its P_DIFFs name (transitively) must
    /// come out exactly as in the full stream. A reference the descriptor omits would decode
    /// against the wrong buffer and differ.
    @Test(arguments: [2, 3])
    func everyPictureDecodesFromTheReferencesItsPDiffsName(layers: Int) throws {
        let sent = try sendVP9(layers: layers, count: 12)
        try #require(sent.count == 12)
        var subsetSizes: [Int] = []
        for k in 0..<sent.count {
            var needed: Set<Int> = [k]
            var todo = [k]
            while let j = todo.popLast() {
                for diff in sent[j].bits.pDiffs where needed.insert(j - diff).inserted { todo.append(j - diff) }
            }
            let subset = needed.sorted()
            subsetSizes.append(subset.count)
            let full = try decodeLast(sent, Array(0...k))
            let partial = try decodeLast(sent, subset)
            // Compared outside #expect: a failing array comparison would print 77 KB of pixels.
            let same = partial == full
            #expect(same, "picture \(k) decoded from pictures \(subset) differs from the full stream")
        }
        // A base-layer picture needs base-layer pictures only: the upper layers were left out.
        #expect(
            sent.indices.filter { sent[$0].bits.tid == 0 }.allSatisfy {
                subsetSizes[$0] == sent[0...$0].filter { $0.bits.tid == 0 }.count
            },
            "\(subsetSizes)")
    }
}
