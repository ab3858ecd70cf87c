/// A deterministic moving test picture for tests, the CLI's `--pattern`, the demo and benchmarks.
///
/// Frame `n` at any size shows: a diagonal gradient drifting right, a scrolling checkerboard
/// (top right quarter), a zone plate whose rings move outward (bottom left quarter), a bouncing
/// box, the frame number in seven-segment digits, and a machine-readable bar code of `n` (top
/// left) that survives lossy coding, so a receiver can tell which frame it shows
/// (`frameIndex(in:)`). The same `n` always gives the same pixels.
/// Thread rule: pure functions over the caller's memory. Cost: about one memcpy of the frame plus
/// per-pixel work on half of it (checkerboard, zone plate); measured 2-6 ms per 720p frame in a
/// debug build, no allocation.
public enum SyntheticVideo {
    /// Bits of the frame index in the bar code: indices repeat every 65 536 frames.
    public static let barcodeBits = 16

    /// Draws frame `n` (n >= 0) into `frame`'s I420 planes at the frame's size.
    public static func render(frameIndex n: Int, into frame: VideoFrame) {
        precondition(n >= 0, "SyntheticVideo frame index must be >= 0")
        let w = frame.width, h = frame.height
        let g = Geometry(width: w, height: h, n: n)

        // Luma background: a triangle-wave gradient along x + y/2, drifting 3 px per frame: each
        // row is a window of one precomputed ramp.
        lumaRamp.withUnsafeBufferPointer { ramp in
            for row in 0..<h {
                let off = ((row >> 1) &+ 512 &- ((3 &* n) & 511)) & 511
                (frame.y + row * frame.strideY).update(from: ramp.baseAddress! + off, count: w)
            }
        }
        // Checkerboard, top right quarter, scrolling 2 px right and 1 px down per frame.
        let c = g.checker
        if c.x1 > c.x0 && c.y1 > c.y0 {
            let cell = g.checkerCell
            for row in c.y0..<c.y1 {
                let p = frame.y + row * frame.strideY
                let rowPhase = ((row &+ n) / cell) & 1
                for col in c.x0..<c.x1 {
                    let on = (((col &+ 2 &* n) / cell) & 1) ^ rowPhase
                    p[col] = on == 1 ? 190 : 60
                }
            }
        }
        // Zone plate, bottom left quarter: cos(k r^2 - phase), rings moving outward.
        let z = g.zone
        if z.x1 > z.x0 && z.y1 > z.y0 {
            let cx = (z.x0 + z.x1) / 2, cy = (z.y0 + z.y1) / 2
            let scale = g.zoneScale
            let phase = (n &* 8) & 255
            cosineTable.withUnsafeBufferPointer { lut in
                for row in z.y0..<z.y1 {
                    let p = frame.y + row * frame.strideY
                    let dy = row - cy
                    let dy2 = dy &* dy
                    for col in z.x0..<z.x1 {
                        let dx = col - cx
                        let idx = (((dx &* dx &+ dy2) &* scale) >> 16 &- phase) & 255
                        p[col] = lut[idx]
                    }
                }
            }
        }
        // Chroma: U a horizontal triangle wave drifting with n, V constant per row.
        let cw = frame.chromaWidth, ch = frame.chromaHeight
        chromaRamp.withUnsafeBufferPointer { ramp in
            let off = (n &* 2) & 255
            for row in 0..<ch {
                (frame.u + row * frame.strideUV).update(from: ramp.baseAddress! + off, count: cw)
                let t = (row &* 2 &+ n) & 255
                let tri = t < 128 ? t : 255 - t
                (frame.v + row * frame.strideUV).update(repeating: UInt8(96 + tri / 2), count: cw)
            }
        }
        // Bouncing box: white with a black border, reddish chroma.
        let b = g.box
        fill(frame.y, frame.strideY, b, w, h, 16)
        fill(frame.y, frame.strideY, b.inset(g.border), w, h, 235)
        let bc = b.halved
        fill(frame.u, frame.strideUV, bc, cw, ch, 90)
        fill(frame.v, frame.strideUV, bc, cw, ch, 200)
        // Frame number in seven-segment digits on a dark plate.
        fill(frame.y, frame.strideY, g.digitPlate, w, h, 16)
        forEachSegment(g) { fill(frame.y, frame.strideY, $0, w, h, 235) }
        // Bar code: white, black, 16 bits of n (MSB first), even parity; neutral chroma under it.
        forEachBarcodeCell(g) { rect, bit in
            fill(frame.y, frame.strideY, rect, w, h, bit ? 235 : 16)
            fill(frame.u, frame.strideUV, rect.halved, cw, ch, 128)
            fill(frame.v, frame.strideUV, rect.halved, cw, ch, 128)
        }
    }

