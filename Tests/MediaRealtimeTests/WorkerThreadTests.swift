import MediaCore
import MediaTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct WorkerThreadTests {
    final class Stage: @unchecked Sendable {
        let ring = SPSCRing<Int>(capacity: 64)
        let processed = Atomic<Int>(0)
        let sum = Atomic<Int>(0)
        let passes = Atomic<Int>(0)
        lazy var worker = WorkerThread(name: "test-stage") { [unowned self] in
            self.passes.add(1, ordering: .relaxed)
            var did = false
            while let v = self.ring.tryPop() {
                self.sum.add(v, ordering: .relaxed)
                self.processed.add(1, ordering: .releasing)
                did = true
            }
            return did
        }
    }

    private func waitUntil(_ condition: () -> Bool) -> Bool {
        for _ in 0..<20_000 { if condition() { return true }; usleep(500) }  // up to 10 s
        return condition()
    }

    @Test func wakesOnEveryPushAndProcessesEverything() {
        let stage = Stage()
        stage.worker.start()
        let n = 50_000
        for i in 1...n {
            while !stage.ring.tryPush(i) { stage.worker.wake(); sched_yield() }
            stage.worker.wake()
            if i % 5000 == 0 { usleep(2000) }  // let the worker fall asleep now and then
        }
        #expect(waitUntil { stage.processed.load(ordering: .acquiring) == n })
        stage.worker.stop()
        #expect(stage.sum.load(ordering: .relaxed) == n * (n + 1) / 2)
        #expect(!stage.worker.isRunning)
    }

    @Test func sleepsWhenIdleInsteadOfSpinning() {
        let stage = Stage()
        stage.worker.start()
        #expect(stage.ring.tryPush(1))
        stage.worker.wake()
        #expect(waitUntil { stage.processed.load(ordering: .acquiring) == 1 })
        usleep(20_000)
        let before = stage.passes.load(ordering: .relaxed)
        usleep(100_000)
        // Asleep on its semaphore: no body calls while nothing is pushed.
        #expect(stage.passes.load(ordering: .relaxed) == before)
        #expect(stage.ring.tryPush(2))
        stage.worker.wake()
        #expect(waitUntil { stage.processed.load(ordering: .acquiring) == 2 })
        stage.worker.stop()
    }

    @Test func stopJoinsAndDrainsWorkPushedBeforeIt() {
        let stage = Stage()
        stage.worker.start()
        for i in 1...10 { #expect(stage.ring.tryPush(i)) }  // no wake: stop's last pass drains
        stage.worker.stop()
        #expect(stage.processed.load(ordering: .acquiring) == 10)
    }

    @Test func wakeAllocatesNothing() {
        let stage = Stage()
        stage.worker.start()
        let allocations = AllocationCounter.count {
            for i in 0..<2_000 {
                _ = stage.ring.tryPush(i)
                stage.worker.wake()
            }
        }
        stage.worker.stop()
        #expect(allocations == 0)
    }
}
