import MediaCore
import Testing

@Suite struct SendHistoryTests {
    func packet(_ seq: UInt16, size: Int = 100) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: Int(seq) &* 31 &+ $0) }
    }

    @Test func returnsTheStoredBytesForASequenceNumber() {
        let h = SendHistory(capacity: 16)
        for seq in UInt16(100)..<116 {
            let p = packet(seq)
            p.withUnsafeBytes { #expect(h.store(seq: seq, packet: $0, now: MonotonicTime(nanoseconds: 0))) }
        }
        for seq in UInt16(100)..<116 {
            var got: [UInt8] = []
            let r = h.retransmit(seq: seq, now: MonotonicTime(nanoseconds: 10)) { got = $0.withUnsafeBytes { Array($0) } }
            #expect(r == .found(count: 1))
            #expect(got == packet(seq))
        }
    }

    @Test func overwrittenSlotsAreMissingAcrossRollover() {
        let h = SendHistory(capacity: 8)
        // Store 65530...65535, 0...5: the slots of 65530..65533 are reused by 2..5.
        var seq: UInt16 = 65530
        for _ in 0..<12 {
            packet(seq).withUnsafeBytes { _ = h.store(seq: seq, packet: $0, now: MonotonicTime(nanoseconds: 0)) }
            seq &+= 1
        }
        for old: UInt16 in [65530, 65531, 65532, 65533] {
            #expect(h.retransmit(seq: old, now: MonotonicTime(nanoseconds: 0)) { _ in } == .missing)
        }
        for kept: UInt16 in [65534, 65535, 0, 1, 2, 3, 4, 5] {
            var got: [UInt8] = []
            #expect(
                h.retransmit(seq: kept, now: MonotonicTime(nanoseconds: 0)) { got = $0.withUnsafeBytes { Array($0) } }
                    == .found(count: 1))
            #expect(got == packet(kept))
        }
        #expect(h.retransmit(seq: 6, now: MonotonicTime(nanoseconds: 0)) { _ in } == .missing)
    }

    @Test func retransmissionsAreBoundedAndExpire() {
        let h = SendHistory(capacity: 8, maxAge: .nanoseconds(1_000))
        packet(7).withUnsafeBytes { _ = h.store(seq: 7, packet: $0, now: MonotonicTime(nanoseconds: 0)) }
        #expect(h.retransmit(seq: 7, now: MonotonicTime(nanoseconds: 5), maxRetransmissions: 2) { _ in } == .found(count: 1))
        #expect(h.retransmit(seq: 7, now: MonotonicTime(nanoseconds: 5), maxRetransmissions: 2) { _ in } == .found(count: 2))
        #expect(h.retransmit(seq: 7, now: MonotonicTime(nanoseconds: 5), maxRetransmissions: 2) { _ in } == .exhausted)
        packet(8).withUnsafeBytes { _ = h.store(seq: 8, packet: $0, now: MonotonicTime(nanoseconds: 0)) }
        #expect(h.retransmit(seq: 8, now: MonotonicTime(nanoseconds: 1_001)) { _ in } == .expired)
    }

    @Test func oversizedPacketsAreNotKept() {
        let h = SendHistory(capacity: 8, maxPacketSize: 64)
        packet(3, size: 65).withUnsafeBytes { #expect(!h.store(seq: 3, packet: $0, now: MonotonicTime(nanoseconds: 0))) }
        #expect(h.retransmit(seq: 3, now: MonotonicTime(nanoseconds: 0)) { _ in } == .missing)
        h.removeAll()
    }
}