    /// Reads back the frame index (modulo 65 536) from a picture drawn by `render`, after any
    /// lossy coding that keeps the picture recognisable; nil when the bar code is not there or
    /// its parity is wrong, or the picture is smaller than 80x16.
    /// Cost: reads 19 small blocks.
    public static func frameIndex(in view: I420View) -> Int? {
        let g = Geometry(width: view.width, height: view.height, n: 0)
        guard g.cell >= 2 else { return nil }
        var bits = 0, cells = 0
        forEachBarcodeCell(g) { rect, _ in
            // Mean of the cell's central half.
            let qx = max(0, (rect.x1 - rect.x0) / 4), qy = max(0, (rect.y1 - rect.y0) / 4)
            var sum = 0, count = 0
            for row in (rect.y0 + qy)..<(rect.y1 - qy) {
                for col in (rect.x0 + qx)..<(rect.x1 - qx) {
                    sum += Int(view.y[row * view.strideY + col]); count += 1
                }
            }
            bits = bits << 1 | (count > 0 && sum / count >= 128 ? 1 : 0)
            cells += 1
        }
        // 19 cells: 1, 0, 16 value bits (MSB first), parity of the value bits.
        guard cells == 19, bits >> 17 == 0b10 else { return nil }
        let value = (bits >> 1) & 0xFFFF
        guard value.nonzeroBitCount & 1 == bits & 1 else { return nil }
        return value
    }

    /// Fills a BGRA buffer (bytes B, G, R, A; libyuv "ARGB") of `width` x `height` with frame `n`
    /// directly, for capture and conversion benchmarks: the same layout as `render` (gradient,
    /// checkerboard, grey zone plate, box, digits, bar code) in other colours; converted to I420,
    /// `frameIndex(in:)` reads it back. `stride` is bytes per row (>= 4 x width).
    /// Cost: about one memcpy of the buffer plus per-pixel work on a quarter of it.
    public static func renderBGRA(frameIndex n: Int, width: Int, height: Int, into buffer: inout MutableRawSpan, stride: Int) {
        precondition(height > 0 && buffer.byteCount >= stride * (height - 1) + width * 4, "SyntheticVideo BGRA buffer too small")
        buffer.withUnsafeMutableBytes {
            renderBGRA(frameIndex: n, width: width, height: height, into: $0.baseAddress!, stride: stride)
        }
    }

    /// `renderBGRA(frameIndex:width:height:into:stride:)` into raw memory, for the engine's own callers.
    package static func renderBGRA(
        frameIndex n: Int, width: Int, height: Int,
        into buffer: UnsafeMutableRawPointer, stride: Int
    ) {
        precondition(n >= 0 && width > 0 && height > 0 && stride >= width * 4, "SyntheticVideo BGRA arguments invalid")
        let g = Geometry(width: width, height: height, n: n)
        func pixel(_ b: Int, _ gr: Int, _ r: Int) -> UInt32 {
            UInt32(b) | UInt32(gr) << 8 | UInt32(r) << 16 | 0xFF00_0000
        }
        bgraRamp.withUnsafeBufferPointer { ramp in
            for row in 0..<height {
                let off = ((row >> 1) &+ 512 &- ((3 &* n) & 511)) & 511
                let p = (buffer + row * stride).assumingMemoryBound(to: UInt32.self)
                p.update(from: ramp.baseAddress! + off, count: width)
            }
        }
        func fillBGRA(_ r: Rect, _ value: UInt32) {
            let c = r.clipped(width, height)
            guard c.x1 > c.x0 else { return }
            for row in c.y0..<c.y1 {
                let p = (buffer + row * stride).assumingMemoryBound(to: UInt32.self)
                (p + c.x0).update(repeating: value.littleEndian, count: c.x1 - c.x0)
            }
        }
        let c = g.checker
        if c.x1 > c.x0 && c.y1 > c.y0 {
            let cell = g.checkerCell
            let on = pixel(40, 200, 230).littleEndian, off = pixel(120, 40, 20).littleEndian
            for row in c.y0..<c.y1 {
                let p = (buffer + row * stride).assumingMemoryBound(to: UInt32.self)
                let rowPhase = ((row &+ n) / cell) & 1
                for col in c.x0..<c.x1 {
                    p[col] = ((((col &+ 2 &* n) / cell) & 1) ^ rowPhase) == 1 ? on : off
                }
            }
        }
        let z = g.zone
        if z.x1 > z.x0 && z.y1 > z.y0 {
            let cx = (z.x0 + z.x1) / 2, cy = (z.y0 + z.y1) / 2
            let scale = g.zoneScale, phase = (n &* 8) & 255
            cosineTable.withUnsafeBufferPointer { lut in
                for row in z.y0..<z.y1 {
                    let p = (buffer + row * stride).assumingMemoryBound(to: UInt32.self)
                    let dy = row - cy
                    let dy2 = dy &* dy
                    for col in z.x0..<z.x1 {
                        let dx = col - cx
                        let v = UInt32(lut[(((dx &* dx &+ dy2) &* scale) >> 16 &- phase) & 255])
                        p[col] = (v | v << 8 | v << 16 | 0xFF00_0000).littleEndian
                    }
                }
            }
        }
        fillBGRA(g.box, pixel(0, 0, 0))
        fillBGRA(g.box.inset(g.border), pixel(40, 40, 235))
        fillBGRA(g.digitPlate, pixel(0, 0, 0))
        forEachSegment(g) { fillBGRA($0, pixel(255, 255, 255)) }
        forEachBarcodeCell(g) { rect, bit in fillBGRA(rect, bit ? pixel(255, 255, 255) : pixel(0, 0, 0)) }
    }

