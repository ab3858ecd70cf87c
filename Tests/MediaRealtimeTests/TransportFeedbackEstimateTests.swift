import Foundation
import Glibc
import MediaCore
import MediaTestSupport
import Testing

/// The sender's transport-cc bookkeeping allocates nothing once warm: logging sends, looking them
/// up, and matching a parsed feedback to the log (parsing the RTCP itself allocates its arrays).
/// Nor does the estimator, once each of its paths has run.
@Suite struct TransportFeedbackAllocationTests {
    @Test func sendLogAdapterAndEstimatorAllocateNothingOnceWarm() throws {
        let numbers = TransportSequenceNumbers(initial: 100)
        var builder = TransportFeedbackBuilder()
        var adapter = TransportFeedbackAdapter()
        var estimator = DelayBasedBandwidthEstimator(startBitrate: 1_000_000)
        var now: UInt64 = 1_000_000_000
        // One round: 30 packets 3 ms apart arriving 20 ms later.
        func round() throws -> RTCPTransportFeedback {
            for _ in 0..<30 {
                let seq = numbers.take(sendTime: MonotonicTime(nanoseconds: now), size: 1200)
                builder.packetArrived(sequenceNumber: seq, arrival: MonotonicTime(nanoseconds: now + 20_000_000))
                now += 3_000_000
            }
            let made = builder.makeFeedback(senderSSRC: 1, mediaSSRC: 2)
            return try #require(made)
        }
        for _ in 0..<20 {  // warm: the result array reaches its size
            let fb = try round()
            adapter.adapt(fb, sendLog: numbers)
            estimator.update(adapter.results, now: MonotonicTime(nanoseconds: now))
        }
        var feedbacks: [RTCPTransportFeedback] = []
        for _ in 0..<10 { feedbacks.append(try round()) }
        var sends = [UInt64](repeating: 0, count: 300)
        var found = 0
        let logging = AllocationCounter.count {
            for i in 0..<300 {
                sends[i] = UInt64(numbers.take(sendTime: MonotonicTime(nanoseconds: now + UInt64(i)), size: 1000))
            }
            for i in 0..<300 where numbers.sent(UInt16(truncatingIfNeeded: sends[i])) != nil { found += 1 }
        }
        var matched = 0
        let adapting = AllocationCounter.count {
            for k in 0..<feedbacks.count {
                adapter.adapt(feedbacks[k], sendLog: numbers)
                matched += adapter.results.count
            }
        }
        // The estimator's first pass over paths the warm-up did not take (its first decrease, the
        // link capacity) allocates once (runtime metadata); the second pass is the steady state.
        let estimatingFirst = AllocationCounter.count {
            for k in 0..<feedbacks.count {
                estimator.update(adapter.results, now: MonotonicTime(nanoseconds: UInt64(Int64(now) + Int64(k) * 100_000_000)))
            }
        }
        let estimating = AllocationCounter.count {
            for k in 0..<feedbacks.count {
                estimator.update(
                    adapter.results, now: MonotonicTime(nanoseconds: UInt64(Int64(now) + Int64(k + 10) * 100_000_000)))
            }
        }
        print(
            "transport-cc allocations: send log \(logging) for 300 packets, adapter \(adapting) for 10 feedbacks, "
                + "estimator \(estimatingFirst) then \(estimating) for 10 feedbacks")
        #expect(estimating == 0)
        #expect(logging == 0 && found == 300)
        #expect(adapting == 0 && adapter.unmatched == 0)
        #expect(matched == 300, "10 feedbacks of 30 packets, all in the log")
    }
}
