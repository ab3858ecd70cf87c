import Foundation
// The registry of benchmark suites; each suite file adds itself here.
import MediaCore

/// A named group of cases.
struct Suite: Sendable {
    var name: String
    var run: @Sendable (Reporter, BenchOptions) throws -> Void
}

enum Suites {
    static let all: [Suite] = [
        Suite(name: "speaking", run: SpeakingSuite.run),
        Suite(name: "ring", run: RingSuite.run), Suite(name: "convert", run: ConvertSuite.run),
        Suite(name: "videosend", run: VideoSendSuite.run), Suite(name: "audiosend", run: AudioSendSuite.run),
        Suite(name: "srtp", run: SRTPBenchSuite.run),
        Suite(name: "receive", run: ReceiveSuite.run),
        Suite(name: "playout", run: PlayoutSuite.run), Suite(name: "speech", run: SpeechSuite.run),
        Suite(name: "cli", run: CLISuite.run), Suite(name: "memory", run: MemorySuite.run),
        Suite(name: "session", run: SessionSuite.run), Suite(name: "ice", run: ICEBenchSuite.run),
        Suite(name: "webrtc", run: WebRTCSuite.run),
        // Root only, about 7 minutes; one scenario at a time with the names after it.
        Suite(name: "congestion", run: { try CongestionSuite.run($0, $1, only: []) }),
        Suite(name: "congestion-steps", run: { try CongestionSuite.run($0, $1, only: ["steps"]) }),
        Suite(name: "congestion-loss", run: { try CongestionSuite.run($0, $1, only: ["steps+1%loss"]) }),
        Suite(name: "congestion-tcp", run: { try CongestionSuite.run($0, $1, only: ["steps+TCP"]) }),
        Suite(name: "congestion-mixed", run: CongestionSuite.runMixed),
    ]
}

/// The speaking detector per 20 ms frame, against computing the level alone (its lower bound).
enum SpeakingSuite {
    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        let frames = Int(20_000 * options.scale)
        // 50 different frames so the optimiser cannot hoist the level out of the loop.
        var samples = [Float](repeating: 0, count: 960 * 50)
        for i in samples.indices {
            let gain = 0.3 + 0.01 * Double(i / 960)
            samples[i] = Float(sin(Double(i) * 0.05) * gain)
        }
        var detector = SpeakingDetector()
        var sink: Float = 0
        try compare(
            reporter, options, suite: "speaking", case: "level+detector 20ms@48k", metric: "frames/s", unit: "1/s",
            higherIsBetter: true, anchorName: "level only"
        ) {
            let t0 = nowNs()
            samples.withUnsafeBufferPointer { buf in
                for i in 0..<frames {
                    _ = detector.process(
                        levelDbov: Float(AudioLevel.dBov(UnsafeBufferPointer(rebasing: buf[(i % 50) * 960..<(i % 50 + 1) * 960])))
                    )
                }
            }
            return Double(frames) / (Double(nowNs() - t0) / 1e9)
        } anchor: {
            let t0 = nowNs()
            samples.withUnsafeBufferPointer { buf in
                for i in 0..<frames {
                    sink += Float(AudioLevel.dBov(UnsafeBufferPointer(rebasing: buf[(i % 50) * 960..<(i % 50 + 1) * 960])))
                }
            }
            return Double(frames) / (Double(nowNs() - t0) / 1e9)
        }
        if sink == .infinity { print("") }
    }
}
