#if canImport(Glibc)
import Testing
import Foundation
import Glibc
@testable import MediaCore

/// glibc's malloc debugging library, which implements `mtrace` (glibc 2.34 and later).
let rtpMallocDebugLibrary = ["/lib/x86_64-linux-gnu/libc_malloc_debug.so.0", "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0",
                             "/lib/aarch64-linux-gnu/libc_malloc_debug.so.0"].first { FileManager.default.fileExists(atPath: $0) }

// glibc's mcheck.h is not part of the Glibc module. A direct (linked) call is needed: the
// preloaded libc_malloc_debug.so.0 interposes these symbols, while a dlsym'd pointer did not
// start tracing in our tests.
@_silgen_name("mtrace") private func glibcMtrace()
@_silgen_name("muntrace") private func glibcMuntrace()

/// Counts heap allocations on the per-packet path exactly, with glibc's malloc tracer: the test
/// re-runs itself in a child process with `libc_malloc_debug.so.0` preloaded and `MALLOC_TRACE`
/// set; the child brackets the steady-state loop with `mtrace()`/`muntrace()`, and the parent
/// counts the allocation records in the trace.
@Suite(.enabled(if: rtpMallocDebugLibrary != nil, "libc_malloc_debug.so.0 not found"))
struct RTPHotPathAllocationTests {
    static let childFlag = "RTP_ALLOCATION_CHILD"
    /// Frames in the traced window: 26 VP8 + 26 VP9 + 1 Opus packets each, about 32_000 packets.
    static let tracedFrames = 600
    /// Allocations tolerated in the window. The tracer records every thread, and the test
    /// runner's own threads (Swift Testing, the concurrency runtime) allocate a few blocks now and
    /// then; one allocation per packet or per frame would show up as thousands. (A standalone
    /// release build of the same loop records exactly zero; with RTP_ALLOC_PROBE=1 the loop makes
    /// one array per frame and this test reports exactly 600.)
    static let runnerNoise = 16

    /// The steady-state send and receive path: packetize (VP8, VP9, Opus), marshal with header
    /// extensions, parse, reception statistics, depacketize.
    static func hotLoop(frames: Int, state: inout (VP8Packetizer, VP9Packetizer, RTPHeader, RTPSequencer, RTPClock, RTPReceptionStatistics),
                        depacketizer: VP8Depacketizer, frame: UnsafeRawBufferPointer, opus: UnsafeRawBufferPointer,
                        out: UnsafeMutableRawBufferPointer, probe: Bool = false) -> Int {
        var total = 0
        for f in 0..<frames {
            state.2.timestamp = state.4.timestamp(captureNs: Int64(f) * 33_333_333)
            state.2.extensions.setAbsSendTime(RTPAbsSendTime(nanoseconds: UInt64(f) * 33_333_333), id: 3)
            let plan = state.0.packetize(frame: frame, maxPayloadSize: state.2.maxPayloadSize(mtu: 1200))
            for i in 0..<plan.count {
                state.2.sequenceNumber = state.3.next()
                state.2.extensions.setTransportSequenceNumber(state.2.sequenceNumber, id: 5)
                let n = plan.writePacket(at: i, header: &state.2, into: out)
                guard let pkt = try? RTPPacket(parsing: UnsafeRawBufferPointer(rebasing: out[0..<n])) else { return -1 }
                state.5.update(sequenceNumber: pkt.header.sequenceNumber, timestamp: pkt.header.timestamp, arrivalNs: Int64(f))
                if let r = try? depacketizer.push(pkt), let fr = r.frame { total &+= fr.data.count }
            }
            let plan9 = state.1.packetize(frame: frame, maxPayloadSize: 1180, keyframe: f % 10 == 0, width: 640, height: 480)
            for i in 0..<plan9.count { total &+= plan9.writePacket(at: i, header: &state.2, into: out) }
            if probe { total &+= [Int](repeating: f, count: 3).count }
            let opusPlan = OpusPayload.packetize(frame: opus, maxPayloadSize: 1180)
            total &+= opusPlan.writePacket(at: 0, header: &state.2, into: out)
        }
        return total
    }

    @Test func packetPathAllocatesNothingOnceWarm() throws {
        let env = ProcessInfo.processInfo.environment
        if env[Self.childFlag] != nil {
            // Child: warm up, then trace exactly the steady-state loop.
            let frame = UnsafeMutableRawBufferPointer.allocate(byteCount: 30_000, alignment: 16)
            let opus = UnsafeMutableRawBufferPointer.allocate(byteCount: 120, alignment: 16)
            let out = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
            for i in 0..<frame.count { frame[i] = UInt8(truncatingIfNeeded: i &* 7) }
            for i in 0..<opus.count { opus[i] = UInt8(truncatingIfNeeded: i) }
            var state = (VP8Packetizer(pictureID: 1), VP9Packetizer(pictureID: 1), RTPHeader(payloadType: 96, ssrc: 1),
                         RTPSequencer(initial: 65_000), RTPClock(rate: 90_000), RTPReceptionStatistics(ssrc: 1, clockRate: 90_000))
            let depacketizer = VP8Depacketizer()
            _ = Self.hotLoop(frames: 5, state: &state, depacketizer: depacketizer, frame: UnsafeRawBufferPointer(frame),
                             opus: UnsafeRawBufferPointer(opus), out: out)
            glibcMtrace()
            let probe = env["RTP_ALLOC_PROBE"] != nil
            let total = Self.hotLoop(frames: Self.tracedFrames, state: &state, depacketizer: depacketizer, frame: UnsafeRawBufferPointer(frame),
                                     opus: UnsafeRawBufferPointer(opus), out: out, probe: probe)
            glibcMuntrace()
            #expect(total > Self.tracedFrames * 30_000)
            return
        }
        // Parent: run this test again in a child process under the malloc tracer.
        let trace = FileManager.default.temporaryDirectory.appendingPathComponent("rtp-mtrace-\(UUID().uuidString).txt").path
        defer { unlink(trace) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        p.arguments = ["--testing-library", "swift-testing", "--filter", "RTPHotPathAllocationTests"]
        var childEnv = env
        childEnv[Self.childFlag] = "1"
        childEnv["MALLOC_TRACE"] = trace
        childEnv["LD_PRELOAD"] = rtpMallocDebugLibrary!
        p.environment = childEnv
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "child test failed")
        let text = try String(contentsOfFile: trace, encoding: .utf8)
        let lines = text.split(separator: "\n")
        #expect(lines.first == "= Start" && lines.last == "= End", "no trace recorded: \(lines.prefix(3))")
        let allocations = lines.filter { $0.contains(" + 0x") }
        #expect(allocations.count <= Self.runnerNoise, "\(allocations.count) allocations: \(allocations.prefix(5))")
    }
}
#endif
