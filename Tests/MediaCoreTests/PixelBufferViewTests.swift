import MediaCore
import Testing

@Suite struct PixelBufferViewTests {
    @Test func contiguousBuffersGetDefaultStridesAndPlaneOffsets() throws {
        let bytes = [UInt8](repeating: 0, count: PixelBufferView.byteCount(for: .i420, width: 33, height: 17))
        // 33x17: a 33-byte luma row, chroma planes of 17x9 (rounded up).
        let luma: Int = 33 * 17, chroma: Int = 17 * 9
        #expect(bytes.count == luma + 2 * chroma)
        try bytes.withUnsafeBytes { raw in
            let base = raw.baseAddress!
            let i420 = try PixelBufferView.contiguous(raw, format: .i420, width: 33, height: 17)
            #expect(i420.planeCount == 3)
            #expect(i420.stride(ofPlane: 0) == 33 && i420.stride(ofPlane: 1) == 17 && i420.stride(ofPlane: 2) == 17)
            #expect(i420.base(ofPlane: 1) == base + luma)
            #expect(i420.base(ofPlane: 2) == base + (luma + chroma))
            let nv12 = try PixelBufferView.contiguous(raw, format: .nv12, width: 33, height: 17)
            #expect(nv12.stride(ofPlane: 1) == 34)
            #expect(nv12.base(ofPlane: 1) == base + luma)
        }
        #expect(PixelBufferView.byteCount(for: .yuy2, width: 33, height: 2) == 68 * 2)
        #expect(PixelBufferView.byteCount(for: .rgb24, width: 10, height: 3) == 90)
        #expect(PixelBufferView.byteCount(for: .abgr, width: 10, height: 3) == 120)
        #expect(PixelBufferView.defaultStrides(for: .uyvy, width: 7).0 == 16)
    }

    @Test func packedViewKeepsFormatSizeAndStride() throws {
        let bytes = [UInt8](repeating: 0, count: 100 * 10)
        try bytes.withUnsafeBytes { raw in
            let view = try PixelBufferView.packed(format: .argb, width: 20, height: 10, data: raw, stride: 100)
            #expect(view.format == .argb && view.width == 20 && view.height == 10)
            #expect(view.planeCount == 1 && view.stride(ofPlane: 0) == 100 && view.base(ofPlane: 0) == raw.baseAddress!)
            // The last row only needs its own bytes, not a whole stride.
            _ = try PixelBufferView.packed(
                format: .argb, width: 20, height: 10,
                data: UnsafeRawBufferPointer(rebasing: raw[0..<(9 * 100 + 80)]), stride: 100)
        }
    }

