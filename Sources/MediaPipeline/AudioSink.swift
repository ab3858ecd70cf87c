import Glibc
import MediaTransport
import Synchronization

/// Where a playout clock puts decoded audio: a sound card, a file, a test.
/// Thread rule: `play` is called on the playout thread every 10 ms; it must not block for long.
public protocol AudioSink: AnyObject, Sendable {
    /// Receives 10 ms of interleaved PCM at `sampleRate`, lent for the call.
    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int)
}

/// Where a playout clock of several streams (`AudioPlayoutClock(pipeline:sink:)`) puts each
/// stream's audio, named by its SSRC.
/// Thread rule: `play` is called on the playout thread, every stream every 10 ms; it must not
/// block for long.
public protocol AudioStreamSink: AnyObject, Sendable {
    /// Receives 10 ms of interleaved PCM of stream `ssrc` at `sampleRate`, lent for the call.
    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int, ssrc: UInt32)
}

/// A 10 ms clock thread that pulls audio streams and feeds sinks, like an audio device's
/// callback driving NetEq's `GetAudio`: one `AudioReceiveStream` into an `AudioSink`, or every
/// audio stream of a `ReceivePipeline` (an SFU subscription's participants) into an
/// `AudioStreamSink`, all on one thread. Uses absolute `clock_nanosleep` deadlines on
/// `CLOCK_MONOTONIC`, so the cadence does not drift.
/// Thread rule: `start`/`stop` from one controlling thread. Cost: one thread; no allocation per
/// tick (a pipeline's stream list is copied only when a stream appears).
/// Sendable: `worker` is touched only by `start`/`stop` (one controlling thread) and deinit; the playout thread
/// uses only the Sendable streams and sinks and the atomics in `control`.
public final class AudioPlayoutClock: @unchecked Sendable {
    private enum Source {
        case stream(AudioReceiveStream, AudioSink)
        case pipeline(ReceivePipeline, AudioStreamSink)
    }
    private let source: Source
    private var worker: TransportThread?
    private let control = Control()

    private final class Control: Sendable {
        let stopping = Atomic<Bool>(false)
        let ticks = Atomic<Int>(0)
    }

    /// Prepares a clock for `stream` into `sink`.
    public init(stream: AudioReceiveStream, sink: AudioSink) {
        source = .stream(stream, sink)
    }

    /// Prepares a clock for every audio stream `pipeline` has now or starts later, into `sink`.
    public init(pipeline: ReceivePipeline, sink: AudioStreamSink) {
        source = .pipeline(pipeline, sink)
    }

    deinit { stop() }

    /// Pulls done so far (one per 10 ms, whatever the number of streams).
    public var tickCount: Int { control.ticks.load(ordering: .relaxed) }

    /// Starts the clock thread. Calling it twice traps.
    public func start() {
        precondition(worker == nil, "AudioPlayoutClock.start() called twice")
        control.stopping.store(false, ordering: .releasing)
        let source = source, box = control
        worker = TransportThread(name: "AudioPlayoutClock") {
            // Every stream of a pipeline shares the first one's settings, so one buffer serves all.
            var buffer = UnsafeMutableBufferPointer<Int16>.allocate(capacity: 0)
            defer { buffer.deallocate() }
            func fit(_ stream: AudioReceiveStream) {
                let need = stream.samplesPerPull * stream.settings.channels
                guard buffer.count < need else { return }
                buffer.deallocate()
                buffer = .allocate(capacity: need)
            }
            func pull(_ stream: AudioReceiveStream, _ play: (Span<Int16>, Int, Int) -> Void) {
                let ch = stream.settings.channels
                let n = stream.pullAudio(into: UnsafeMutableBufferPointer(rebasing: buffer[0..<(stream.samplesPerPull * ch)]))
                play(UnsafeBufferPointer(rebasing: buffer[0..<(n * ch)]).span, stream.settings.outputSampleRate, ch)
            }
            var streams: [(ssrc: UInt32, stream: AudioReceiveStream)] = []
            var generation = -1
            if case .stream(let stream, _) = source { fit(stream) }
            var deadline = timespec()
            clock_gettime(CLOCK_MONOTONIC, &deadline)
            while !box.stopping.load(ordering: .acquiring) {
                switch source {
                case .stream(let stream, let sink):
                    pull(stream) { sink.play($0, sampleRate: $1, channels: $2) }
                case .pipeline(let pipeline, let sink):
                    let g = pipeline.audioStreamsGeneration
                    if g != generation {
                        generation = g
                        streams = pipeline.audioStreams
                        for s in streams { fit(s.stream) }
                    }
                    for (ssrc, stream) in streams {
                        pull(stream) { sink.play($0, sampleRate: $1, channels: $2, ssrc: ssrc) }
                    }
                }
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
