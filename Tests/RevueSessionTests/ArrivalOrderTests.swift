import Testing

@testable import RevueSession

/// The arrival-ordered key list the rendezvous node evicts from: oldest first whatever the keys
/// hash to, O(1) removal anywhere, a key appended twice keeping its first place.
@Suite struct ArrivalOrderTests {
    @Test func keepsArrivalOrderThroughRemovalsAnywhere() {
        var order = ArrivalOrder<Int>()
        #expect(order.isEmpty && order.first == nil)
        for key in [30, 10, 20, 40] { order.append(key) }
        order.append(10)  // already held: stays second
        #expect(order.first == 30)
        #expect(order.first { $0 < 25 } == 10)
        order.remove(30)  // the oldest
        #expect(order.first == 10)
        order.remove(20)  // a middle one
        #expect(order.first { $0 != 10 } == 40)
        order.remove(40)  // the newest
        order.append(5)
        #expect(order.first == 10)
        #expect(order.first { $0 < 10 } == 5)
        order.remove(99)  // not held: nothing changes
        order.remove(10)
        order.remove(5)
        #expect(order.isEmpty && order.first == nil && order.first { _ in true } == nil)
    }

    @Test func aThousandKeysComeBackInTheOrderTheyArrived() {
        var order = ArrivalOrder<[UInt8]>()
        let keys = (0..<1000).map { i in [UInt8(truncatingIfNeeded: i * 37), UInt8(truncatingIfNeeded: i >> 3)] }
        for key in keys { order.append(key) }
        for key in keys.enumerated().filter({ $0.offset % 3 == 0 }).map(\.element) { order.remove(key) }
        var seen: [[UInt8]] = []
        while let key = order.first {
            seen.append(key)
            order.remove(key)
        }
        #expect(seen == keys.enumerated().filter { $0.offset % 3 != 0 }.map(\.element))
    }
}
