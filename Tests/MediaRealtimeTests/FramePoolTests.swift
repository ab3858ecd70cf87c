import MediaCore
import MediaTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct FramePoolTests {
    @Test func returnsNilWhenExhaustedAndRecyclesReleasedFrames() {
        let pool = FramePool(width: 64, height: 48, count: 3)
        let frames = (0..<3).compactMap { _ in pool.acquire() }
        #expect(frames.count == 3)
        #expect(Set(frames.map(ObjectIdentifier.init)).count == 3)
        #expect(frames.allSatisfy { $0.width == 64 && $0.height == 48 })
        #expect(pool.acquire() == nil)
        #expect(pool.available == 0)
        pool.release(frames[1])
        let again = pool.acquire()
        #expect(again === frames[1])
        #expect(pool.acquire() == nil)
        for f in frames { pool.release(f) }
        #expect(pool.available == 3)
    }

    /// Four threads acquire, stamp, check and release frames as fast as they can: no frame is ever
    /// handed to two threads at once (the stamp would change under its holder).
    @Test func neverHandsOneFrameToTwoThreads() {
        let pool = FramePool(width: 16, height: 16, count: 3)
        let conflicts = Atomic<Int>(0)
        let acquired = Atomic<Int>(0)
        runOnThreads(4) { thread in
            for i in 0..<20_000 {
                guard let frame = pool.acquire() else { sched_yield(); continue }
                let stamp = Int64(thread) << 32 | Int64(i)
                frame.timestampNs = stamp
                frame.y[0] = UInt8(thread)
                if i % 16 == 0 { sched_yield() }
                if frame.timestampNs != stamp || frame.y[0] != UInt8(thread) { conflicts.add(1, ordering: .relaxed) }
                acquired.add(1, ordering: .relaxed)
                pool.release(frame)
            }
        }
        #expect(conflicts.load(ordering: .relaxed) == 0)
        #expect(acquired.load(ordering: .relaxed) > 0)
        #expect(pool.available == 3)
    }

    @Test func acquireAndReleaseAllocateNothing() {
        let pool = FramePool(width: 32, height: 32, count: 4)
        let audio = AudioFramePool(sampleFormat: .float32, sampleRate: 48_000, channels: 2, framesPerBuffer: 960, count: 4)
        var misses = 0
        let allocations = AllocationCounter.count {
            for _ in 0..<5_000 {
                if let a = pool.acquire(), let b = pool.acquire() { pool.release(a); pool.release(b) } else { misses += 1 }
                if let f = audio.acquire() { f.frameCount = 960; audio.release(f) } else { misses += 1 }
            }
        }
        #expect(allocations == 0)
        #expect(misses == 0)
    }

    @Test func audioPoolHandsOutResetFramesOfItsShape() {
        let pool = AudioFramePool(sampleFormat: .int16, sampleRate: 16_000, channels: 2, framesPerBuffer: 320, count: 2)
        guard let a = pool.acquire(), let b = pool.acquire() else { Issue.record("pool empty"); return }
        #expect(pool.acquire() == nil)
        a.frameCount = 320
        let count = a.withInt16Samples { samples in
            samples[639] = -7
            return samples.count
        }
        #expect(count == 640 && a.int16Samples[639] == -7)
        #expect(a.durationNs == 20_000_000)
        pool.release(a)
        let c = pool.acquire()
        #expect(c === a)
        #expect(c?.frameCount == 0)
        #expect(c?.channels == 2 && c?.capacity == 320 && c?.sampleRate == 16_000)
        pool.release(b)
        if let c { pool.release(c) }
        #expect(pool.available == 2)
    }
}
