#if canImport(Glibc)
    import Testing
    import Foundation
    import Glibc
    @testable import MediaCore
    import MediaTestSupport

    /// Counts heap allocations on the per-packet path exactly, with the one allocation counter of the
    /// test suite (`AllocationCounter`, MediaTestSupport): it counts only the measuring thread, so the
    /// test runner's own threads cannot add noise and the bound is exactly zero.
    @Suite struct RTPHotPathAllocationTests {
        /// Frames in the measured window: 26 VP8 + 26 VP9 + 1 Opus packets each, about 32_000 packets.
        static let measuredFrames = 600

        /// The steady-state send and receive path: packetize (VP8, VP9, Opus), marshal with header
        /// extensions, parse, reception statistics, depacketize.
        static func hotLoop(
            frames: Int, state: inout (VP8Packetizer, VP9Packetizer, RTPHeader, RTPSequencer, RTPClock, RTPReceptionStatistics),
            depacketizer: VP8Depacketizer, frame: UnsafeRawBufferPointer, opus: UnsafeRawBufferPointer,
            out: UnsafeMutableRawBufferPointer, probe: Bool = false
        ) -> Int {
            var total = 0
            for f in 0..<frames {
                state.2.timestamp = state.4.timestamp(captureNs: Int64(f) * 33_333_333)
                state.2.extensions.setAbsSendTime(RTPAbsSendTime(nanoseconds: UInt64(f) * 33_333_333), id: 3)
                let plan = state.0.packetize(frameSize: frame.count, maxPayloadSize: state.2.maxPayloadSize(mtu: 1200))
                for i in 0..<plan.count {
                    state.2.sequenceNumber = state.3.next()
                    state.2.extensions.setTransportSequenceNumber(state.2.sequenceNumber, id: 5)
                    // VP8 through an OutputRawSpan made here; VP9 and Opus through `appending` on the
                    // buffer, as the send paths write into theirs.
                    var span = OutputRawSpan(buffer: out, initializedCount: 0)
                    let n = plan.writePacket(at: i, header: &state.2, of: frame.bytes, into: &span)
                    guard let pkt = try? RTPPacket(parsing: UnsafeRawBufferPointer(rebasing: out[0..<n]).bytes) else { return -1 }
                    state.5.update(
                        sequenceNumber: pkt.header.sequenceNumber, timestamp: pkt.header.timestamp,
                        arrival: MonotonicTime(nanoseconds: UInt64(Int64(f))))
                    if let r = try? depacketizer.push(pkt, in: out.bytes.extracting(0..<n)), let fr = r.frame {
                        total &+= fr.data.count
                    }
                }
                let plan9 = state.1.packetize(
                    frameSize: frame.count, maxPayloadSize: 1180, keyframe: f % 10 == 0, width: 640, height: 480)
                for i in 0..<plan9.count {
                    total &+= out.appending { plan9.writePacket(at: i, header: &state.2, of: frame.bytes, into: &$0) }
                }
                if probe { total &+= [Int](repeating: f, count: 3).count }
                let opusPlan = OpusPayload.packetize(frameSize: opus.count, maxPayloadSize: 1180)
                total &+= out.appending { opusPlan.writePacket(at: 0, header: &state.2, of: opus.bytes, into: &$0) }
            }
            return total
        }

        @Test func packetPathAllocatesNothingOnceWarm() throws {
            let frame = UnsafeMutableRawBufferPointer.allocate(byteCount: 30_000, alignment: 16)
            let opus = UnsafeMutableRawBufferPointer.allocate(byteCount: 120, alignment: 16)
            let out = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
            defer { frame.deallocate(); opus.deallocate(); out.deallocate() }
            for i in 0..<frame.count { frame[i] = UInt8(truncatingIfNeeded: i &* 7) }
            for i in 0..<opus.count { opus[i] = UInt8(truncatingIfNeeded: i) }
            var state = (
                VP8Packetizer(pictureID: 1), VP9Packetizer(pictureID: 1), RTPHeader(payloadType: 96, ssrc: 1),
                RTPSequencer(initial: 65_000), RTPClock(rate: 90_000), RTPReceptionStatistics(ssrc: 1, clockRate: 90_000)
            )
            let depacketizer = VP8Depacketizer()
            _ = Self.hotLoop(
                frames: 5, state: &state, depacketizer: depacketizer, frame: UnsafeRawBufferPointer(frame),
                opus: UnsafeRawBufferPointer(opus), out: out)
            var total = 0
            let allocations = AllocationCounter.count {
                total = Self.hotLoop(
                    frames: Self.measuredFrames, state: &state, depacketizer: depacketizer,
                    frame: UnsafeRawBufferPointer(frame), opus: UnsafeRawBufferPointer(opus), out: out)
            }
            #expect(total > Self.measuredFrames * 30_000)
            #expect(allocations == 0)
            // The same loop with one array made per frame: the counter sees each of them.
            let probed = AllocationCounter.count {
                total = Self.hotLoop(
                    frames: 50, state: &state, depacketizer: depacketizer, frame: UnsafeRawBufferPointer(frame),
                    opus: UnsafeRawBufferPointer(opus), out: out, probe: true)
            }
            #expect(probed >= 50)
        }
    }
#endif
