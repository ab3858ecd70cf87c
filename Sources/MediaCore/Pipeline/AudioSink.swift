import Glibc
import Synchronization

/// Where a playout clock puts decoded audio: a sound card, a file, a test.
/// Thread rule: `play` is called on the playout thread every 10 ms; it must not block for long.
public protocol AudioSink: AnyObject, Sendable {
    /// Receives 10 ms of interleaved PCM at `sampleRate`; the buffer is valid only during the call.
    func play(_ samples: UnsafeBufferPointer<Int16>, sampleRate: Int, channels: Int)
}

/// A 10 ms clock thread that pulls an `AudioReceiveStream` and feeds an `AudioSink`, like an audio
/// device's callback driving NetEq's `GetAudio`. Uses absolute `clock_nanosleep` deadlines on
/// `CLOCK_MONOTONIC`, so the cadence does not drift.
/// Thread rule: `start`/`stop` from one controlling thread. Cost: one thread; no allocation per tick.
/// Sendable: `worker` is touched only by `start`/`stop` (one controlling thread) and deinit; the playout thread
/// uses only the Sendable stream and sink and the atomics in `control`.
public final class AudioPlayoutClock: @unchecked Sendable {
    private let stream: AudioReceiveStream
    private let sink: AudioSink
    private var worker: TransportThread?
    private let control = Control()

    private final class Control: Sendable {
        let stopping = Atomic<Bool>(false)
        let ticks = Atomic<Int>(0)
    }

    /// Prepares a clock for `stream` into `sink`.
    public init(stream: AudioReceiveStream, sink: AudioSink) {
        self.stream = stream
        self.sink = sink
    }

    deinit { stop() }

    /// Pulls done so far.
    public var tickCount: Int { control.ticks.load(ordering: .relaxed) }

    /// Starts the clock thread. Calling it twice traps.
    public func start() {
        precondition(worker == nil, "AudioPlayoutClock.start() called twice")
        control.stopping.store(false, ordering: .releasing)
        let stream = stream, sink = sink, box = control
        let ch = stream.settings.channels, rate = stream.settings.outputSampleRate
        worker = TransportThread(name: "AudioPlayoutClock") {
            let buffer = UnsafeMutableBufferPointer<Int16>.allocate(capacity: stream.samplesPerPull * ch)
            defer { buffer.deallocate() }
            var deadline = timespec()
            clock_gettime(CLOCK_MONOTONIC, &deadline)
            while !box.stopping.load(ordering: .acquiring) {
                let n = stream.pullAudio(into: buffer)
                sink.play(UnsafeBufferPointer(rebasing: buffer[0..<(n * ch)]), sampleRate: rate, channels: ch)
                box.ticks.add(1, ordering: .relaxed)
                deadline.tv_nsec += 10_000_000
                if deadline.tv_nsec >= 1_000_000_000 { deadline.tv_nsec -= 1_000_000_000; deadline.tv_sec += 1 }
                while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nil) == EINTR {}
            }
        }
    }

    /// Stops and joins the thread (within about 10 ms). Idempotent.
    public func stop() {
        control.stopping.store(true, ordering: .releasing)
        worker?.join()
        worker = nil
    }
}
