import MediaCore
import MediaTestSupport
import Testing

/// A minimal RTP packet (12-byte header + `payload` bytes) for jitter buffer tests.
func jbPacket(_ seq: UInt16, ts: UInt32 = 0, payload: Int = 20, ssrc: UInt32 = 7) -> [UInt8] {
    var b = [UInt8](repeating: 0, count: 12 + payload)
    _ = b.withUnsafeMutableBytes {
        $0.appending { RTPHeader(payloadType: 96, sequenceNumber: seq, timestamp: ts, ssrc: ssrc).marshal(into: &$0) }
    }
    if payload > 0 { b[12] = UInt8(truncatingIfNeeded: seq) }
    return b
}

extension RTPJitterBuffer {
    @discardableResult
    func insert(_ bytes: [UInt8], seq: UInt16, ts: UInt32 = 0, at ns: UInt64) -> InsertResult {
        bytes.withUnsafeBytes { insert($0, sequenceNumber: seq, timestamp: ts, arrival: MonotonicTime(nanoseconds: ns)) }
    }
    /// Pops everything playable in order, returning the sequence numbers.
    func drainInOrder() -> [UInt16] {
        var out: [UInt16] = []
        while let p = popNext() { out.append(p.sequenceNumber) }
        return out
    }
}

@Suite struct RTPJitterBufferTests {
    @Test func putsReorderedPacketsBackInSequenceOrder() {
        let jb = RTPJitterBuffer(settings: JitterBufferSettings(capacity: 64), clockRate: 90_000)
        let order: [UInt16] = [10, 12, 11, 14, 13, 15]
        for (i, s) in order.enumerated() { jb.insert(jbPacket(s), seq: s, at: UInt64(i) * 1_000_000) }
        #expect(jb.drainInOrder() == [10, 11, 12, 13, 14, 15])
        #expect(jb.count == 0)
    }

    @Test func theStartMovesBackOnlyBeforeAnythingPlayed() {
        let jb = RTPJitterBuffer(settings: JitterBufferSettings(capacity: 64), clockRate: 90_000)
        jb.insert(jbPacket(0), seq: 0, at: 0)  // wraps: the packet before is 65535
        let first = jb.next!
        #expect(jb.extendStartBack() == first - 1)
        #expect(jb.hasHole && jb.popNext() == nil, "the packet before the first is waited for")
        jb.insert(jbPacket(65_535), seq: 65_535, at: 1)
        #expect(jb.drainInOrder() == [65_535, 0])
        #expect(jb.extendStartBack() == nil, "not once something played")
    }

    @Test func removesDuplicatesAndDropsWhatComesAfterItsTurn() {
        let jb = RTPJitterBuffer(settings: JitterBufferSettings(capacity: 64), clockRate: 90_000)
        #expect(jb.insert(jbPacket(100), seq: 100, at: 0) == .stored)
        #expect(jb.insert(jbPacket(100), seq: 100, at: 1) == .duplicate)
        #expect(jb.drainInOrder() == [100])
        #expect(jb.insert(jbPacket(100), seq: 100, at: 2) == .late)
        #expect(jb.insert(jbPacket(99), seq: 99, at: 3) == .late)
        #expect(jb.counters.duplicates == 1 && jb.counters.late == 2)
    }

    @Test func detectsGapsAndSkipsToTheNextPresentPacket() {
        let jb = RTPJitterBuffer(settings: JitterBufferSettings(capacity: 64), clockRate: 90_000)
        for s: UInt16 in [1, 2, 5, 6] { jb.insert(jbPacket(s), seq: s, at: 0) }
        #expect(jb.drainInOrder() == [1, 2])
        #expect(jb.hasHole)
        var missing: [Int64] = []
        jb.forEachMissing { missing.append($0) }
        #expect(missing.map { UInt16(truncatingIfNeeded: $0) } == [3, 4])
        #expect(jb.skipToNextPresent() == 2)
        #expect(jb.drainInOrder() == [5, 6])
        #expect(jb.insert(jbPacket(3), seq: 3, at: 0) == .late, "a packet given up on is late")
    }

    @Test(arguments: [UInt16(65530), 65535, 0, 32767, 32768])
    func followsSequenceNumbersAcrossEveryWrap(start: UInt16) {
        let jb = RTPJitterBuffer(settings: JitterBufferSettings(capacity: 16), clockRate: 90_000)
        jb.insert(jbPacket(start), seq: start, at: 0)
        var played = jb.drainInOrder()
        // Then pairs arriving swapped (k+1 before k), across the wrap.
        for k in stride(from: 1, to: 41, by: 2) {
            let a = start &+ UInt16(k), b = a &+ 1
            jb.insert(jbPacket(b), seq: b, at: UInt64(k))
            played += jb.drainInOrder()
            jb.insert(jbPacket(a), seq: a, at: UInt64(k))
            played += jb.drainInOrder()
        }
        #expect(played == (0...40).map { start &+ UInt16($0) })
        #expect(jb.counters.late == 0 && jb.counters.resets == 0)
    }

