import MediaCore

/// A pure-Swift reference for the colour tests, written from the BT.601 equations (limited range,
/// Y 16...235, chroma 16...240), independent of libyuv: an RGB image, its I420, packing into every
/// `PixelFormat` by memory byte order, and plane rotation and box scaling.
struct RGBImage {
    let width: Int, height: Int
    var pixels: [UInt8]  // R, G, B per pixel, rows packed

    init(width: Int, height: Int, pixels: [UInt8]) {
        self.width = width; self.height = height; self.pixels = pixels
    }

    /// Smooth gradients plus a soft diagonal wave: realistic content with little detail finer
    /// than the 2x2 chroma block, so a 4:2:0 round trip can be held to a tight error bound.
    static func synthetic(width: Int, height: Int) -> RGBImage {
        var p = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                let fx = Double(x) / Double(max(1, width - 1)), fy = Double(y) / Double(max(1, height - 1))
                let wave = 0.5 + 0.5 * sin(Double(x + y) * 0.15)
                let r = 30 + 190 * fx
                let g = 40 + 150 * fy + 20 * wave
                let b = 220 - 170 * fx * fy
                let i = (y * width + x) * 3
                p[i] = UInt8(r.rounded()); p[i + 1] = UInt8(g.rounded()); p[i + 2] = UInt8(b.rounded())
            }
        }
        return RGBImage(width: width, height: height, pixels: p)
    }

    func rgb(_ x: Int, _ y: Int) -> (Double, Double, Double) {
        let i = (y * width + x) * 3
        return (Double(pixels[i]), Double(pixels[i + 1]), Double(pixels[i + 2]))
    }

    /// The pixels packed as `format` (one of the RGB formats), rows `stride` bytes apart.
    func packed(_ format: PixelFormat, stride: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0xEE, count: stride * height)
        let bpp = format.bytesPerPixel
        for y in 0..<height {
            for x in 0..<width {
                let s = (y * width + x) * 3
                let r = pixels[s], g = pixels[s + 1], b = pixels[s + 2], a: UInt8 = 255
                let bytes: [UInt8]
                switch format {
                case .bgra: bytes = [b, g, r, a]
                case .argb: bytes = [a, r, g, b]
                case .rgba: bytes = [r, g, b, a]
                case .abgr: bytes = [a, b, g, r]
                case .rgb24: bytes = [r, g, b]
                default: fatalError("not an RGB format: \(format)")
                }
                for k in 0..<bpp { out[y * stride + x * bpp + k] = bytes[k] }
            }
        }
        return out
    }

    /// BT.601 limited-range I420: luma per pixel, chroma from the 2x2 block's mean RGB.
    func referenceI420() -> ReferenceI420 {
        let cw = (width + 1) / 2, ch = (height + 1) / 2
        var yp = [UInt8](repeating: 0, count: width * height)
        var up = [UInt8](repeating: 0, count: cw * ch), vp = up
        func clamp(_ v: Double) -> UInt8 { UInt8(max(0, min(255, v.rounded()))) }
        for y in 0..<height {
            for x in 0..<width {
                let (r, g, b) = rgb(x, y)
                yp[y * width + x] = clamp(16 + 0.256788 * r + 0.504129 * g + 0.097906 * b)
            }
        }
        for cy in 0..<ch {
            for cx in 0..<cw {
                var r = 0.0, g = 0.0, b = 0.0, n = 0.0
                for dy in 0..<2 where cy * 2 + dy < height {
                    for dx in 0..<2 where cx * 2 + dx < width {
                        let p = rgb(cx * 2 + dx, cy * 2 + dy); r += p.0; g += p.1; b += p.2; n += 1
                    }
                }
                r /= n; g /= n; b /= n
                up[cy * cw + cx] = clamp(128 - 0.148223 * r - 0.290993 * g + 0.439216 * b)
                vp[cy * cw + cx] = clamp(128 + 0.439216 * r - 0.367788 * g - 0.071427 * b)
            }
        }
        return ReferenceI420(width: width, height: height, y: yp, u: up, v: vp)
    }
}

/// Tightly packed I420 planes held in arrays.
struct ReferenceI420 {
    let width: Int, height: Int
    var y: [UInt8], u: [UInt8], v: [UInt8]
    var chromaWidth: Int { (width + 1) / 2 }
    var chromaHeight: Int { (height + 1) / 2 }

    init(width: Int, height: Int, y: [UInt8], u: [UInt8], v: [UInt8]) {
        self.width = width; self.height = height; self.y = y; self.u = u; self.v = v
    }

    init(_ frame: VideoFrame) {
        width = frame.width; height = frame.height
        let cw = (width + 1) / 2, ch = (height + 1) / 2
        y = (0..<height).flatMap { r in (0..<frame.width).map { frame.y[r * frame.strideY + $0] } }
        u = (0..<ch).flatMap { r in (0..<cw).map { frame.u[r * frame.strideUV + $0] } }
        v = (0..<ch).flatMap { r in (0..<cw).map { frame.v[r * frame.strideUV + $0] } }
    }

