import MediaCore
import MediaTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct MPSCRingTests {
    @Test func popsNilWhenEmptyAndRefusesPushWhenFull() {
        let ring = MPSCRing<Int>(capacity: 4)
        #expect(ring.tryPop() == nil)
        for i in 0..<4 { #expect(ring.tryPush(i)) }
        #expect(!ring.tryPush(99))
        #expect(ring.count == 4)
        for i in 0..<4 { #expect(ring.tryPop() == i) }
        #expect(ring.tryPop() == nil)
        #expect(ring.isEmpty)
    }

    @Test(arguments: [2, 4, 8])
    func matchesModelAcrossEveryWrapAroundPosition(capacity: Int) {
        var starts: [UInt64] = [0, 1]
        for k in 0...(2 * capacity) { starts.append(UInt64.max &- UInt64(k)) }
        for start in starts {
            for fill in 0...capacity {
                let ring = MPSCRing<Int>(capacity: capacity, startIndex: start)
                var model: [Int] = []
                var next = 0
                var rng: UInt64 = start ^ UInt64(fill * 104_729)
                for _ in 0..<fill { #expect(ring.tryPush(next)); model.append(next); next += 1 }
                for _ in 0..<(6 * capacity) {
                    rng = rng &* 6364136223846793005 &+ 1442695040888963407
                    switch rng >> 62 {
                    case 0:
                        let accepted = ring.tryPush(next)
                        #expect(accepted == (model.count < capacity), "push at start \(start) fill \(fill)")
                        if accepted { model.append(next) }
                    case 1:
                        var dropped: [Int] = []
                        let accepted = ring.pushDroppingOldest(next) { dropped.append($0) }
                        #expect(accepted)
                        if model.count == capacity {
                            #expect(dropped == [model.removeFirst()], "drop at start \(start) fill \(fill)")
                        } else {
                            #expect(dropped.isEmpty)
                        }
                        model.append(next)
                    default:
                        let got = ring.tryPop()
                        #expect(got == model.first, "pop at start \(start) fill \(fill)")
                        if !model.isEmpty { model.removeFirst() }
                    }
                    next += 1
                    #expect(ring.count == model.count)
                }
            }
        }
    }

    @Test func dropsOldestWaitingElementWhenFull() {
        let ring = MPSCRing<Int>(capacity: 4)
        for i in 0..<4 { #expect(ring.tryPush(i)) }
        var dropped: [Int] = []
        #expect(ring.pushDroppingOldest(4) { dropped.append($0) })
        #expect(ring.pushDroppingOldest(5) { dropped.append($0) })
        #expect(dropped == [0, 1])
        var rest: [Int] = []
        while let v = ring.tryPop() { rest.append(v) }
        #expect(rest == [2, 3, 4, 5])
    }

    /// Four producers push `perProducer` tagged items each with drop-oldest into a small ring while
    /// one consumer drains it: every item ends up received or dropped, exactly once, and each
    /// producer's received items keep their order.
    @Test func everyItemReceivedOrDroppedExactlyOnceWithFourProducers() {
        let producers = 4, perProducer = 25_000
        let ring = MPSCRing<UInt64>(capacity: 8)
        let finished = Atomic<Int>(0)
        let received = Mutex<[UInt64]>([])
        let dropped = Mutex<[UInt64]>([])
        runOnThreads(producers + 1) { role in
            if role < producers {
                var mine: [UInt64] = []
                mine.reserveCapacity(perProducer)
                for seq in 0..<perProducer {
                    let item = UInt64(role) << 32 | UInt64(seq)
                    ring.pushDroppingOldest(item) { mine.append($0) }
                    if seq % 64 == 0 { sched_yield() }
                }
                dropped.withLock { $0 += mine }
                finished.add(1, ordering: .releasing)
            } else {
                var got: [UInt64] = []
                got.reserveCapacity(producers * perProducer)
                while true {
                    if let v = ring.tryPop() { got.append(v); continue }
                    if finished.load(ordering: .acquiring) == producers {
                        while let v = ring.tryPop() { got.append(v) }
                        break
                    }
                    sched_yield()
                }
                received.withLock { $0 = got }
            }
        }
        let got = received.withLock { $0 }
        let lost = dropped.withLock { $0 }
        #expect(got.count + lost.count == producers * perProducer)
        let all = Set(got).union(lost)
        #expect(all.count == producers * perProducer, "an item was received or dropped twice")
        #expect(Set(got).isDisjoint(with: lost))
        var last = [Int](repeating: -1, count: producers)
        var inOrder = true
        for item in got {
            let p = Int(item >> 32), seq = Int(item & 0xffff_ffff)
            if seq <= last[p] { inOrder = false }
            last[p] = seq
        }
        #expect(inOrder, "a producer's items were received out of order")
        #expect(got.count > 0)
    }

    /// Without dropping: producers retry when full, so every item arrives, in order per producer.
    @Test func deliversEverythingInOrderWhenProducersRetry() {
        let producers = 4, perProducer = 20_000
        let ring = MPSCRing<UInt64>(capacity: 16)
        let received = Mutex<[UInt64]>([])
        runOnThreads(producers + 1) { role in
            if role < producers {
                for seq in 0..<perProducer {
                    let item = UInt64(role) << 32 | UInt64(seq)
                    while !ring.tryPush(item) { sched_yield() }
                }
            } else {
                var got: [UInt64] = []
                got.reserveCapacity(producers * perProducer)
                while got.count < producers * perProducer {
                    if let v = ring.tryPop() { got.append(v) } else { sched_yield() }
                }
                received.withLock { $0 = got }
            }
        }
        let got = received.withLock { $0 }
        #expect(Set(got).count == producers * perProducer)
        var last = [Int](repeating: -1, count: producers)
        var inOrder = true
        for item in got {
            let p = Int(item >> 32), seq = Int(item & 0xffff_ffff)
            if seq != last[p] + 1 { inOrder = false }
            last[p] = seq
        }
        #expect(inOrder)
    }

    final class Payload { var value = 1 }

    @Test func pushPopAndDropOldestAllocateNothingOnceWarm() {
        let ring = MPSCRing<Payload>(capacity: 4)
        let items = (0..<8).map { _ in Payload() }
        for item in items { ring.pushDroppingOldest(item) { _ in } }
        while ring.tryPop() != nil {}
        var popped = 0, droppedCount = 0
        let allocations = AllocationCounter.count {
            for round in 0..<10_000 {
                if round % 3 == 0 {
                    ring.pushDroppingOldest(items[round & 7]) { droppedCount &+= $0.value }
                } else if !ring.tryPush(items[round & 7]) {
                    if let p = ring.tryPop() { popped &+= p.value }
                }
                if round % 7 == 0, let p = ring.tryPop() { popped &+= p.value }
            }
        }
        #expect(allocations == 0)
        #expect(droppedCount > 0)
        #expect(popped > 0)
    }
}