    @Test func neverHoldsMoreThanItsCapacityAndRestartsAfterAJump() {
        let jb = RTPJitterBuffer(settings: JitterBufferSettings(capacity: 32), clockRate: 90_000)
        jb.insert(jbPacket(0), seq: 0, at: 0)
        _ = jb.drainInOrder()
        // Packet 1 is lost; 2...31 wait behind the hole.
        for s: UInt16 in 2..<32 { #expect(jb.insert(jbPacket(s), seq: s, at: 0) == .stored) }
        #expect(jb.count == 30)
        // A packet beyond the window restarts the buffer rather than growing it.
        #expect(jb.insert(jbPacket(40), seq: 40, at: 0) == .reset)
        #expect(jb.count == 1 && jb.counters.resets == 1)
        #expect(jb.storageBytes == 32 * 1500)
        #expect(jb.insert(jbPacket(41, payload: 2000), seq: 41, at: 0) == .tooLarge)
    }

    @Test func aSenderRestartFarBehindRestartsTheBufferAfterTwoSequentialPackets() {
        let jb = RTPJitterBuffer(settings: JitterBufferSettings(capacity: 512), clockRate: 48_000)
        var playedBefore = 0
        for k in 0..<2000 {
            let s = UInt16(truncatingIfNeeded: 30_000 + k)
            jb.insert(jbPacket(s), seq: s, ts: UInt32(k * 960), at: UInt64(k) * 20_000_000)
            playedBefore += jb.drainInOrder().count
        }
        #expect(playedBefore == 2000)
        // The same SSRC starts again 10,000 sequence numbers back: the first packet is late (it
        // could be a stray), the second confirms the restart, and the rest play.
        var played = 0
        for k in 0..<2000 {
            let s = UInt16(truncatingIfNeeded: 22_000 + k)
            let r = jb.insert(jbPacket(s), seq: s, ts: UInt32(k * 960), at: UInt64(2000 + k) * 20_000_000)
            if k == 0 { #expect(r == .late) }
            if k == 1 { #expect(r == .reset) }
            played += jb.drainInOrder().count
        }
        #expect(played == 1999)
        #expect(jb.counters.late == 1 && jb.counters.resets == 1)
        #expect(jb.targetDelay < .milliseconds(100), "the new run's timestamps do not count as delay variation")
    }

    @Test func aSingleStrayPacketFarBehindDoesNotRestartTheBuffer() {
        let jb = RTPJitterBuffer(settings: JitterBufferSettings(capacity: 64), clockRate: 48_000)
        for s: UInt16 in 5000..<5100 {
            jb.insert(jbPacket(s), seq: s, at: 0)
            _ = jb.drainInOrder()
        }
        #expect(jb.insert(jbPacket(1000), seq: 1000, at: 0) == .late)
        // Not the stray's successor: the stream goes on where it was.
        #expect(jb.insert(jbPacket(5100), seq: 5100, at: 0) == .stored)
        #expect(jb.insert(jbPacket(1001), seq: 1001, at: 0) == .late)
        #expect(jb.insert(jbPacket(5101), seq: 5101, at: 0) == .stored)
        #expect(jb.drainInOrder() == [5100, 5101])
        #expect(jb.counters.resets == 0 && jb.counters.late == 2)
    }

    @Test func targetDelayFollowsMeasuredJitterWithinItsBounds() {
        var settings = JitterBufferSettings(capacity: 512, minimumDelayMilliseconds: 20, maximumDelayMilliseconds: 150)
        settings.jitterFactor = 1
        let steady = RTPJitterBuffer(settings: settings, clockRate: 90_000)
        let jittery = RTPJitterBuffer(settings: settings, clockRate: 90_000)
        let huge = RTPJitterBuffer(settings: settings, clockRate: 90_000)
        var rng = TestRandom(state: 3)
        for k in 0..<200 {
            let s = UInt16(k), ts = UInt32(k * 3000)
            let t = UInt64(k) * 33_333_333 + 1_000_000_000
            steady.insert(jbPacket(s), seq: s, ts: ts, at: t)
            jittery.insert(jbPacket(s), seq: s, ts: ts, at: t + UInt64(rng.next() % 60) * 1_000_000)
            huge.insert(jbPacket(s), seq: s, ts: ts, at: t + UInt64(rng.next() % 600) * 1_000_000)
        }
        #expect(steady.targetDelay >= .milliseconds(20) && steady.targetDelay < .milliseconds(25), "\(steady.targetDelay)")
        #expect(jittery.targetDelay > .milliseconds(50) && jittery.targetDelay <= .milliseconds(150), "\(jittery.targetDelay)")
        #expect(huge.targetDelay == .milliseconds(150), "capped at the maximum")
        #expect(jittery.jitterSeconds > steady.jitterSeconds)
    }

    @Test func insertAndPopAllocateNothing() {
        let jb = RTPJitterBuffer(settings: JitterBufferSettings(capacity: 64), clockRate: 90_000)
        let packets = (0..<200).map { jbPacket(UInt16($0), ts: UInt32($0) * 3000) }
        jb.insert(packets[0], seq: 0, at: 0)
        _ = jb.drainInOrder()
        let allocations = AllocationCounter.count {
            for k in 1..<200 {
                packets[k].withUnsafeBytes {
                    _ = jb.insert(
                        $0, sequenceNumber: UInt16(k), timestamp: UInt32(k) * 3000,
                        arrival: MonotonicTime(nanoseconds: UInt64(k) * 1000))
                }
                while jb.popNext() != nil {}
            }
        }
        #expect(allocations == 0)
    }
}
