import MediaCore
import MediaTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct SPSCRingTests {
    @Test func popsNilWhenEmptyAndRefusesPushWhenFull() {
        let ring = SPSCRing<Int>(capacity: 4)
        #expect(ring.tryPop() == nil)
        #expect(ring.isEmpty)
        for i in 0..<4 { #expect(ring.tryPush(i)) }
        #expect(!ring.tryPush(99))
        #expect(ring.count == 4)
        for i in 0..<4 { #expect(ring.tryPop() == i) }
        #expect(ring.tryPop() == nil)
        #expect(ring.tryPush(5))
        #expect(ring.tryPop() == 5)
    }

    /// Every start position near the UInt64 wrap, every fill level, checked step by step against
    /// an array model: counters wrap from UInt64.max to 0 at every slot offset.
    @Test(arguments: [2, 4, 8])
    func matchesModelAcrossEveryWrapAroundPosition(capacity: Int) {
        var starts: [UInt64] = [0, 1]
        for k in 0...(2 * capacity) { starts.append(UInt64.max &- UInt64(k)) }
        for start in starts {
            for fill in 0...capacity {
                let ring = SPSCRing<Int>(capacity: capacity, startIndex: start)
                var model: [Int] = []
                var next = 0
                var rng: UInt64 = start ^ UInt64(fill * 7919)
                for _ in 0..<fill { #expect(ring.tryPush(next)); model.append(next); next += 1 }
                for _ in 0..<(6 * capacity) {
                    rng = rng &* 6364136223846793005 &+ 1442695040888963407
                    if rng >> 63 == 0 {
                        let accepted = ring.tryPush(next)
                        #expect(accepted == (model.count < capacity), "push at start \(start) fill \(fill)")
                        if accepted { model.append(next) }
                        next += 1
                    } else {
                        let got = ring.tryPop()
                        #expect(got == model.first, "pop at start \(start) fill \(fill)")
                        if !model.isEmpty { model.removeFirst() }
                    }
                    #expect(ring.count == model.count)
                }
            }
        }
    }

    @Test func transfersEveryElementInOrderBetweenTwoThreads() {
        let ring = SPSCRing<Int>(capacity: 8)
        let n = 200_000
        let received = Mutex<[Int]>([])
        runOnThreads(2) { role in
            if role == 0 {
                var i = 0
                while i < n { if ring.tryPush(i) { i += 1 } else { sched_yield() } }
            } else {
                var got: [Int] = []
                got.reserveCapacity(n)
                while got.count < n { if let v = ring.tryPop() { got.append(v) } else { sched_yield() } }
                received.withLock { $0 = got }
            }
        }
        let got = received.withLock { $0 }
        #expect(got.count == n)
        #expect(got == Array(0..<n))
    }

    final class Payload { var value = 0 }

    @Test func pushAndPopAllocateNothingOnceWarm() {
        let ring = SPSCRing<Payload>(capacity: 8)
        let items = (0..<8).map { _ in Payload() }
        for item in items { _ = ring.tryPush(item) }  // warm: every slot used once
        while ring.tryPop() != nil {}
        var popped = 0
        let allocations = AllocationCounter.count {
            for round in 0..<10_000 {
                _ = ring.tryPush(items[round & 7])
                if round & 1 == 1 {
                    while let p = ring.tryPop() { popped &+= p.value &+ 1 }
                }
            }
        }
        #expect(allocations == 0)
        #expect(popped == 10_000)
    }
}