    /// The span constructors lend the same views the checks make over the caller's own bytes, and
    /// throw without calling the closure when a plane is too short.
    @Test func spanConstructorsLendCheckedViewsOfTheCallersBytes() throws {
        let y = [UInt8](repeating: 1, count: 40 * 9 + 33), u = [UInt8](repeating: 2, count: 20 * 8 + 17)
        let v = [UInt8](repeating: 3, count: 20 * 8 + 17)
        let yBase = y.withUnsafeBytes { $0.baseAddress! }, uBase = u.withUnsafeBytes { $0.baseAddress! }
        let vBase = v.withUnsafeBytes { $0.baseAddress! }
        let i420 = try PixelBufferView.withI420(
            width: 33, height: 10, y: y.span.bytes, strideY: 40, u: u.span.bytes, strideU: 20, v: v.span.bytes, strideV: 20
        ) { view in
            (
                view.format, view.stride(ofPlane: 0), view.stride(ofPlane: 2), view.base(ofPlane: 0) == yBase,
                view.base(ofPlane: 1) == uBase, view.base(ofPlane: 2) == vBase
            )
        }
        #expect(i420.0 == .i420 && i420.1 == 40 && i420.2 == 20 && i420.3 && i420.4 && i420.5)
        let nv12 = try PixelBufferView.withNV12(
            width: 33, height: 10, y: y.span.bytes, strideY: 40, uv: y.span.bytes, strideUV: 40
        ) {
            ($0.planeCount, $0.format)
        }
        #expect(nv12 == (2, .nv12))
        let nv21 = try PixelBufferView.withNV21(
            width: 33, height: 10, y: y.span.bytes, strideY: 40, vu: y.span.bytes, strideVU: 40
        ) {
            $0.format
        }
        #expect(nv21 == .nv21)
        let packed = try PixelBufferView.withPacked(format: .bgra, width: 9, height: 9, data: y.span.bytes, stride: 40) {
            ($0.width, $0.height, $0.stride(ofPlane: 0))
        }
        #expect(packed == (9, 9, 40))
        let raw = [UInt8](repeating: 0, count: PixelBufferView.byteCount(for: .i420, width: 33, height: 17))
        let strides = try PixelBufferView.withContiguous(raw.span.bytes, format: .i420, width: 33, height: 17) {
            [$0.stride(ofPlane: 0), $0.stride(ofPlane: 1), $0.stride(ofPlane: 2)]
        }
        #expect(strides == [33, 17, 17])

        var called = false
        #expect(throws: ColorConversionError.self) {
            try PixelBufferView.withPacked(format: .bgra, width: 11, height: 9, data: y.span.bytes, stride: 44) { _ in
                called = true
            }
        }
        #expect(throws: ColorConversionError.self) {
            try PixelBufferView.withContiguous(raw.span.bytes.extracting(0..<100), format: .i420, width: 33, height: 17) { _ in
                called = true
            }
        }
        #expect(!called)
    }

    @Test func rejectsBadSizesStridesAndBuffers() throws {
        let bytes = [UInt8](repeating: 0, count: 64 * 48 * 4)
        try bytes.withUnsafeBytes { raw in
            #expect(throws: ColorConversionError.invalidSize) {
                try PixelBufferView.packed(format: .bgra, width: 0, height: 48, data: raw, stride: 256)
            }
            #expect(throws: ColorConversionError.invalidSize) {
                try PixelBufferView.packed(format: .bgra, width: 64, height: -2, data: raw, stride: 256)
            }
            #expect(throws: ColorConversionError.invalidSize) {
                try PixelBufferView.contiguous(raw, format: .i420, width: 20_000, height: 2)
            }
            #expect(throws: ColorConversionError.invalidStride) {
                try PixelBufferView.packed(format: .bgra, width: 64, height: 48, data: raw, stride: 255)
            }
            #expect(throws: ColorConversionError.invalidStride) {
                try PixelBufferView.packed(format: .yuy2, width: 63, height: 2, data: raw, stride: 126)  // needs 128
            }
            #expect(throws: ColorConversionError.bufferTooSmall) {
                try PixelBufferView.packed(format: .bgra, width: 64, height: 48, data: raw, stride: 260)
            }
            #expect(throws: ColorConversionError.bufferTooSmall) {
                try PixelBufferView.contiguous(
                    UnsafeRawBufferPointer(rebasing: raw[0..<(64 * 48 * 3 / 2 - 1)]),
                    format: .nv12, width: 64, height: 48)
            }
            #expect(throws: ColorConversionError.missingPlane) {
                try PixelBufferView.packed(
                    format: .rgb24, width: 4, height: 4,
                    data: UnsafeRawBufferPointer(start: nil, count: 0), stride: 12)
            }
            #expect(throws: ColorConversionError.unsupportedFormat) {
                try PixelBufferView.packed(format: .nv12, width: 64, height: 48, data: raw, stride: 64)
            }
            // Planar: U plane stride below the half width, V plane one byte short.
            let y = UnsafeRawBufferPointer(rebasing: raw[0..<(16 * 16)])
            let c = UnsafeRawBufferPointer(rebasing: raw[0..<64])
            #expect(throws: ColorConversionError.invalidStride) {
                try PixelBufferView.i420(width: 16, height: 16, y: y, strideY: 16, u: c, strideU: 7, v: c, strideV: 8)
            }
            #expect(throws: ColorConversionError.bufferTooSmall) {
                try PixelBufferView.i420(
                    width: 16, height: 16, y: y, strideY: 16, u: c, strideU: 8,
                    v: UnsafeRawBufferPointer(rebasing: raw[0..<63]), strideV: 8)
            }
            #expect(throws: ColorConversionError.bufferTooSmall) {
                try PixelBufferView.nv21(
                    width: 15, height: 15, y: UnsafeRawBufferPointer(rebasing: raw[0..<225]), strideY: 15,
                    vu: UnsafeRawBufferPointer(rebasing: raw[0..<127]), strideVU: 16)  // 8 rows x 16
            }
            // A valid odd-size NV21 is accepted.
            _ = try PixelBufferView.nv21(
                width: 15, height: 15, y: UnsafeRawBufferPointer(rebasing: raw[0..<225]), strideY: 15,
                vu: UnsafeRawBufferPointer(rebasing: raw[0..<128]), strideVU: 16)
        }
    }

}
