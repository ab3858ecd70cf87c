internal import CMediaShims
import MediaFrames

/// A streaming sample-rate converter (speexdsp `SpeexResamplerState`): any rate to any rate,
/// 1 or 2 interleaved channels, Int16 or Float32, from caller buffers into caller buffers.
///
/// Feed it chunks of any size: it keeps its filter history, so a signal fed in pieces gives the
/// same output as the signal fed at once. Output lags input by `inputLatency` input samples
/// (`outputLatency` output samples). Thread rule: one thread at a time (not `Sendable`).
/// Cost: a polyphase FIR whose length grows with `quality`; `process` never allocates.
public final class Resampler {
    /// Filter quality 0...10 (speexdsp `SPEEX_RESAMPLER_QUALITY_*`): higher is cleaner and slower.
    public struct Quality: Hashable, Sendable, Comparable {
        /// 0...10.
        public let rawValue: Int
        /// A quality 0...10; traps outside (a programmer error).
        public init(_ value: Int) {
            precondition((0...10).contains(value), "Resampler quality \(value) outside 0...10")
            rawValue = value
        }
        /// `SPEEX_RESAMPLER_QUALITY_MIN` (0): cheapest.
        public static let min = Quality(Int(SPEEX_RESAMPLER_QUALITY_MIN))
        /// `SPEEX_RESAMPLER_QUALITY_VOIP` (3): speexdsp's choice for voice calls.
        public static let voip = Quality(Int(SPEEX_RESAMPLER_QUALITY_VOIP))
        /// `SPEEX_RESAMPLER_QUALITY_DEFAULT` (4).
        public static let `default` = Quality(Int(SPEEX_RESAMPLER_QUALITY_DEFAULT))
        /// `SPEEX_RESAMPLER_QUALITY_DESKTOP` (5).
        public static let desktop = Quality(Int(SPEEX_RESAMPLER_QUALITY_DESKTOP))
        /// `SPEEX_RESAMPLER_QUALITY_MAX` (10): best and most expensive.
        public static let max = Quality(Int(SPEEX_RESAMPLER_QUALITY_MAX))
        /// Ordered by raw value.
        public static func < (lhs: Quality, rhs: Quality) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// Rates accepted (Hz); 8-96 kHz are the tested ones.
    public static let rateRange = 1_000...384_000

    /// Input rate in Hz.
    public let inputRate: Int
    /// Output rate in Hz.
    public let outputRate: Int
    /// Interleaved channels (1 or 2).
    public let channels: Int
    /// Filter quality chosen at creation.
    public let quality: Quality

    private let state: OpaquePointer

    /// Creates a resampler. Rates outside `rateRange` or channels other than 1-2 trap; throws
    /// `SpeexError` when speexdsp refuses or cannot allocate.
    public init(channels: Int, inputRate: Int, outputRate: Int, quality: Quality = .default) throws(SpeexError) {
        precondition(channels == 1 || channels == 2, "Resampler channels must be 1 or 2, not \(channels)")
        precondition(
            Self.rateRange.contains(inputRate) && Self.rateRange.contains(outputRate),
            "Resampler rates \(inputRate) -> \(outputRate) outside \(Self.rateRange)")
        var error: Int32 = 0
        guard
            let state = speex_resampler_init(
                UInt32(channels), UInt32(inputRate), UInt32(outputRate),
                Int32(quality.rawValue), &error), error == 0
        else {
            throw SpeexError(rawValue: error == 0 ? SpeexError.allocationFailed.rawValue : error)
        }
        self.state = state
        self.channels = channels
        self.inputRate = inputRate
        self.outputRate = outputRate
        self.quality = quality
    }

    deinit { speex_resampler_destroy(state) }

