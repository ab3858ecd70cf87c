import RevueSDK
import Testing

/// What `import RevueSDK` brings of the media engine: the types a call hands an app work without
/// importing RevueMedia (this file imports RevueSDK only).
@Suite struct UmbrellaTests {
    @Test func frameAndPixelTypesComeWithTheSDK() {
        let frame = VideoFrame(width: 4, height: 2)
        #expect(frame.chromaWidth == 2)
        #expect(frame.withView { $0.width == 4 && $0.height == 2 && $0.strideY >= 4 })
        // The planes as spans: a Y row of 4, chroma rows of 2, two rows each of Y, one of U and V.
        let sizes = frame.withView { view in view.withPlanes { y, u, v in [y.count, u.count, v.count] } }
        #expect(sizes == [frame.strideY + 4, 2, 2])
        #expect(PixelFormat.bgra.bytesPerPixel == 4)
        #expect(VideoDimensions(width: 640, height: 360).description == "640x360")
        #expect(VideoRotation.allCases.count == 4)
    }

    @Test func latestFrameRendererStartsEmpty() {
        let renderer: any VideoRenderer = LatestFrameRenderer()
        let latest = renderer as! LatestFrameRenderer
        #expect(latest.frameCount == 0)
        #expect(latest.withLatestFrame { $0 == nil })
    }
}
