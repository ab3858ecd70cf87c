import Foundation
// Capture hand-off rings: MPSCRing with 1 and 2 producers and SPSCRing, against a Mutex-protected
// fixed-capacity deque (what a lock-based queue costs), one consumer thread each; and MPSCRing with
// one producer against SPSCRing (what the multi-producer protocol costs when only one thread
// captures).
import MediaCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

enum RingSuite {
    /// The anchor: a bounded circular deque behind a `Mutex`.
    final class MutexDeque: @unchecked Sendable {
        struct State { var slots: [Int]; var head = 0; var count = 0 }
        let state: Mutex<State>
        let capacity: Int
        init(capacity: Int) { self.capacity = capacity; state = Mutex(State(slots: [Int](repeating: 0, count: capacity))) }
        func tryPush(_ v: Int) -> Bool {
            state.withLock { s in
                guard s.count < capacity else { return false }
                s.slots[(s.head + s.count) % capacity] = v
                s.count += 1
                return true
            }
        }
        func tryPop() -> Int? {
            state.withLock { s in
                guard s.count > 0 else { return nil }
                let v = s.slots[s.head]
                s.head = (s.head + 1) % capacity
                s.count -= 1
                return v
            }
        }
    }

    final class Box<T>: @unchecked Sendable { let value: T; init(_ v: T) { value = v } }
    final class Shared: Sendable { let start = Atomic<Bool>(false); let sum = Atomic<Int>(0) }

    /// Moves `items` integers from `producers` threads through push/pop to one consumer; items/s.
    static func transfer(
        items: Int, producers: Int, push: @escaping @Sendable (Int) -> Bool,
        pop: @escaping @Sendable () -> Int?
    ) -> Double {
        let perProducer = items / producers
        let total = perProducer * producers
        let shared = Shared()
        var threads: [pthread_t] = []
        func spawn(_ body: @escaping @Sendable () -> Void) {
            let ctx = Unmanaged.passRetained(Box(body)).toOpaque()
            var t = pthread_t()
            pthread_create(
                &t, nil,
                { raw in
                    Unmanaged<Box<@Sendable () -> Void>>.fromOpaque(raw!).takeRetainedValue().value()
                    return nil
                }, ctx)
            threads.append(t)
        }
        spawn {
            while !shared.start.load(ordering: .acquiring) {}
            var got = 0, s = 0, idle = 0
            while got < total {
                if let v = pop() { s &+= v; got += 1; idle = 0 } else { idle += 1; if idle > 64 { sched_yield() } }
            }
            shared.sum.store(s, ordering: .relaxed)
        }
        for p in 0..<producers {
            spawn {
                while !shared.start.load(ordering: .acquiring) {}
                var i = 0, idle = 0
                while i < perProducer {
                    if push(p &* perProducer &+ i) { i += 1; idle = 0 } else { idle += 1; if idle > 64 { sched_yield() } }
                }
            }
        }
        let t0 = nowNs()
        shared.start.store(true, ordering: .releasing)
        for t in threads { pthread_join(t, nil) }
        let elapsed = nowNs() - t0
        precondition(shared.sum.load(ordering: .relaxed) == (0..<total).reduce(0, &+), "ring lost or duplicated items")
        return Double(total) / (Double(elapsed) / 1e9)
    }

    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        let items = max(10_000, Int(1_000_000 * options.scale))
        let capacity = 1024
        for producers in [1, 2] {
            try compare(
                reporter, options, suite: "ring", case: "MPSC \(producers)P cap \(capacity)", metric: "items/s", unit: "1/s",
                higherIsBetter: true, anchorName: "Mutex deque"
            ) {
                let ring = MPSCRing<Int>(capacity: capacity)  // specialised here: the ring's calls are inlinable
                return transfer(items: items, producers: producers, push: { ring.tryPush($0) }, pop: { ring.tryPop() })
            } anchor: {
                let deque = MutexDeque(capacity: capacity)
                return transfer(items: items, producers: producers, push: { deque.tryPush($0) }, pop: { deque.tryPop() })
            }
        }
        try compare(
            reporter, options, suite: "ring", case: "SPSC 1P cap \(capacity)", metric: "items/s", unit: "1/s",
            higherIsBetter: true, anchorName: "Mutex deque"
        ) {
            let ring = SPSCRing<Int>(capacity: capacity)
            return transfer(items: items, producers: 1, push: { ring.tryPush($0) }, pop: { ring.tryPop() })
        } anchor: {
            let deque = MutexDeque(capacity: capacity)
            return transfer(items: items, producers: 1, push: { deque.tryPush($0) }, pop: { deque.tryPop() })
        }
        // The same single producer through both rings, interleaved: the MPSC ring's slot claiming
        // (compare-exchange claims on tail and head, per-slot sequence numbers) against the SPSC ring's plain
        // index stores.
        try compare(
            reporter, options, suite: "ring", case: "MPSC 1P vs SPSC cap \(capacity)", metric: "items/s", unit: "1/s",
            higherIsBetter: true, anchorName: "SPSC ring"
        ) {
            let ring = MPSCRing<Int>(capacity: capacity)
            return transfer(items: items, producers: 1, push: { ring.tryPush($0) }, pop: { ring.tryPop() })
        } anchor: {
            let ring = SPSCRing<Int>(capacity: capacity)
            return transfer(items: items, producers: 1, push: { ring.tryPush($0) }, pop: { ring.tryPop() })
        }
    }
}