    /// Resamples interleaved Int16 `input` into `output` and returns how many frames (samples per
    /// channel) were consumed from `input` and produced into `output`.
    ///
    /// Consumes as much input as `output` has room for; feed the unconsumed rest again next time.
    /// Buffer counts must be whole multiples of `channels` (traps otherwise). Never allocates.
    package func process(_ input: UnsafeBufferPointer<Int16>, into output: UnsafeMutableBufferPointer<Int16>) -> (
        consumed: Int, produced: Int
    ) {
        var (inLength, outLength) = lengths(input.count, output.count)
        guard inLength > 0 || outLength > 0, let inBase = input.baseAddress, let outBase = output.baseAddress else {
            return (0, 0)
        }
        let status = speex_resampler_process_interleaved_int(state, inBase, &inLength, outBase, &outLength)
        precondition(status == 0, "speex_resampler_process_interleaved_int: \(SpeexError(rawValue: status))")
        return (Int(inLength), Int(outLength))
    }

    /// Float32 overload of `process(_:into:)` (any scale; the filter is linear).
    package func process(_ input: UnsafeBufferPointer<Float>, into output: UnsafeMutableBufferPointer<Float>) -> (
        consumed: Int, produced: Int
    ) {
        var (inLength, outLength) = lengths(input.count, output.count)
        guard inLength > 0 || outLength > 0, let inBase = input.baseAddress, let outBase = output.baseAddress else {
            return (0, 0)
        }
        let status = speex_resampler_process_interleaved_float(state, inBase, &inLength, outBase, &outLength)
        precondition(status == 0, "speex_resampler_process_interleaved_float: \(SpeexError(rawValue: status))")
        return (Int(inLength), Int(outLength))
    }

    private func lengths(_ inCount: Int, _ outCount: Int) -> (UInt32, UInt32) {
        precondition(
            inCount % channels == 0 && outCount % channels == 0,
            "Resampler buffers of \(inCount)/\(outCount) samples are not whole \(channels)-channel frames")
        return (UInt32(clamping: inCount / channels), UInt32(clamping: outCount / channels))
    }

    /// Output frames needed to take all of `inputFrames` input frames at once (an upper bound; size
    /// output buffers with it).
    public func maxOutputFrames(forInputFrames inputFrames: Int) -> Int {
        (inputFrames * outputRate + inputRate - 1) / inputRate + 1
    }

    /// Delay added by the filter, in input samples per channel (`speex_resampler_get_input_latency`).
    public var inputLatency: Int { Int(speex_resampler_get_input_latency(state)) }

    /// Delay added by the filter, in output samples per channel (`speex_resampler_get_output_latency`).
    public var outputLatency: Int { Int(speex_resampler_get_output_latency(state)) }

    /// Makes the next output start without the filter's leading zeros, i.e. aligned with the input
    /// (`speex_resampler_skip_zeros`). Call on a fresh or reset resampler, before the first `process`.
    public func skipLatency() { _ = speex_resampler_skip_zeros(state) }

    /// Clears the filter history, as for a new stream (`speex_resampler_reset_mem`).
    public func reset() { _ = speex_resampler_reset_mem(state) }
}

// MARK: Spans

extension Resampler {
    /// Resamples interleaved Int16 `input` into the front of `output` and returns how many frames
    /// (samples per channel) were consumed from `input` and produced into `output`. Consumes as
    /// much input as `output` has room for; feed the unconsumed rest again next time. Counts must
    /// be whole multiples of `channels` (traps otherwise). Never allocates.
    public func process(_ input: Span<Int16>, into output: inout MutableSpan<Int16>) -> (consumed: Int, produced: Int) {
        input.withUnsafeBufferPointer { i in output.withUnsafeMutableBufferPointer { process(i, into: $0) } }
    }

    /// The Float32 form of `process(_:into:)` (any scale; the filter is linear).
    public func process(_ input: Span<Float>, into output: inout MutableSpan<Float>) -> (consumed: Int, produced: Int) {
        input.withUnsafeBufferPointer { i in output.withUnsafeMutableBufferPointer { process(i, into: $0) } }
    }
}