    /// The same image as a contiguous buffer in `format` (`.i420`, `.nv12`, `.nv21`, `.yuy2`,
    /// `.uyvy`; 4:2:2 formats repeat each chroma row for both luma rows).
    func packed(_ format: PixelFormat) -> [UInt8] {
        let cw = chromaWidth, ch = chromaHeight
        switch format {
        case .i420: return y + u + v
        case .nv12, .nv21:
            var c = [UInt8](repeating: 0, count: cw * 2 * ch)
            for i in 0..<(cw * ch) {
                c[2 * i] = format == .nv12 ? u[i] : v[i]
                c[2 * i + 1] = format == .nv12 ? v[i] : u[i]
            }
            return y + c
        case .yuy2, .uyvy:
            let stride = cw * 4
            var out = [UInt8](repeating: 0, count: stride * height)
            for r in 0..<height {
                for m in 0..<cw {
                    let y0 = y[r * width + 2 * m]
                    let y1 = 2 * m + 1 < width ? y[r * width + 2 * m + 1] : y0
                    let cu = u[(r / 2) * cw + m], cv = v[(r / 2) * cw + m]
                    let o = r * stride + m * 4
                    let quad: [UInt8] = format == .yuy2 ? [y0, cu, y1, cv] : [cu, y0, cv, y1]
                    for k in 0..<4 { out[o + k] = quad[k] }
                }
            }
            return out
        default: fatalError("not a YUV format: \(format)")
        }
    }

    /// Rotated clockwise by `rotation` (lossless; chroma planes rotate the same way).
    func rotated(_ rotation: VideoRotation) -> ReferenceI420 {
        func rot(_ p: [UInt8], _ w: Int, _ h: Int) -> [UInt8] {
            let (ow, oh) = rotation.swapsDimensions ? (h, w) : (w, h)
            var out = [UInt8](repeating: 0, count: ow * oh)
            for y in 0..<h {
                for x in 0..<w {
                    let (nx, ny): (Int, Int)
                    switch rotation {
                    case .rotation0: (nx, ny) = (x, y)
                    case .rotation90: (nx, ny) = (h - 1 - y, x)
                    case .rotation180: (nx, ny) = (w - 1 - x, h - 1 - y)
                    case .rotation270: (nx, ny) = (y, w - 1 - x)
                    }
                    out[ny * ow + nx] = p[y * w + x]
                }
            }
            return out
        }
        let (w, h) = rotation.swapsDimensions ? (height, width) : (width, height)
        return ReferenceI420(
            width: w, height: h, y: rot(y, width, height),
            u: rot(u, chromaWidth, chromaHeight), v: rot(v, chromaWidth, chromaHeight))
    }

    /// Area-average (box) downscale to `w` x `h`: each output sample is the exact mean of the
    /// source area it covers, with fractional coverage at the edges.
    func boxScaled(width w: Int, height h: Int) -> ReferenceI420 {
        func scale(_ p: [UInt8], _ sw: Int, _ sh: Int, _ dw: Int, _ dh: Int) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: dw * dh)
            let fx = Double(sw) / Double(dw), fy = Double(sh) / Double(dh)
            for oy in 0..<dh {
                for ox in 0..<dw {
                    let x0 = Double(ox) * fx, x1 = x0 + fx, y0 = Double(oy) * fy, y1 = y0 + fy
                    var sum = 0.0, area = 0.0
                    var sy = Int(y0)
                    while Double(sy) < y1 && sy < sh {
                        let cy = min(y1, Double(sy + 1)) - max(y0, Double(sy))
                        var sx = Int(x0)
                        while Double(sx) < x1 && sx < sw {
                            let cx = min(x1, Double(sx + 1)) - max(x0, Double(sx))
                            sum += Double(p[sy * sw + sx]) * cx * cy; area += cx * cy
                            sx += 1
                        }
                        sy += 1
                    }
                    out[oy * dw + ox] = UInt8((sum / area).rounded())
                }
            }
            return out
        }
        return ReferenceI420(
            width: w, height: h, y: scale(y, width, height, w, h),
            u: scale(u, chromaWidth, chromaHeight, (w + 1) / 2, (h + 1) / 2),
            v: scale(v, chromaWidth, chromaHeight, (w + 1) / 2, (h + 1) / 2))
    }

    /// Runs `body` with an `I420View` over these arrays.
    func withView<R>(_ body: (I420View) throws -> R) rethrows -> R {
        try y.withUnsafeBufferPointer { yb in
            try u.withUnsafeBufferPointer { ub in
                try v.withUnsafeBufferPointer { vb in
                    try body(
                        I420View(
                            width: width, height: height,
                            y: yb.baseAddress!, strideY: width,
                            u: ub.baseAddress!, strideU: chromaWidth,
                            v: vb.baseAddress!, strideV: chromaWidth))
                }
            }
        }
    }

    /// PSNR in dB over all planes against `other` (same size).
    func psnr(_ other: ReferenceI420) -> Double {
        withView { a in other.withView { b in Quality.psnr(a, b) } }
    }
}

#if canImport(Glibc)
    import Glibc
#endif
