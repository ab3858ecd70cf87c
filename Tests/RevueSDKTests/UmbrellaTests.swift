import Testing
import RevueSDK

@Suite struct UmbrellaTests {
    @Test func umbrellaReexportsMediaCore() {
        let frame = VideoFrame(width: 2, height: 2)
        #expect(frame.chromaWidth == 1)
        #expect(PixelFormat.bgra.bytesPerPixel == 4)
    }
}
