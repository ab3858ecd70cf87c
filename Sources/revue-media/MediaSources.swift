// Where encode and send get their media: a Y4M or WAV file, or a built-in synthetic pattern.
import MediaCore
import RevueCommandLine
import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A source of I420 frames at a constant frame rate.
protocol VideoSource: AnyObject {
    /// What to call the source in messages (`input.y4m`, `pattern moving`).
    var name: String { get }
    var width: Int { get }
    var height: Int { get }
    var frameRate: ContainerRational { get }
    /// Frames the source will deliver, when known (for progress).
    var frameCount: Int? { get }
    /// Fills `frame` (the source's size) with the next picture; false at the end.
    func next(into frame: VideoFrame) throws -> Bool
}

/// A source of interleaved Float samples.
protocol AudioSource: AnyObject {
    var name: String { get }
    var sampleRate: Int { get }
    var channels: Int { get }
    /// Sample frames the source will deliver, when known.
    var frameCount: Int64? { get }
    /// Reads up to `buffer.count / channels` frames; returns the frames read, 0 at the end.
    func read(into buffer: UnsafeMutableBufferPointer<Float>) throws -> Int
}

/// The pattern names `--pattern` accepts for video.
enum VideoPatternName {
    static let names = ["moving", "video", "bars"]
    static func isVideo(_ name: String) -> Bool { names.contains(name.lowercased()) }
}

/// Frames from a Y4M file, optionally scaled to another size and limited to a frame count.
final class Y4MVideoSource: VideoSource {
    let reader: Y4MReader
    let width: Int
    let height: Int
    let frameRate: ContainerRational
    var limit: Int?
    private var delivered = 0
    private let scratch: VideoFrame?
    private let converter = ColorConverter()

    init(path: String, size: (width: Int, height: Int)?, frameRate: ContainerRational?, limit: Int?) throws {
        reader = try Y4MReader(path: path)
        width = size?.width ?? reader.width
        height = size?.height ?? reader.height
        self.frameRate = frameRate ?? reader.frameRate
        guard self.frameRate.numerator > 0, self.frameRate.denominator > 0 else {
            throw InputError(description: "\(path): frame rate \(reader.frameRate) is not usable (use --fps)")
        }
        self.limit = limit
        scratch = (width != reader.width || height != reader.height) ? reader.makeFrame() : nil
    }

    var name: String { reader.path }
    var frameCount: Int? {
        if let estimate = reader.estimatedFrameCount { return limit.map { min($0, estimate) } ?? estimate }
        return limit
    }

    func next(into frame: VideoFrame) throws -> Bool {
        if let limit, delivered >= limit { return false }
        if let scratch {
            guard try reader.readFrame(into: scratch) else { return false }
            do { try converter.scale(scratch.view, into: frame, filter: .box) } catch {
                throw InputError(description: "\(reader.path): frame \(delivered): cannot scale to \(width)x\(height): \(error)")
            }
        } else {
            guard try reader.readFrame(into: frame) else { return false }
        }
        delivered += 1
        return true
    }
}

/// The synthetic moving picture (`SyntheticVideo`): gradient, checkerboard, zone plate, a
/// bouncing box, the frame number and a bar code of the frame index.
final class PatternVideoSource: VideoSource {
    let name: String
    let width: Int
    let height: Int
    let frameRate: ContainerRational
    let frameCount: Int?
    private var index = 0

    init(name: String, width: Int, height: Int, frameRate: ContainerRational, frames: Int?) {
        self.name = "pattern \(name)"
        self.width = width
        self.height = height
        self.frameRate = frameRate
        frameCount = frames
    }

    func next(into frame: VideoFrame) throws -> Bool {
        if let frameCount, index >= frameCount { return false }
        SyntheticVideo.render(frameIndex: index, into: frame)
        index += 1
        return true
    }
}

/// Samples from a WAV file (16-bit or float, any rate, 1-2 channels), optionally limited.
final class WAVAudioSource: AudioSource {
    let reader: WAVReader
    let limit: Int64?
    private var delivered: Int64 = 0

    init(path: String, limit: Int64?) throws {
        reader = try WAVReader(path: path)
        self.limit = limit
    }

    var name: String { reader.path }
    var sampleRate: Int { reader.sampleRate }
    var channels: Int { reader.channelCount }
    var frameCount: Int64? {
        if let known = reader.frameCount { return limit.map { min($0, known) } ?? known }
        return limit
    }

    func read(into buffer: UnsafeMutableBufferPointer<Float>) throws -> Int {
        var room = buffer.count / channels
        if let limit { room = Int(min(Int64(room), limit - delivered)) }
        guard room > 0 else { return 0 }
        var span = UnsafeMutableBufferPointer(rebasing: buffer[0..<(room * channels)]).mutableSpan
        let n = try reader.read(into: &span)
        delivered += Int64(n)
        return n
    }
}

/// A synthetic signal (`SyntheticAudio`: tone, speech, noise, silence) of a given length.
final class PatternAudioSource: AudioSource {
    let name: String
    let sampleRate: Int
    let channels: Int
    let frameCount: Int64?
    private var generator: SyntheticAudio
    private var delivered: Int64 = 0
    private let beeps: Bool

    /// With `beepEverySecond`, a 50 ms 1 kHz beep is added at the start of every second (the
    /// demo's lip-sync mark: the video frame captured at that instant is the marked one).
    init(
        pattern: SyntheticAudio.Pattern, name: String, sampleRate: Int, channels: Int, frames: Int64?,
        beepEverySecond: Bool = false
    ) {
        self.name = "pattern \(name)"
        self.sampleRate = sampleRate
        self.channels = channels
        frameCount = frames
        beeps = beepEverySecond
        generator = SyntheticAudio(pattern: pattern, sampleRate: sampleRate, channels: channels, amplitude: 0.5)
    }

    func read(into buffer: UnsafeMutableBufferPointer<Float>) throws -> Int {
        var room = buffer.count / channels
        if let frameCount { room = Int(min(Int64(room), frameCount - delivered)) }
        guard room > 0 else { return 0 }
        let out = UnsafeMutableBufferPointer(rebasing: buffer[0..<(room * channels)])
        generator.render(into: out)
        if beeps { Self.addBeeps(to: out, firstFrame: Int(delivered), sampleRate: sampleRate, channels: channels) }
        delivered += Int64(room)
        return room
    }

    /// Adds the once-a-second beep (50 ms of 1 kHz at 0.4 of full scale) to interleaved `samples`
    /// whose first frame is frame `firstFrame` of the stream.
    static func addBeeps(
        to samples: UnsafeMutableBufferPointer<Float>, firstFrame: Int, sampleRate: Int, channels: Int = 1
    ) {
        let beepFrames = sampleRate / 20
        for f in 0..<(samples.count / channels) {
            let n = firstFrame + f
            guard n % sampleRate < beepFrames else { continue }
            let v = Float(0.4 * sin(2 * Double.pi * 1_000 * Double(n) / Double(sampleRate)))
            for c in 0..<channels { samples[f * channels + c] += v }
        }
    }

    /// `addBeeps` on an array (the demo's reference signal).
    static func addBeeps(to samples: inout [Float], firstFrame: Int, sampleRate: Int) {
        samples.withUnsafeMutableBufferPointer { addBeeps(to: $0, firstFrame: firstFrame, sampleRate: sampleRate) }
    }
}
