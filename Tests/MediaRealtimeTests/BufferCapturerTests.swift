import Foundation
import MediaCore
import MediaTools
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct BufferCapturerTests {
    @Test func dropsOldestFrameWhenRingFull() throws {
        var config = sendTestVideoConfiguration()
        config.ringCapacity = 4
        let sink = MemoryPacketSink()
        let stream = try VideoSendStream(configuration: config, sink: sink)
        stream.startWithoutWorker()  // nothing drains the ring until pump()
        for i in 0..<10 {
            sendTestCapture(stream.capturer, sendTestFrame(i, width: 320, height: 240), timeStampNs: Int64(i) * 33_333_333)
        }
        let before = stream.statistics.capture
        #expect(before.captured == 10 && before.droppedRingFull == 6)
        stream.pump()
        stream.stop()
        let rx = try sendTestReceive(sink.takePackets(), codec: .vp8, key: nil)
        #expect(rx.frames.map(\.barcode) == [6, 7, 8, 9])  // the newest survive
        // Every pooled frame came back.
        #expect(stream.capturer.availableFrames == stream.capturer.poolSize)
    }

    @Test func droppedFramesAreRecycledThroughEveryRingPosition() throws {
        // 3 x capacity captures per pump round walk the ring's every wrap position.
        var config = sendTestVideoConfiguration(width: 64, height: 48)
        config.ringCapacity = 2
        let stream = try VideoSendStream(configuration: config, sink: MemoryPacketSink())
        stream.startWithoutWorker()
        let f = sendTestFrame(0, width: 64, height: 48)
        for round in 0..<8 {
            for k in 0...(round % 5) { sendTestCapture(stream.capturer, f, timeStampNs: Int64(round * 10 + k) * 33_333_333) }
            stream.pump()
        }
        stream.stop()
        let s = stream.statistics
        #expect(s.capture.captured == s.outbound.framesEncoded + s.capture.droppedRingFull)
        #expect(stream.capturer.availableFrames == stream.capturer.poolSize)
    }

    @Test func limitsFrameRateWhenAsked() throws {
        var config = sendTestVideoConfiguration(width: 64, height: 48)
        config.limitsFrameRate = true
        config.encoder.frameRate = 15
        let stream = try VideoSendStream(configuration: config, sink: MemoryPacketSink())
        stream.startWithoutWorker()
        let f = sendTestFrame(0, width: 64, height: 48)
        for i in 0..<30 { sendTestCapture(stream.capturer, f, timeStampNs: Int64(i) * 33_333_333); stream.pump() }
        stream.stop()
        let s = stream.statistics
        #expect(s.outbound.framesEncoded == 15 && s.capture.droppedFrameRate == 15)
    }

    @MainActor final class Recorder: VideoCapturerDelegate {
        var sizes: [VideoDimensions?] = []
        var states: [BufferCapturer.State] = []
        func capturer(_ capturer: BufferCapturer, didUpdate dimensions: VideoDimensions?) {
            MainActor.preconditionIsolated()  // traps unless the main actor's executor runs this
            sizes.append(dimensions)
        }
        func capturer(_ capturer: BufferCapturer, didUpdate state: BufferCapturer.State) {
            MainActor.preconditionIsolated()  // traps unless the main actor's executor runs this
            states.append(state)
        }
    }

    @MainActor @Test func delegateHearsSizeAndStateOnTheMainActor() async throws {
        let stream = try VideoSendStream(configuration: sendTestVideoConfiguration(), sink: MemoryPacketSink())
        let recorder = Recorder()
        stream.capturer.add(delegate: recorder)
        stream.start()
        let capturer = stream.capturer
        // Capture from another thread: 640x480, then 320x240 rotated 90 (240x320), twice each.
        runOnThreads(1) { _ in
            let big = sendTestFrame(0, width: 640, height: 480), small = sendTestFrame(0, width: 320, height: 240)
            sendTestCapture(capturer, big, timeStampNs: 0)
            sendTestCapture(capturer, big, timeStampNs: 1)
            withExtendedLifetime(small) { capturer.capture(sendTestView(small), timeStampNs: 2, rotation: .rotation90) }
            withExtendedLifetime(small) { capturer.capture(sendTestView(small), timeStampNs: 3, rotation: .rotation90) }
        }
        stream.stop()
        for _ in 0..<200 where recorder.states.count < 2 || recorder.sizes.count < 3 {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        #expect(recorder.states == [.started, .stopped])
        #expect(recorder.sizes == [VideoDimensions(width: 640, height: 480), VideoDimensions(width: 240, height: 320), nil])
    }
}