    // MARK: - Layout

    struct Rect {
        var x0: Int, y0: Int, x1: Int, y1: Int
        func inset(_ d: Int) -> Rect { Rect(x0: x0 + d, y0: y0 + d, x1: x1 - d, y1: y1 - d) }
        var halved: Rect { Rect(x0: x0 / 2, y0: y0 / 2, x1: (x1 + 1) / 2, y1: (y1 + 1) / 2) }
        func clipped(_ w: Int, _ h: Int) -> Rect {
            let r = Rect(x0: max(0, x0), y0: max(0, y0), x1: min(w, x1), y1: min(h, y1))
            return r.x1 > r.x0 && r.y1 > r.y0 ? r : Rect(x0: 0, y0: 0, x1: 0, y1: 0)
        }
    }

    struct Geometry {
        let n: Int
        let checker: Rect, checkerCell: Int
        let zone: Rect, zoneScale: Int
        let box: Rect, border: Int
        let cell: Int
        let digitHeight: Int, digitOrigin: (x: Int, y: Int)

        init(width w: Int, height h: Int, n: Int) {
            self.n = n
            checker = Rect(x0: w / 2, y0: 0, x1: w, y1: h / 2)
            checkerCell = max(2, h / 24)
            zone = Rect(x0: 0, y0: h / 2, x1: w / 2, y1: h)
            // Ring frequency reaches ~0.2 cycles/pixel at the region's corner:
            // phase(r) = r^2 * scale / 2^16 in 1/256 cycles, so frequency = 2 r scale / 2^24.
            let corner = max(1.0, (Double(w * w) / 16 + Double(h * h) / 16).squareRoot())
            zoneScale = max(1, Int(0.2 * 16_777_216 / (2 * corner)))
            let bw = max(2, w / 8), bh = max(2, h / 6)
            let bx = Self.bounce(n * 6, w - bw), by = Self.bounce(n * 4, h - bh)
            box = Rect(x0: bx, y0: by, x1: bx + bw, y1: by + bh)
            border = max(1, min(bw, bh) / 16)
            cell = max(1, min(w / 40, h / 8))
            digitHeight = max(5, h / 8)
            digitOrigin = (x: cell + max(1, digitHeight / 10), y: cell * 2 + max(1, digitHeight / 10))
        }

        var digitPlate: Rect {
            let t = max(1, digitHeight / 10), dw = digitHeight / 2
            return Rect(
                x0: digitOrigin.x - t, y0: digitOrigin.y - t,
                x1: digitOrigin.x + 5 * (dw + dw / 2) + t, y1: digitOrigin.y + digitHeight + t)
        }

        static func bounce(_ v: Int, _ range: Int) -> Int {
            guard range > 0 else { return 0 }
            let m = v % (2 * range)
            return m < range ? m : 2 * range - m
        }
    }

    /// The luma background profile: a triangle wave of period 512 over 40...215, long enough for
    /// any width (16384) plus the largest row offset (511).
    private static let lumaRamp = table(count: 16384 + 512) { i -> UInt8 in
        let t = i & 511
        return UInt8(40 + ((t < 256 ? t : 511 - t) * 11) >> 4)
    }

    /// The U profile: a triangle wave of period 256 over 96...159 (chroma widths up to 8192).
    private static let chromaRamp = table(count: 8192 + 256) { i -> UInt8 in
        let t = i & 255
        return UInt8(96 + (t < 128 ? t : 255 - t) / 2)
    }

    /// The BGRA background profile (little-endian B, G, R, A words), as `lumaRamp` in colour.
    private static let bgraRamp = table(count: 16384 + 512) { i -> UInt32 in
        let t = i & 511
        let tri = UInt32(t < 256 ? t : 511 - t)
        return (UInt32(255 - tri / 2) | (40 + tri * 3 / 4) << 8 | (60 + tri * 3 / 4) << 16 | 0xFF00_0000).littleEndian
    }

    /// An array of `count` elements made by `f`, in one allocation.
    private static func table<T>(count: Int, _ f: (Int) -> T) -> [T] {
        [T](unsafeUninitializedCapacity: count) { buffer, initialized in
            for i in 0..<count { (buffer.baseAddress! + i).initialize(to: f(i)) }
            initialized = count
        }
    }

    /// 128 + 100 cos(2 pi i / 256): the zone plate's ring profile.
    private static let cosineTable = table(count: 256) {
        UInt8(128 + Int((100 * cos(Double($0) * 2 * Double.pi / 256)).rounded()))
    }

    /// Segment bits a=1 b=2 c=4 d=8 e=16 f=32 g=64 for digits 0...9.
    private static let sevenSegment: [UInt8] = [0x3F, 0x06, 0x5B, 0x4F, 0x66, 0x6D, 0x7D, 0x07, 0x7F, 0x6F]

    private static func forEachSegment(_ g: Geometry, _ body: (Rect) -> Void) {
        let dh = g.digitHeight, dw = dh / 2, t = max(1, dh / 10)
        var value = g.n % 100_000
        for d in stride(from: 4, through: 0, by: -1) {
            let digit = value % 10
            value /= 10
            let x = g.digitOrigin.x + d * (dw + dw / 2), y = g.digitOrigin.y
            let mask = sevenSegment[digit]
            let mid = y + dh / 2 - t / 2
            for i in 0..<7 where mask & (1 << i) != 0 {
                switch i {
                case 0: body(Rect(x0: x, y0: y, x1: x + dw, y1: y + t))  // a
                case 1: body(Rect(x0: x + dw - t, y0: y, x1: x + dw, y1: y + dh / 2))  // b
                case 2: body(Rect(x0: x + dw - t, y0: y + dh / 2, x1: x + dw, y1: y + dh))  // c
                case 3: body(Rect(x0: x, y0: y + dh - t, x1: x + dw, y1: y + dh))  // d
                case 4: body(Rect(x0: x, y0: y + dh / 2, x1: x + t, y1: y + dh))  // e
                case 5: body(Rect(x0: x, y0: y, x1: x + t, y1: y + dh / 2))  // f
                default: body(Rect(x0: x, y0: mid, x1: x + dw, y1: mid + t))  // g
                }
            }
        }
    }

    private static func forEachBarcodeCell(_ g: Geometry, _ body: (Rect, Bool) -> Void) {
        let value = g.n & 0xFFFF
        var ones = 0
        for i in 0..<19 {
            let bit: Bool
            switch i {
            case 0: bit = true
            case 1: bit = false
            case 18: bit = ones & 1 == 1
            default:
                bit = (value >> (17 - i)) & 1 == 1
                if bit { ones += 1 }
            }
            body(Rect(x0: i * g.cell, y0: 0, x1: (i + 1) * g.cell, y1: g.cell), bit)
        }
    }

    private static func fill(
        _ plane: UnsafeMutablePointer<UInt8>, _ stride: Int, _ rect: Rect,
        _ w: Int, _ h: Int, _ value: UInt8
    ) {
        let c = rect.clipped(w, h)
        guard c.x1 > c.x0 else { return }
        for row in c.y0..<c.y1 {
            (plane + row * stride + c.x0).update(repeating: value, count: c.x1 - c.x0)
        }
    }
}

#if canImport(Glibc)
    import Glibc
#endif
